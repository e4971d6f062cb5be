"""Chat Completions streams folded into the completion: ``chat.completion.chunk`` deltas.

Each chunk carries, per choice, a ``delta`` whose ``content`` (and
``refusal``) pieces are appended, and ``tool_calls`` pieces addressed by
``index``: the first piece of a call has its ``id`` and name, the later ones
add argument text. ``finish_reason`` comes on a choice's last chunk; usage, when
``stream_options.include_usage`` asks for it, on a last chunk with no choices
(``reference/integrations.md`` 4.1). The SDK's stream helper wraps each chunk
in a ``{"type": "chunk", "chunk": ...}`` event next to a snapshot; only the
chunk is read. A chunk whose ``object`` is another (Azure's content-filter
events) is skipped, as the SDK skips it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .._stream import Appends, copied, event_index

__all__ = ["ChunkFolder"]

_ENVELOPE_SKIPPED = frozenset({"choices", "usage", "object", "obfuscation"})
_APPENDED = ("content", "refusal")


class ChunkFolder:
    """One Chat Completions stream, folded into the completion it answers."""

    kinds: frozenset[str | None] | None = frozenset({None, "chunk"})
    unread: frozenset[str] = frozenset({"snapshot"})

    def __init__(self) -> None:
        self._reply: dict[str, Any] | None = None
        self._choices: dict[int, dict[str, Any]] = {}
        self._calls: dict[int, dict[int, dict[str, Any]]] = {}
        self._text = Appends()

    def see(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "chunk":
            chunk = event.get("chunk")
            if isinstance(chunk, Mapping):
                self.see(chunk)
            return
        if event.get("object", "chat.completion.chunk") != "chat.completion.chunk":
            return
        if self._reply is None:
            self._reply = {k: copy.deepcopy(v) for k, v in event.items() if k not in _ENVELOPE_SKIPPED}
            self._reply["object"] = "chat.completion"
        if isinstance(event.get("usage"), Mapping):
            self._reply["usage"] = copy.deepcopy(dict(event["usage"]))
        for choice in event.get("choices") or []:
            if isinstance(choice, Mapping):
                self._choice(choice)

    def _choice(self, choice: Mapping[str, Any]) -> None:
        index = event_index(choice, "index") or 0
        target = self._choices.setdefault(
            index, {"index": index, "message": {"role": "assistant", "content": None}, "finish_reason": None}
        )
        message = target["message"]
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            for field in _APPENDED:
                if isinstance(delta.get(field), str):
                    self._text.add(message, field, delta[field])
            if isinstance(delta.get("tool_calls"), list):
                calls = self._calls.setdefault(index, {})
                for piece in delta["tool_calls"]:
                    if isinstance(piece, Mapping):
                        self._call_piece(calls, piece)
                message["tool_calls"] = [calls[i] for i in sorted(calls)]
            if isinstance(delta.get("function_call"), Mapping):
                legacy = message.setdefault("function_call", {"name": "", "arguments": ""})
                self._function_piece(legacy, delta["function_call"])
        if choice.get("finish_reason") is not None:
            target["finish_reason"] = choice["finish_reason"]

    def _call_piece(self, calls: dict[int, dict[str, Any]], piece: Mapping[str, Any]) -> None:
        slot = calls.setdefault(
            event_index(piece, "index") or 0,
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if piece.get("id"):
            slot["id"] = piece["id"]
        if isinstance(piece.get("type"), str):
            slot["type"] = piece["type"]
        if isinstance(piece.get("function"), Mapping):
            self._function_piece(slot["function"], piece["function"])

    def _function_piece(self, function: dict[str, Any], piece: Mapping[str, Any]) -> None:
        for field in ("name", "arguments"):
            self._text.add(function, field, str(piece.get(field) or ""))

    def reply(self) -> dict[str, Any] | None:
        if self._reply is None:
            return None
        self._text.settle()
        reply = copied(self._reply)
        assert reply is not None
        choices = [copy.deepcopy(self._choices[i]) for i in sorted(self._choices)]
        reply["choices"] = choices or [
            {"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": None}
        ]
        return reply
