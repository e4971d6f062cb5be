"""Messages API replies: the stop reason, the content blocks, the usage, ``max_tokens``.

A reply's ``content`` is its units; a ``tool_use`` block arrives with its
``input`` already parsed, so a call ending a cut reply cannot show whether it
was finished (:attr:`~toolbudget.wire._reply.Dialect.suspect_last_call`). The
context window stopping a reply says ``model_context_window_exceeded``
(``reference/providers.md`` 1.5). An assistant message ending a request is a
prefill: the reply continues it, so a continuation extends it rather than
adding another assistant turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...marker import RECALL_TOOL
from ...model import Usage
from ...recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from .._reply import TypedTextDialect, as_dict, as_list, count
from .stream import MessageFolder

__all__ = ["DIALECT", "AnthropicDialect"]


class AnthropicDialect(TypedTextDialect):
    api = "anthropic"
    cut_stops = frozenset({"max_tokens", "model_context_window_exceeded"})
    window_stops = frozenset({"model_context_window_exceeded"})
    cut_stop = "max_tokens"
    suspect_last_call = True
    continues_prefill = True
    max_tokens_required = True

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        value = reply.get("stop_reason")
        return value if isinstance(value, str) else None

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        return as_list(reply.get("content"))

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        reply["content"] = units
        if stop is not None:
            reply["stop_reason"] = stop
        return reply

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and unit.get("type") == "tool_use"

    def call_whole(self, unit: Any) -> bool:
        return isinstance(as_dict(unit).get("input"), Mapping)

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        return Usage(
            count(usage.get("input_tokens")),
            count(usage.get("output_tokens")),
            count(usage.get("cache_read_input_tokens")),
            count(usage.get("cache_creation_input_tokens")),
        )

    def folder(self) -> MessageFolder:
        return MessageFolder()

    def recall_tool(self) -> dict[str, Any]:
        return {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "input_schema": RECALL_PARAMETERS}


DIALECT = AnthropicDialect()
