"""Watching a stream go by, to tell at its end whether the answer was cut off.

A stream is handed to the caller as the SDK made it: same class for
``isinstance``, same methods, same events. Only its class is swapped for a
subclass whose ``__iter__``/``__next__`` (``__aiter__``/``__anext__``) and
``close`` also show each event to a :class:`Tap`. That uses nothing private
of the SDKs: every SDK stream iterates through those methods, including the
helpers built on them (``text_stream``, ``get_final_message``, ``until_done``).

The tap folds the events into the answer's JSON, as the API would have sent it
without streaming, so :func:`~toolbudget.recovery.output.is_cut_off` reads it
like any answer. When the stream ends (its last event read, an error, or
``close`` before the end), the tap calls back once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["Tap", "observe"]

OnEnd = Callable[[dict[str, Any] | None, bool], None]
"""Called once with the folded answer (``None`` when nothing was seen) and whether the end was read."""


def _as_dict(event: Any) -> dict[str, Any]:
    if isinstance(event, Mapping):
        return dict(event)
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
        if isinstance(data, dict):
            return data
    return {}


class Tap:
    """The answer of a stream, folded from its events, for one API."""

    def __init__(self, api: str, on_end: OnEnd) -> None:
        self.api = api
        self.on_end = on_end
        self.answer: dict[str, Any] | None = None
        self.ended = False
        self._json: dict[int, str] = {}
        self._calls: dict[int, dict[str, Any]] = {}

    def see(self, event: Any) -> None:
        kind = getattr(event, "type", None) if not isinstance(event, Mapping) else event.get("type")
        if self.api == "anthropic":
            self._anthropic(kind, event)
        elif self.api == "openai-chat":
            if kind == "chunk":  # the SDK's stream helper wraps each chunk in an event of its own
                self._chat(_as_dict(getattr(event, "chunk", None) or _as_dict(event).get("chunk") or {}))
            elif kind is None:  # a chunk as the API sends it
                self._chat(_as_dict(event))
        elif self.api == "openai-responses" and kind in (
            "response.completed",
            "response.incomplete",
            "response.failed",
        ):
            response = _as_dict(event).get("response")
            self.answer = dict(response) if isinstance(response, Mapping) else None

    def end(self, finished: bool) -> None:
        if self.ended:
            return
        self.ended = True
        self.on_end(self.answer, finished)

    # --- Anthropic: message_start, content blocks, message_delta ---------------------

    def _anthropic(self, kind: Any, event: Any) -> None:
        if kind not in ("message_start", "content_block_start", "content_block_delta", "message_delta"):
            if kind == "content_block_stop":
                self._close_block(_as_dict(event).get("index"))
            return
        data = _as_dict(event)
        if kind == "message_start":
            message = data.get("message")
            self.answer = dict(message) if isinstance(message, Mapping) else {}
            self.answer["content"] = []
            return
        if self.answer is None:
            return
        content: list[dict[str, Any]] = self.answer.setdefault("content", [])
        if kind == "content_block_start":
            block = data.get("content_block")
            content.append(dict(block) if isinstance(block, Mapping) else {})
            return
        if kind == "content_block_delta":
            index, delta = data.get("index"), data.get("delta")
            if not isinstance(index, int) or not 0 <= index < len(content) or not isinstance(delta, Mapping):
                return
            if delta.get("type") == "text_delta":
                content[index]["text"] = str(content[index].get("text", "")) + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                self._json[index] = self._json.get(index, "") + str(delta.get("partial_json", ""))
                content[index]["input"] = self._json[index]  # a string until it parses: not runnable
            return
        delta = data.get("delta")
        if isinstance(delta, Mapping):
            self.answer.update({k: v for k, v in delta.items() if k in ("stop_reason", "stop_sequence")})
        usage = data.get("usage")
        if isinstance(usage, Mapping):
            self.answer["usage"] = {**(self.answer.get("usage") or {}), **usage}

    def _close_block(self, index: Any) -> None:
        if self.answer is None or not isinstance(index, int) or index not in self._json:
            return
        content = self.answer.get("content") or []
        if 0 <= index < len(content):
            text = self._json[index]
            try:
                content[index]["input"] = json.loads(text) if text.strip() else {}
            except ValueError:
                content[index]["input"] = text

    # --- OpenAI Chat: deltas of the first choice ------------------------------------

    def _chat(self, chunk: dict[str, Any]) -> None:
        if self.answer is None:
            self.answer = {k: v for k, v in chunk.items() if k not in ("choices", "usage", "object")}
            self.answer["object"] = "chat.completion"
            self.answer["choices"] = [{"index": 0, "message": {"role": "assistant", "content": None}}]
        if isinstance(chunk.get("usage"), Mapping):
            self.answer["usage"] = chunk["usage"]
        choice = next(
            (c for c in chunk.get("choices") or [] if isinstance(c, Mapping) and c.get("index", 0) == 0), None
        )
        if choice is None:
            return
        target = self.answer["choices"][0]
        message = target["message"]
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            if isinstance(delta.get("content"), str):
                message["content"] = (message["content"] or "") + delta["content"]
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, Mapping):
                    continue
                slot = self._calls.setdefault(
                    int(call.get("index", 0)), {"type": "function", "function": {"name": "", "arguments": ""}}
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function")
                if isinstance(function, Mapping):
                    slot["function"]["name"] += str(function.get("name") or "")
                    slot["function"]["arguments"] += str(function.get("arguments") or "")
                message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        if choice.get("finish_reason") is not None:
            target["finish_reason"] = choice["finish_reason"]


# --------------------------------------------------------------------------- the class swap

_OBSERVED: dict[type, type] = {}


def _observed_class(cls: type) -> type:
    """A subclass of ``cls`` that shows each event to the stream's tap (one per stream class)."""
    made = _OBSERVED.get(cls)
    if made is not None:
        return made
    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": cls.__qualname__}
    if hasattr(cls, "__aiter__"):
        namespace.update(_async_methods(cls))
    else:
        namespace.update(_sync_methods(cls))
    made = type(cls.__name__, (cls,), namespace)
    _OBSERVED[cls] = made
    return made


