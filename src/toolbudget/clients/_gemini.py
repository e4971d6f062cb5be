"""``google.genai.Client``, managed: ``models.generate_content`` and its kin, over the history they are given.

``generate_content`` takes ``contents`` in many Python forms. The one that can
hold a conversation with tool calls is a list of turns (``types.Content``
objects or their dicts); that is what is managed. Any other form (a string, a
part, a list of parts) is a single user turn with no history to pair or
budget, and goes to the SDK as given. The config stays the caller's: the flow
sees its ``system_instruction``, its tools that have a wire form and its
``max_output_tokens``, and only the last may come back changed (doubled after
a cut-off). A turn the flow did not change is sent as the caller's own object.

=======================================  ==========================================================
``models.generate_content``              managed, recovered from overflow, lengthened after a cut-off
``models.generate_content_stream``       managed and recovered before the first chunk (the SDK
                                         sends nothing until the first chunk is asked for, so it is
                                         asked for inside the flow); chunks watched, never lengthened
``models.count_tokens``,                 the contents managed, so the count is of what would be sent
``compute_tokens``
``chats``                                refused: a chat keeps the history inside the SDK, out of
                                         reach; keep the list of turns and call ``generate_content``
``live``                                 refused: a WebSocket session sends its turns past the wrapper
``batches.create`` with inline requests  refused (a file or bucket source is the SDK's own)
the rest                                 the SDK's own (embeddings, images, files, caches...)
=======================================  ==========================================================

**Automatic function calling** runs the tool loop inside one SDK call: the
history grows where no wrapper sees it. A config whose tools include Python
callables must turn it off (``automatic_function_calling={"disable": True}``),
and the caller runs the tools, as with the other SDKs; otherwise the call is
refused, never sent half-managed. The same holds on ``client.aio``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import orjson

from ..errors import UnsupportedClient
from ..marker import RECALL_TOOL
from ..recall import recall_tool
from ..sdkdata import plain
from ._call import Plan, Wrapping, arun, run
from ._proxy import Owned, Proxy

__all__ = ["GeminiClient"]

API = "gemini"

_MANAGED = {
    "generate_content": "create",
    "generate_content_stream": "stream",
    "count_tokens": "once",
    "compute_tokens": "once",
}
_OWN = frozenset(
    {
        "delete",
        "edit_image",
        "embed_content",
        "generate_images",
        "generate_videos",
        "get",
        "list",
        "recontext_image",
        "segment_image",
        "update",
        "upscale_image",
    }
)
_REFUSED = {
    "chats": "a chat keeps its history inside the SDK, out of a wrapper's reach; keep the list of turns "
    "yourself and call models.generate_content with it",
    "live": "a Live API session sends its turns over a WebSocket past the wrapper; "
    "use models.generate_content",
}


def _types() -> Any:
    from google.genai import types

    return types


def _is_turns(contents: Any) -> bool:
    """Whether ``contents`` is a list of turns (``Content`` objects or dicts with ``parts``)."""
    if not isinstance(contents, (list, tuple)) or not contents:
        return False
    content = _types().Content
    return all(isinstance(c, content) or (isinstance(c, Mapping) and "parts" in c) for c in contents)


def _field(config: Any, name: str) -> Any:
    return config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)


def _callables(config: Any) -> bool:
    tools = _field(config, "tools") or ()
    return any(callable(t) and not isinstance(t, Mapping) and not hasattr(t, "model_dump") for t in tools)


def _afc_off(config: Any) -> bool:
    afc = _field(config, "automatic_function_calling")
    return _field(afc, "disable") is True if afc is not None else False


class _Call:
    """One call's arguments, and how a body the flow yields becomes them again."""

    def __init__(self, kwargs: Mapping[str, Any], recall: bool) -> None:
        self.kwargs = dict(kwargs)
        self.turns = list(kwargs["contents"])
        self.dumped = [plain(t) for t in self.turns]
        config = kwargs.get("config")
        self.config: Any = _with_recall(config) if recall else config
        self.body = self._body()

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"contents": self.dumped}
        model = self.kwargs.get("model")
        if isinstance(model, str):
            body["model"] = model
        config = self.config
        if config is None:
            return body
        system = _field(config, "system_instruction")
        if system is not None:
            body["systemInstruction"] = plain(system)
        tools = [
            plain(t) for t in (_field(config, "tools") or ()) if not callable(t) or hasattr(t, "model_dump")
        ]
        if tools:
            body["tools"] = tools
        limit = _field(config, "max_output_tokens")
        if isinstance(limit, int):
            body["generationConfig"] = {"maxOutputTokens": limit}
        return body

    def arguments(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The SDK call's keyword arguments that send ``body``."""
        content = _types().Content
        turns = []
        for i, turn in enumerate(body.get("contents") or ()):
            same = i < len(self.dumped) and turn == self.dumped[i]
            turns.append(self.turns[i] if same else content.model_validate_json(orjson.dumps(turn)))
        out = {**self.kwargs, "contents": turns}
        limit = (body.get("generationConfig") or {}).get("maxOutputTokens")
        config = self.config
        if isinstance(limit, int) and limit != _field(config, "max_output_tokens"):  # escalated
            if isinstance(config, Mapping):
                config = {**config, "max_output_tokens": limit}
            else:
                config = config.model_copy(update={"max_output_tokens": limit})
        if config is not None:
            out["config"] = config
        return out


def _with_recall(config: Any) -> Any:
    """``config`` with the recall tool's declaration among its tools, unless it has it."""
    tools = list(_field(config, "tools") or ())
    for tool in tools:
        declarations = _field(tool, "function_declarations") or _field(tool, "functionDeclarations") or ()
        if any(_field(d, "name") == RECALL_TOOL for d in declarations):
            return config
    declared = recall_tool(API)
    types = _types()
    recall = types.FunctionDeclaration(
        name=declared["name"],
        description=declared["description"],
        parameters_json_schema=declared["parameters"],
    )
    tool = types.Tool(function_declarations=[recall])
    if config is None:
        return {"tools": [tool]}
    if isinstance(config, Mapping):
        return {**config, "tools": [*tools, tool]}
    return config.model_copy(update={"tools": [*tools, tool]})


def _remake(template: Any, data: dict[str, Any]) -> Any:
    """A ``GenerateContentResponse`` holding the merged answer ``data``."""
    answer = type(template).model_validate_json(orjson.dumps(data))
    http = getattr(template, "sdk_http_response", None)
    if http is not None:
        answer.sdk_http_response = http
    return answer


class _Chunks:
    """A started stream: the first chunk (read inside the flow) and then the rest of the SDK's iterator.

    Its ``__iter__`` does not go through ``__next__``, as the SDK streams'
    do not, so the watcher sees each chunk once whichever the caller uses.
    """

    def __init__(self, first: Any, rest: Iterator[Any]) -> None:
        self._first: list[Any] = [first]
        self._rest = rest

    def __iter__(self) -> Iterator[Any]:
        while self._first:
            yield self._first.pop()
        yield from self._rest

    def __next__(self) -> Any:
        if self._first:
            return self._first.pop()
        return next(self._rest)

    def close(self) -> None:
        close = getattr(self._rest, "close", None)
        if callable(close):
            close()


class _AsyncChunks:
    """:class:`_Chunks` for the async client."""

    def __init__(self, first: Any, rest: AsyncIterator[Any]) -> None:
        self._first: list[Any] = [first]
        self._rest = rest

    async def __aiter__(self) -> AsyncIterator[Any]:
        while self._first:
            yield self._first.pop()
        async for chunk in self._rest:
            yield chunk

    async def __anext__(self) -> Any:
        if self._first:
            return self._first.pop()
        return await self._rest.__anext__()

    async def close(self) -> None:
        close = getattr(self._rest, "aclose", None)
        if callable(close):
            await close()


def _errors() -> tuple[type[BaseException], ...]:
    from google.genai import errors

    return (errors.APIError,)


class _Part(Proxy):
    """A part of a wrapped client that holds the client alive, as the SDK's own parts do not.

    ``genai.Client`` closes its HTTP client when it is collected, so
    ``wrap(genai.Client()).models.generate_content(...)`` must not let it go.
    """

    __slots__ = ("_owner",)

    def __init__(self, inner: Any, wrapping: Wrapping, owner: Any) -> None:
        super().__init__(inner, wrapping)
        object.__setattr__(self, "_owner", owner)


class _Models(_Part):
    """``client.models`` (or ``client.aio.models``), each method managed, refused or its own."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name.startswith("_") or name in _OWN:
            return target
        kind = _MANAGED.get(name)
        if kind is None:
            raise UnsupportedClient(
                f"models.{name} is not managed by toolbudget (this google-genai version added it); "
                "use models.generate_content"
            )
        is_async = type(self._inner).__name__.startswith("Async")
        method = _managed(self._wrapping, kind, target, is_async)
        setattr(method, "_toolbudget_owner", self)  # a held method holds its client too  # noqa: B010
        return method


def _prepare(wrapping: Wrapping, kind: str, kwargs: dict[str, Any]) -> tuple[_Call, Plan] | None:
    if not _is_turns(kwargs.get("contents")):
        return None
    config = kwargs.get("config")
    if kind != "once" and _callables(config) and not _afc_off(config):
        raise UnsupportedClient(
            "automatic function calling grows the history inside the SDK call, out of toolbudget's reach: "
            'pass automatic_function_calling={"disable": True} in the config and run the tools yourself'
        )
    call = _Call(kwargs, wrapping.recall and kind != "once")
    errors = _errors() if kind == "create" else ()
    # count_tokens and compute_tokens, the "once" methods here, never reach the model's cache.
    timed = kind != "once"
    return call, Plan(wrapping, API, kind, call.body, errors=errors, remake=_remake, timed=timed)


def _managed(wrapping: Wrapping, kind: str, target: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    if is_async:

        async def acall(**kwargs: Any) -> Any:
            prepared = _prepare(wrapping, kind, kwargs)
            if prepared is None:
                return await target(**kwargs)
            call, plan = prepared

            async def send(body: Any) -> Any:
                answer = await target(**call.arguments(body))
                if kind != "stream":
                    return answer
                return _AsyncChunks(await answer.__anext__(), answer)  # the request goes out here

            return await arun(plan, send)

        return acall

    def sync(**kwargs: Any) -> Any:
        prepared = _prepare(wrapping, kind, kwargs)
        if prepared is None:
            return target(**kwargs)
        call, plan = prepared

        def send(body: Any) -> Any:
            answer = target(**call.arguments(body))
            if kind != "stream":
                return answer
            return _Chunks(next(answer), answer)  # the request goes out here

        return run(plan, send)

    return sync


def _refuse_inline_batch(target: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    def check(kwargs: Mapping[str, Any]) -> None:
        if isinstance(kwargs.get("src"), (list, tuple)):
            raise UnsupportedClient(
                "batches.create with inline requests is not managed by toolbudget: each request's "
                "history would go out as given; send them with models.generate_content"
            )

    if is_async:

        async def acreate(**kwargs: Any) -> Any:
            check(kwargs)
            return await target(**kwargs)

        return acreate

    def create(**kwargs: Any) -> Any:
        check(kwargs)
        return target(**kwargs)

    return create


class _Batches(_Part):
    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name == "create":
            return _refuse_inline_batch(target, type(self._inner).__name__.startswith("Async"))
        return target


class _Namespace(Proxy):
    """The client, or its ``aio`` twin: ``models`` and ``batches`` wrapped, ``chats`` and ``live`` refused."""

    __slots__ = ("_owner",)

    def __getattr__(self, name: str) -> Any:
        if name in _REFUSED:
            raise UnsupportedClient(f"{name} is not managed by toolbudget: {_REFUSED[name]}")
        inner = getattr(self._inner, name)
        if name == "models":
            return _Models(inner, self._wrapping, self)
        if name == "batches":
            return _Batches(inner, self._wrapping, self)
        if name == "aio":
            aio = _Namespace(inner, self._wrapping)
            object.__setattr__(aio, "_owner", self)
            return aio
        return inner


class GeminiClient(_Namespace, Owned):
    """A managed ``google.genai.Client``."""

    __slots__ = ()
