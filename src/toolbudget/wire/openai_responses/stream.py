"""Responses API streams folded into the response: output items and their deltas, then the final event.

The grammar (``reference/integrations.md`` 4.1): ``response.created`` /
``.queued`` / ``.in_progress`` carry the response so far; each output item
opens with ``response.output_item.added``, its content parts with
``response.content_part.added``, grows by ``response.output_text.delta``,
``response.refusal.delta`` or ``response.function_call_arguments.delta``, and
closes with the ``.done`` events, ``response.output_item.done`` carrying the
finished item; the stream ends with ``response.completed``, ``.incomplete`` or
``.failed`` and the whole response (no ``[DONE]``).

The items are folded as they come, so a stream cut before its final event
still gives what it held: the response of the last lifecycle event with the
items so far, an unfinished one keeping its ``in_progress`` status (a call in
that state is not whole). A final response without ``output`` (servers may
leave it out) gets the folded items.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .._stream import Appends, block_at, event_index

__all__ = ["ResponseFolder"]

_LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress"})
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_PART_DELTAS = {"response.output_text.delta": "text", "response.refusal.delta": "refusal"}
_PART_DONE = {"response.output_text.done": "text", "response.refusal.done": "refusal"}


class ResponseFolder:
    """One Responses stream, folded into the response it answers."""

    kinds: frozenset[str | None] | None = frozenset(
        {
            *_LIFECYCLE,
            *_FINAL,
            *_PART_DELTAS,
            *_PART_DONE,
            "response.output_item.added",
            "response.output_item.done",
            "response.content_part.added",
            "response.content_part.done",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        }
    )
    unread: frozenset[str] = frozenset({"snapshot"})

    def __init__(self) -> None:
        self._response: dict[str, Any] | None = None
        self._final = False
        self._items: dict[int, dict[str, Any]] = {}
        self._text = Appends()

    def see(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind in _LIFECYCLE or kind in _FINAL:
            response = event.get("response")
            if isinstance(response, Mapping):
                self._response = copy.deepcopy(dict(response))
                self._final = kind in _FINAL
            return
        index = event_index(event, "output_index")
        if index is None:
            return
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = event.get("item")
            if isinstance(item, Mapping):
                self._items[index] = copy.deepcopy(dict(item))
            return
        item = self._items.get(index)
        if item is None:
            return
        if kind in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
            if kind.endswith(".done"):
                self._text.put(item, "arguments", str(event.get("arguments") or ""))
            else:
                self._text.add(item, "arguments", str(event.get("delta") or ""))
            return
        self._part(item, kind, event)

    def _part(self, item: dict[str, Any], kind: Any, event: Mapping[str, Any]) -> None:
        content = item.setdefault("content", [])
        if not isinstance(content, list):
            return
        at = event_index(event, "content_index")
        if kind in ("response.content_part.added", "response.content_part.done"):
            part = event.get("part")
            if at is not None and isinstance(part, Mapping):
                content.extend({} for _ in range(at + 1 - len(content)))
                content[at] = copy.deepcopy(dict(part))
            return
        part = block_at(content, at)
        if part is None:
            return
        if kind in _PART_DELTAS:
            self._text.add(part, _PART_DELTAS[kind], str(event.get("delta") or ""))
        else:
            field = _PART_DONE[kind]
            self._text.put(part, field, str(event.get(field) or ""))

    def reply(self) -> dict[str, Any] | None:
        if self._response is None and not self._items:
            return None
        self._text.settle()
        reply: dict[str, Any] = (
            copy.deepcopy(self._response) if self._response is not None else {"status": "in_progress"}
        )
        if not (self._final and isinstance(reply.get("output"), list)):
            reply["output"] = [copy.deepcopy(self._items[i]) for i in sorted(self._items)]
        return reply