def _tap(stream: Any) -> Tap:
    tap: Tap = stream.__dict__["_toolbudget_tap"]
    return tap


@contextlib.contextmanager
def _ending(tap: Tap, stop: type[BaseException] | tuple[()]) -> Iterator[None]:
    """Tell ``tap`` the stream ended: read to its end (``stop``), or broken off by anything else."""
    try:
        yield
    except stop:
        tap.end(True)
        raise
    except BaseException:
        tap.end(False)
        raise


def _sync_methods(cls: type) -> dict[str, Any]:
    base_iter, base_next, base_close = cls.__iter__, cls.__next__, getattr(cls, "close", None)  # type: ignore[attr-defined]

    def __iter__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, ()):
            for item in base_iter(self):
                tap.see(item)
                yield item
        tap.end(True)

    def __next__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, StopIteration):
            item = base_next(self)
        tap.see(item)
        return item

    def close(self: Any) -> Any:
        _tap(self).end(False)
        return base_close(self) if base_close is not None else None

    return {"__iter__": __iter__, "__next__": __next__, "close": close}


def _async_methods(cls: type) -> dict[str, Any]:
    base_aiter, base_anext, base_close = cls.__aiter__, cls.__anext__, getattr(cls, "close", None)  # type: ignore[attr-defined]

    async def __aiter__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, ()):
            async for item in base_aiter(self):
                tap.see(item)
                yield item
        tap.end(True)

    async def __anext__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, StopAsyncIteration):
            item = await base_anext(self)
        tap.see(item)
        return item

    async def close(self: Any) -> Any:
        _tap(self).end(False)
        return await base_close(self) if base_close is not None else None

    return {"__aiter__": __aiter__, "__anext__": __anext__, "close": close}


def observe(stream: Any, api: str, on_end: OnEnd) -> bool:
    """Show every event of ``stream`` to a new tap; ``False`` when this stream cannot be watched."""
    cls = type(stream)
    if not (hasattr(cls, "__iter__") and hasattr(cls, "__next__")) and not (
        hasattr(cls, "__aiter__") and hasattr(cls, "__anext__")
    ):
        return False
    try:
        stream.__dict__["_toolbudget_tap"] = Tap(api, on_end)
        stream.__class__ = _observed_class(cls)
    except (AttributeError, TypeError):
        return False
    return True
