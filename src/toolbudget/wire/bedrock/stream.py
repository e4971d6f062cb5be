"""ConverseStream events folded into a Converse reply.

Each event is an object with one member (botocore's ``ConverseStreamOutput``):
``messageStart`` (the role), ``contentBlockStart`` (a ``toolUse`` block's id
and name; text and reasoning blocks may start with their first delta),
``contentBlockDelta`` (``text``, ``toolUse.input`` as a piece of JSON text,
``reasoningContent`` text, signature or redacted bytes), ``contentBlockStop``,
``messageStop`` (``stopReason``) and ``metadata`` (``usage``, ``metrics``).
The reply is laid out as ``Converse`` answers: ``output.message``,
``stopReason``, ``usage``, ``metrics``.

A ``toolUse`` block's ``input`` is the JSON text so far until its block
stops, then the parsed object: a stream cut inside a call leaves text, which
no reader takes for runnable arguments.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .._stream import Appends, copied, event_index, parsed_input

__all__ = ["EventFolder"]

_REASONING_APPENDED = ("text", "signature")


class EventFolder:
    """One ConverseStream, folded into the Converse reply it streams."""

    kinds: frozenset[str | None] | None = None
    unread: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._reply: dict[str, Any] | None = None
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: set[int] = set()
        """Blocks whose ``toolUse.input`` is streamed JSON text."""
        self._text = Appends()

    def _message(self) -> dict[str, Any]:
        if self._reply is None:
            self._reply = {"output": {"message": {"role": "assistant", "content": []}}}
        message: dict[str, Any] = self._reply["output"]["message"]
        return message

    def see(self, event: Mapping[str, Any]) -> None:
        for kind, data in event.items():
            if isinstance(data, Mapping):
                self._see(kind, data)

    def _see(self, kind: str, data: Mapping[str, Any]) -> None:
        if kind == "messageStart":
            role = data.get("role")
            self._message()["role"] = role if isinstance(role, str) else "assistant"
        elif kind == "contentBlockStart":
            self._start(event_index(data, "contentBlockIndex"), data.get("start"))
        elif kind == "contentBlockDelta":
            self._delta(event_index(data, "contentBlockIndex"), data.get("delta"))
        elif kind == "contentBlockStop":
            index = event_index(data, "contentBlockIndex")
            if index is not None and index in self._json:
                self._json.discard(index)
                tool = self._blocks[index]["toolUse"]
                self._text.put(tool, "input", parsed_input(self._text.value(tool, "input")))
        elif kind == "messageStop":
            self._message()
            assert self._reply is not None
            self._reply.update({k: copy.deepcopy(v) for k, v in data.items() if v is not None})
        elif kind == "metadata":
            self._message()
            assert self._reply is not None
            self._reply.update({k: copy.deepcopy(v) for k, v in data.items() if k in ("usage", "metrics")})

    def _start(self, index: int | None, start: Any) -> None:
        if index is None or not isinstance(start, Mapping):
            return
        tool = start.get("toolUse")
        if isinstance(tool, Mapping):
            self._blocks[index] = {"toolUse": {**copy.deepcopy(dict(tool)), "input": ""}}
            self._json.add(index)
        else:
            self._blocks[index] = copy.deepcopy(dict(start))

    def _delta(self, index: int | None, delta: Any) -> None:
        if index is None or not isinstance(delta, Mapping):
            return
        if isinstance(delta.get("text"), str):
            self._text.add(self._blocks.setdefault(index, {"text": ""}), "text", delta["text"])
        elif isinstance(delta.get("toolUse"), Mapping) and index in self._json:
            piece = str(delta["toolUse"].get("input") or "")
            self._text.add(self._blocks[index]["toolUse"], "input", piece)  # text until the block stops
        elif isinstance(delta.get("reasoningContent"), Mapping):
            self._reasoning(
                self._blocks.setdefault(index, {"reasoningContent": {}}), delta["reasoningContent"]
            )

    def _reasoning(self, block: dict[str, Any], delta: Mapping[str, Any]) -> None:
        reasoning = block.setdefault("reasoningContent", {})
        if delta.get("redactedContent") is not None:
            reasoning["redactedContent"] = delta["redactedContent"]
            return
        text = reasoning.setdefault("reasoningText", {"text": ""})
        for key in _REASONING_APPENDED:
            if isinstance(delta.get(key), str):
                self._text.add(text, key, delta[key])

    def reply(self) -> dict[str, Any] | None:
        if self._reply is None and not self._blocks:
            return None
        self._text.settle()
        self._message()["content"] = [self._blocks[i] for i in sorted(self._blocks)]
        return copied(self._reply)
