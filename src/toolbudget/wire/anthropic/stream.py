"""Messages API streams folded into the reply: ``message_start``, content blocks, ``message_delta``.

The grammar (``reference/integrations.md`` 4.1): ``message_start`` carries the
message with empty content and the input usage; each block opens with
``content_block_start``, grows by ``content_block_delta`` (``text_delta``,
``input_json_delta``, ``thinking_delta``, ``signature_delta``,
``citations_delta``) and ends with ``content_block_stop``; ``message_delta``
brings the stop reason and the cumulative usage, whose counts replace the
earlier ones (a count left out keeps the ``message_start`` value).

A tool call's ``input`` is the JSON text so far until its block stops, then
the parsed object: a stream cut inside a call leaves text, which no reader
takes for runnable arguments.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .._stream import Appends, block_at, copied, event_index, parsed_input

__all__ = ["MessageFolder"]

_APPENDED = {"text_delta": "text", "thinking_delta": "thinking"}
_DELTA_KEPT = frozenset({"stop_reason", "stop_sequence", "stop_details"})
"""``message_delta`` fields that are set even to ``null`` (the others only when given)."""


class MessageFolder:
    """One Messages stream, folded into the message it answers."""

    kinds: frozenset[str | None] | None = frozenset(
        {"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta"}
    )
    unread: frozenset[str] = frozenset({"snapshot"})

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._text = Appends()
        self._json: set[int] = set()
        """Blocks whose ``input`` is streamed JSON text."""

    def see(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            self._message = (
                {**copy.deepcopy(dict(message)), "content": []} if isinstance(message, Mapping) else None
            )
            self._text, self._json = Appends(), set()
            return
        if self._message is None:
            return
        content: list[dict[str, Any]] = self._message["content"]
        if kind == "content_block_start":
            block = event.get("content_block")
            content.append(copy.deepcopy(dict(block)) if isinstance(block, Mapping) else {})
        elif kind == "content_block_delta":
            self._delta(block_at(content, event_index(event, "index")), event)
        elif kind == "content_block_stop":
            index = event_index(event, "index")
            block = block_at(content, index)
            if block is not None and index in self._json:
                self._json.discard(index)
                self._text.put(block, "input", parsed_input(self._text.value(block, "input")))
        elif kind == "message_delta":
            self._message_delta(event)

    def _delta(self, block: dict[str, Any] | None, event: Mapping[str, Any]) -> None:
        delta = event.get("delta")
        if block is None or not isinstance(delta, Mapping):
            return
        kind = delta.get("type")
        field = _APPENDED.get(str(kind))
        if field is not None:
            self._text.add(block, field, str(delta.get(field) or ""))
        elif kind == "input_json_delta":
            index = event_index(event, "index")
            assert index is not None  # block_at found a block at it
            if index not in self._json:
                self._json.add(index)
                self._text.put(block, "input", "")  # text until the block stops: not runnable
            self._text.add(block, "input", str(delta.get("partial_json") or ""))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block["citations"] = [*(block.get("citations") or []), copy.deepcopy(delta.get("citation"))]

    def _message_delta(self, event: Mapping[str, Any]) -> None:
        assert self._message is not None
        delta = event.get("delta")
        for key, value in delta.items() if isinstance(delta, Mapping) else ():
            if value is not None or key in _DELTA_KEPT:
                self._message[key] = copy.deepcopy(value)
        usage = event.get("usage")
        if isinstance(usage, Mapping):
            kept = self._message.get("usage")
            merged = dict(kept) if isinstance(kept, Mapping) else {}
            merged.update({k: copy.deepcopy(v) for k, v in usage.items() if v is not None})
            self._message["usage"] = merged

    def reply(self) -> dict[str, Any] | None:
        self._text.settle()
        return copied(self._message)
