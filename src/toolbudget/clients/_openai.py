"""``openai.OpenAI`` and ``openai.AsyncOpenAI``: ``chat.completions.create`` and ``responses.create``."""

from __future__ import annotations

import importlib
from typing import Any

from ._body import CallArgs, split
from ._call import Endpoint, Wrapping, acall, astream, call, stream
from ._proxy import AsyncClientProxy, ClientProxy, Proxy

__all__ = ["AsyncOpenAIClient", "OpenAIClient"]

CHAT = "openai-chat"
RESPONSES = "openai-responses"
_HISTORY = {CHAT: "messages", RESPONSES: "input"}


def _errors() -> tuple[type[BaseException], ...]:
    openai = importlib.import_module("openai")
    error: type[BaseException] = openai.APIError
    return (error,)


def _run(inner: Any, wrapping: Wrapping, api: str, kwargs: dict[str, Any]) -> Any:
    args: CallArgs = split(kwargs)
    if _HISTORY[api] not in args.body:
        return inner.create(**kwargs)  # nothing to manage (a server-side conversation), or a bad call
    if args.stream:
        return stream(wrapping, api, args.body, lambda body: inner.create(**args.kwargs(body)))
    return call(wrapping, Endpoint(api, inner.create, _errors()), args)


async def _arun(inner: Any, wrapping: Wrapping, api: str, kwargs: dict[str, Any]) -> Any:
    args: CallArgs = split(kwargs)
    if _HISTORY[api] not in args.body:
        return await inner.create(**kwargs)
    if args.stream:

        async def open_(body: Any) -> Any:
            return await inner.create(**args.kwargs(body))

        return await astream(wrapping, api, args.body, open_)
    return await acall(wrapping, Endpoint(api, inner.create, _errors()), args)


class _Completions(Proxy):
    def create(self, **kwargs: Any) -> Any:
        return _run(self._inner, self._wrapping, CHAT, kwargs)


class _AsyncCompletions(Proxy):
    async def create(self, **kwargs: Any) -> Any:
        return await _arun(self._inner, self._wrapping, CHAT, kwargs)


class _Chat(Proxy):
    @property
    def completions(self) -> Any:
        return _Completions(self._inner.completions, self._wrapping)


class _AsyncChat(Proxy):
    @property
    def completions(self) -> Any:
        return _AsyncCompletions(self._inner.completions, self._wrapping)


class _Responses(Proxy):
    def create(self, **kwargs: Any) -> Any:
        return _run(self._inner, self._wrapping, RESPONSES, kwargs)


class _AsyncResponses(Proxy):
    async def create(self, **kwargs: Any) -> Any:
        return await _arun(self._inner, self._wrapping, RESPONSES, kwargs)


class OpenAIClient(ClientProxy):
    """A managed ``openai.OpenAI`` (or ``AzureOpenAI``)."""

    @property
    def chat(self) -> Any:
        return _Chat(self._inner.chat, self._wrapping)

    @property
    def responses(self) -> Any:
        return _Responses(self._inner.responses, self._wrapping)


class AsyncOpenAIClient(AsyncClientProxy):
    """A managed ``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``)."""

    @property
    def chat(self) -> Any:
        return _AsyncChat(self._inner.chat, self._wrapping)

    @property
    def responses(self) -> Any:
        return _AsyncResponses(self._inner.responses, self._wrapping)
