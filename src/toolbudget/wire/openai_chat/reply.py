"""Chat Completions replies: the first choice's finish reason and message, the usage, the limit.

A message's text is one unit and each tool call another (the legacy
``function_call`` too), so a rebuilt reply is laid out as the API lays it
out. Arguments arrive as JSON text, so a cut call shows itself by not
parsing; OpenAI-compatible servers may still say ``"tool_calls"`` for one.
``"length"`` is the output limit; Mistral's ``"model_length"``, or a
``"length"`` with nothing written at all, is the context window
(``reference/providers.md`` 4.2). The limit lives in ``max_completion_tokens``
(or the legacy ``max_tokens`` a body may still use).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...marker import RECALL_TOOL
from ...model import Usage
from ...recall import RECALL_DESCRIPTION, RECALL_PARAMETERS
from .._reply import TypedTextDialect, as_dict, as_list, count, parses_to_object, usage_with_cached
from .stream import ChunkFolder

__all__ = ["DIALECT", "ChatDialect"]


def _first(reply: Mapping[str, Any]) -> Mapping[str, Any]:
    choices = as_list(reply.get("choices"))
    return as_dict(choices[0]) if choices else {}


class ChatDialect(TypedTextDialect):
    api = "openai-chat"
    cut_stops = frozenset({"length", "model_length"})
    window_stops = frozenset({"model_length"})
    cut_stop = "length"
    new_max_tokens_slot = (None, "max_completion_tokens")

    def stop(self, reply: Mapping[str, Any]) -> str | None:
        value = _first(reply).get("finish_reason")
        return value if isinstance(value, str) else None

    def units(self, reply: Mapping[str, Any]) -> list[Any]:
        message = as_dict(_first(reply).get("message"))
        content = message.get("content")
        units: list[Any] = []
        if isinstance(content, str) and content:
            units.append({"type": "text", "text": content})
        elif isinstance(content, list):
            units.extend(p for p in content if isinstance(p, Mapping))
        units.extend(as_list(message.get("tool_calls")))
        if isinstance(message.get("function_call"), Mapping):
            units.append({"type": "function_call", "function": message["function_call"]})
        return units

    def with_units(self, reply: dict[str, Any], units: list[Any], stop: str | None) -> dict[str, Any]:
        choices = as_list(reply.get("choices"))
        if not choices:
            return reply
        choice = dict(as_dict(choices[0]))
        message = dict(as_dict(choice.get("message")))
        texts = [self.text(u) for u in units if self.is_text(u)]
        calls = [u for u in units if self.is_call(u) and u.get("type") != "function_call"]
        legacy = [u["function"] for u in units if self.is_call(u) and u.get("type") == "function_call"]
        message["content"] = "".join(texts) if texts else None
        if calls or "tool_calls" in message:
            message["tool_calls"] = calls or None
        if legacy or "function_call" in message:
            message["function_call"] = legacy[0] if legacy else None
        choice["message"] = message
        if stop is not None:
            choice["finish_reason"] = stop
        reply["choices"] = [choice, *choices[1:]]
        return reply

    def is_call(self, unit: Any) -> bool:
        return isinstance(unit, Mapping) and isinstance(unit.get("function"), Mapping)

    def call_whole(self, unit: Any) -> bool:
        return parses_to_object(as_dict(as_dict(unit).get("function")).get("arguments"))

    def window_full(self, reply: Mapping[str, Any], stop: str | None) -> bool:
        if stop in self.window_stops:
            return True
        # "length" and not one token written: the prompt filled the window. (Reasoning
        # models that spend the budget thinking report their tokens, so they escalate.)
        usage = self.usage(reply)
        return not self.units(reply) and not (usage.output if usage else None)

    def read_usage(self, usage: Mapping[str, Any]) -> Usage:
        return usage_with_cached(
            count(usage.get("prompt_tokens")),
            count(usage.get("completion_tokens")),
            count(as_dict(usage.get("prompt_tokens_details")).get("cached_tokens")),
        )

    def max_tokens_slot(self, body: Mapping[str, Any]) -> tuple[str | None, str]:
        return None, "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"

    def several_choices(self, body: Mapping[str, Any]) -> bool:
        return body.get("n") not in (1, None)

    def folder(self) -> ChunkFolder:
        return ChunkFolder()

    def recall_tool(self) -> dict[str, Any]:
        function = {"name": RECALL_TOOL, "description": RECALL_DESCRIPTION, "parameters": RECALL_PARAMETERS}
        return {"type": "function", "function": function}

    def strict_recall_tool(self) -> dict[str, Any]:
        """The recall tool in strict form, which the SDK's ``parse`` and ``stream`` demand of every tool.

        Strict mode wants every property required and nothing else allowed, so
        the optional ones may be ``null``, which the recall handler reads as absent.
        """
        tool = self.recall_tool()
        function = dict(tool["function"])
        schema = dict(function["parameters"])
        properties = {
            name: {**prop, "type": prop["type"] if name in schema["required"] else [prop["type"], "null"]}
            for name, prop in schema["properties"].items()
        }
        function["parameters"] = {
            **schema,
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        }
        function["strict"] = True
        return {**tool, "function": function}


DIALECT = ChatDialect()
