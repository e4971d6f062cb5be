"""``generateContent`` replies: the first candidate's finish reason and parts, the usage, the limit.

The parts are the units; a ``thought`` part is thinking, not answer text, and
a ``functionCall`` arrives with its ``args`` parsed, so a call ending a cut
reply cannot show whether it was finished. ``"MAX_TOKENS"`` is the cut-off
(``reference/providers.md`` 4.2). The limit is
``generationConfig.maxOutputTokens``. Both spellings the API accepts are read,
camelCase and the snake_case of the Python SDK's dumps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...marker import RECALL_TOOL
from ...model import Usage
from ...recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from .._reply import Dialect, as_dict, as_list, count, usage_with_cached
from .stream import ChunkFolder, field

__all__ = ["DIALECT", "GeminiDialect"]


class GeminiDialect(Dialect):
    api = "gemini"
    cut_stops = frozenset({"MAX_TOKENS"})
    cut_stop = "MAX_TOKENS"
    suspect_last_call = True
    usage_field = "usageMetadata"
    new_max_tokens_slot = ("generationConfig", "maxOutputTokens")

    def _candidate(self, reply: Mapping[str, Any]) -> Mapping[str, Any]:
        candidates = as_list(reply.get("candidates"))
        return as_dict(candidates[0]) if candidates else {}

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        value = field(self._candidate(reply), "finishReason")
        return value if isinstance(value, str) else None

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        return as_list(as_dict(self._candidate(reply).get("content")).get("parts"))

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        candidates = as_list(reply.get("candidates"))
        if not candidates:
            return reply
        candidate = dict(as_dict(candidates[0]))
        candidate["content"] = {**as_dict(candidate.get("content")), "parts": units}
        if stop is not None:
            candidate["finishReason"] = stop
        reply["candidates"] = [candidate, *candidates[1:]]
        return reply

    def is_text(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("text"), str) and not unit.get("thought")

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(field(unit, "functionCall"), Mapping)

    def call_whole(self, unit: Any) -> bool:
        return isinstance(as_dict(field(unit, "functionCall")).get("args", {}), Mapping)

    def usage(self, reply: Mapping[str, Any]) -> Usage | None:
        usage = field(reply, self.usage_field)
        return self.read_usage(usage) if isinstance(usage, Mapping) else None

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        counts = (count(field(usage, k)) for k in ("candidatesTokenCount", "thoughtsTokenCount"))
        written = [n for n in counts if n is not None]
        return usage_with_cached(
            count(field(usage, "promptTokenCount")),
            sum(written) if written else None,
            count(field(usage, "cachedContentTokenCount")),
        )

    def max_tokens_slot(self, body: Mapping[str, Any]) -> tuple[str | None, str]:
        holder = "generation_config" if "generation_config" in body else "generationConfig"
        config = as_dict(body.get(holder))
        return holder, "max_output_tokens" if "max_output_tokens" in config else "maxOutputTokens"

    def several_choices(self, body: Mapping[str, Any]) -> bool:
        config = as_dict(field(body, "generationConfig"))
        return field(config, "candidateCount") not in (1, None)

    def folder(self) -> ChunkFolder:
        return ChunkFolder()

    def recall_tool(self) -> dict[str, Any]:
        return {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "parameters": RECALL_PARAMETERS}


DIALECT = GeminiDialect()
