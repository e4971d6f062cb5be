"""``anthropic.Anthropic`` and ``anthropic.AsyncAnthropic``: ``messages.create`` and ``messages.stream``."""

from __future__ import annotations

import importlib
from types import TracebackType
from typing import Any

from ._body import SDK_OPTIONS, CallArgs, split
from ._call import Endpoint, Wrapping, acall, astream, call, stream
from ._proxy import AsyncClientProxy, ClientProxy, Proxy

__all__ = ["AnthropicClient", "AsyncAnthropicClient"]

API = "anthropic"
OPTIONS = SDK_OPTIONS | {"user_profile_id", "workspace_id"}

# The SDK refuses a non-streaming call it expects to take over ten minutes: more than
# 60 min * max_tokens / 128,000 > 10 min, that is max_tokens over 21,333 (or a lower
# per-model limit), unless the call sets a timeout. Escalation stays under it.
_NONSTREAMING_CAP = 21_333


def _errors() -> tuple[type[BaseException], ...]:
    anthropic = importlib.import_module("anthropic")
    error: type[BaseException] = anthropic.APIError
    return (error,)


def _cap(args: CallArgs) -> int | None:
    if "timeout" in args.options:
        return None
    model = args.body.get("model")
    try:
        per_model: dict[str, int] = importlib.import_module("anthropic._constants").MODEL_NONSTREAMING_TOKENS
    except (ImportError, AttributeError):
        per_model = {}
    limit = per_model.get(model) if isinstance(model, str) else None
    return min(_NONSTREAMING_CAP, limit) if limit else _NONSTREAMING_CAP


class _Messages(Proxy):
    def create(self, **kwargs: Any) -> Any:
        args = split(kwargs, OPTIONS)
        if "messages" not in args.body:
            return self._inner.create(**kwargs)  # let the SDK say what is missing
        if args.stream:
            return stream(
                self._wrapping, API, args.body, lambda body: self._inner.create(**args.kwargs(body))
            )
        endpoint = Endpoint(API, self._inner.create, _errors(), _cap(args))
        return call(self._wrapping, endpoint, args)

    def stream(self, **kwargs: Any) -> Any:
        args = split(kwargs, OPTIONS)
        if "messages" not in args.body:
            return self._inner.stream(**kwargs)
        return _StreamManager(self._inner, self._wrapping, args)


class _StreamManager:
    """``messages.stream(...)``: the request is made on ``__enter__``, so recovery happens there.

    It yields the SDK's own ``MessageStream``; the manager itself is toolbudget's
    (the SDK's takes a prepared request, which recovery must be free to remake).
    """

    def __init__(self, messages: Any, wrapping: Wrapping, args: CallArgs) -> None:
        self._messages = messages
        self._wrapping = wrapping
        self._args = args
        self._manager: Any = None

    def _open(self, body: Any) -> Any:
        manager = self._messages.stream(**self._args.kwargs(body))
        opened = manager.__enter__()
        self._manager = manager
        return opened

    def __enter__(self) -> Any:
        return stream(self._wrapping, API, self._args.body, self._open)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._manager is not None:
            self._manager.__exit__(exc_type, exc, tb)


class _AsyncMessages(Proxy):
    async def create(self, **kwargs: Any) -> Any:
        args = split(kwargs, OPTIONS)
        if "messages" not in args.body:
            return await self._inner.create(**kwargs)
        if args.stream:

            async def open_(body: Any) -> Any:
                return await self._inner.create(**args.kwargs(body))

            return await astream(self._wrapping, API, args.body, open_)
        endpoint = Endpoint(API, self._inner.create, _errors(), _cap(args))
        return await acall(self._wrapping, endpoint, args)

    def stream(self, **kwargs: Any) -> Any:
        args = split(kwargs, OPTIONS)
        if "messages" not in args.body:
            return self._inner.stream(**kwargs)
        return _AsyncStreamManager(self._inner, self._wrapping, args)


class _AsyncStreamManager:
    """``async with messages.stream(...)``: :class:`_StreamManager` for the async SDK."""

    def __init__(self, messages: Any, wrapping: Wrapping, args: CallArgs) -> None:
        self._messages = messages
        self._wrapping = wrapping
        self._args = args
        self._manager: Any = None

    async def _open(self, body: Any) -> Any:
        manager = self._messages.stream(**self._args.kwargs(body))
        opened = await manager.__aenter__()
        self._manager = manager
        return opened

    async def __aenter__(self) -> Any:
        return await astream(self._wrapping, API, self._args.body, self._open)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._manager is not None:
            await self._manager.__aexit__(exc_type, exc, tb)


class AnthropicClient(ClientProxy):
    """A managed ``anthropic.Anthropic`` (or another sync client of the SDK with ``messages``)."""

    @property
    def messages(self) -> Any:
        return _Messages(self._inner.messages, self._wrapping)


class AsyncAnthropicClient(AsyncClientProxy):
    """A managed ``anthropic.AsyncAnthropic``."""

    @property
    def messages(self) -> Any:
        return _AsyncMessages(self._inner.messages, self._wrapping)
