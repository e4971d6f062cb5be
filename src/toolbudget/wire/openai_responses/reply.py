"""Responses API replies: the status, the output items, the usage, ``max_output_tokens``.

The output items are the units: a ``message`` item is text (its
``output_text`` parts), a ``function_call`` item a call, whole when it is
not ``incomplete`` and its argument text parses. A reply cut by its limit
says ``status: "incomplete"`` with ``incomplete_details.reason:
"max_output_tokens"`` (``"content_filter"`` is another stop, not a cut);
reasoning models may spend the whole budget thinking and return no items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...marker import RECALL_TOOL
from ...model import Usage
from ...recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from .._reply import Dialect, as_dict, as_list, count, parses_to_object, usage_with_cached
from .stream import ResponseFolder

__all__ = ["DIALECT", "ResponsesDialect"]

_UNFINISHED = frozenset({"incomplete", "in_progress"})
"""Item statuses of a call whose arguments did not all arrive (``in_progress``: a stream cut inside it)."""


class ResponsesDialect(Dialect):
    api = "openai-responses"
    cut_stops = frozenset({"max_output_tokens"})
    cut_stop = "max_output_tokens"
    new_max_tokens_slot = (None, "max_output_tokens")

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        status = reply.get("status")
        if status == "incomplete":
            reason = as_dict(reply.get("incomplete_details")).get("reason")
            return reason if isinstance(reason, str) else "incomplete"
        return status if isinstance(status, str) else None

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        return as_list(reply.get("output"))

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        reply["output"] = units
        if stop is not None:
            reply["status"] = "incomplete"
            reply["incomplete_details"] = {"reason": stop}
        return reply

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "message"

    def text(self, unit: Any) -> str:
        return "".join(
            p["text"]
            for p in as_list(as_dict(unit).get("content"))
            if isinstance(p, Mapping) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
        )

    def append_text(self, unit: Any, text: str) -> Any:
        content = [dict(p) if isinstance(p, Mapping) else p for p in as_list(unit.get("content"))]
        for part in reversed(content):
            if isinstance(part, dict) and part.get("type") == "output_text":
                part["text"] = str(part.get("text", "")) + text
                break
        else:
            content.append({"type": "output_text", "text": text, "annotations": []})
        return {**unit, "content": content}

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "function_call"

    def call_whole(self, unit: Any) -> bool:
        return as_dict(unit).get("status") not in _UNFINISHED and parses_to_object(
            as_dict(unit).get("arguments")
        )

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        return usage_with_cached(
            count(usage.get("input_tokens")),
            count(usage.get("output_tokens")),
            count(as_dict(usage.get("input_tokens_details")).get("cached_tokens")),
        )

    def folder(self) -> ResponseFolder:
        return ResponseFolder()

    def recall_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "name": RECALL_TOOL,
            "description": RECALL_DESCRIPTION,
            "parameters": RECALL_PARAMETERS,
        }


DIALECT = ResponsesDialect()
