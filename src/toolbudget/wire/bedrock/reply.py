"""Converse replies: ``stopReason``, ``output.message.content``, ``usage``, ``inferenceConfig.maxTokens``.

From the documented shapes (botocore's ``bedrock-runtime`` ``service-2.json``,
``ConverseResponse``): content blocks are ``text``, ``toolUse`` (``toolUseId``,
``name``, ``input`` already parsed, so a call ending a cut reply cannot show
whether it was finished) and ``reasoningContent``; ``stopReason`` is one of
``end_turn | tool_use | max_tokens | stop_sequence | guardrail_intervened |
content_filtered | malformed_model_output | malformed_tool_use |
model_context_window_exceeded``, the last meaning the context window, not
``maxTokens``, stopped it. ``usage`` counts ``inputTokens`` without the cache,
and ``cacheReadInputTokens`` / ``cacheWriteInputTokens`` apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...marker import RECALL_TOOL
from ...model import Usage
from ...recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from .._reply import Dialect, as_dict, as_list, count
from .stream import EventFolder

__all__ = ["DIALECT", "ConverseDialect"]


class ConverseDialect(Dialect):
    api = "bedrock-converse"
    cut_stops = frozenset({"max_tokens", "model_context_window_exceeded"})
    window_stops = frozenset({"model_context_window_exceeded"})
    cut_stop = "max_tokens"
    suspect_last_call = True
    new_max_tokens_slot = ("inferenceConfig", "maxTokens")

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        value = reply.get("stopReason")
        return value if isinstance(value, str) else None

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        return as_list(as_dict(as_dict(reply.get("output")).get("message")).get("content"))

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        output = as_dict(reply.get("output"))
        message = {"role": "assistant", **as_dict(output.get("message")), "content": units}
        reply["output"] = {**output, "message": message}
        if stop is not None:
            reply["stopReason"] = stop
        return reply

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("text"), str)

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("toolUse"), Mapping)

    def call_whole(self, unit: Any) -> bool:
        return isinstance(as_dict(as_dict(unit).get("toolUse")).get("input"), Mapping)

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        return Usage(
            count(usage.get("inputTokens")),
            count(usage.get("outputTokens")),
            count(usage.get("cacheReadInputTokens")),
            count(usage.get("cacheWriteInputTokens")),
        )

    def model(self, body: Mapping[str, Any]) -> str | None:
        """The ``modelId`` of a ``converse`` call's arguments (the HTTP API takes it in the URL)."""
        value = body.get("modelId")
        return value if isinstance(value, str) else super().model(body)

    def folder(self) -> EventFolder:
        return EventFolder()

    def recall_tool(self) -> dict[str, Any]:
        spec = {
            "name": RECALL_TOOL,
            "description": RECALL_DESCRIPTION,
            "inputSchema": {"json": RECALL_PARAMETERS},
        }
        return {"toolSpec": spec}


DIALECT = ConverseDialect()
