"""What each API demands of tool-call pairing, as data.

The checker and the repairer are written once, over the canonical model; the
differences between providers live here: where results are carried, how calls
and results are matched, which extra layout rules apply, and how the provider
words each error (``reference/providers.md`` section 5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..errors import UnknownAPIError
from ..wire.gemini import SIGNATURE_KEYS as _GEMINI_SIGNATURES

__all__ = ["RULES", "Rules", "rules_for"]

Carrier = Literal["user-message", "tool-messages", "items"]


@dataclass(frozen=True, slots=True)
class Rules:
    api: str
    list_name: str
    """The body field the history lives in; violation locations start with it."""
    carrier: Carrier
    """``user-message``: all results of a turn sit in the next (user) message.
    ``tool-messages``: each result is its own ``tool`` message right after the call.
    ``items``: calls and results are separate items; a result must follow its call."""
    match_by_name: bool = False
    """Gemini may omit ids: then a response answers a call of the same name."""
    results_first: bool = False
    unique_ids: bool = False
    id_pattern: re.Pattern[str] | None = None
    alternation: bool = False
    no_mixed_results: bool = False
    equal_counts: bool = False
    call_after_user: bool = False
    thinking_first: bool = False
    tools_required: bool = False
    """Tool blocks in the history need tool definitions in the request."""
    system_role: bool = True
    """Whether a ``system`` message may sit in the history; where not, the API takes the
    system prompt only in its own top-level field."""
    signature_keys: tuple[str, ...] = ()
    """Fields of a call that hold a signature the provider checks (Gemini's ``thoughtSignature``):
    a call that is dropped hands them on instead of losing them."""
    texts: dict[str, str] = field(default_factory=dict)


_ANTHROPIC_TEXTS = {
    "missing_result": (
        "`tool_use` ids were found without `tool_result` blocks immediately after: {ids}. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    ),
    "orphan_result": (
        "unexpected `tool_use_id` found in `tool_result` blocks: {ids}. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    ),
    "duplicate_result": "found multiple `tool_result` blocks with id: {ids}",
    "duplicate_call_id": "`tool_use` ids must be unique",
    "invalid_call_id": "String should match pattern '^[a-zA-Z0-9_-]+$'",
    "results_not_first": (
        "Did not find {n} tool_result block(s) at the beginning of this message. "
        "Messages following tool_use blocks must begin with a matching number of tool_result blocks."
    ),
    "thinking_first": (
        "Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, "
        "a final `assistant` message must start with a thinking block (preceeding the lastmost set of "
        "`tool_use` and `tool_result` blocks). To avoid this requirement, disable `thinking`."
    ),
}

_ANTHROPIC_TEXTS["system_role"] = (
    'Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
    'not "system" as an input message role.'
)

_ANTHROPIC_TEXTS["tools_required"] = (
    "Requests which include `tool_use` or `tool_result` blocks must define tools."
)

_OPENAI_CHAT_TEXTS = {
    "missing_result": (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
    ),
    "orphan_result": (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
        "'tool_calls'."
    ),
    "unmatched_result": (
        "Invalid parameter: 'tool_call_id' of '{ids}' not found in 'tool_calls' of previous message."
    ),
    "duplicate_result": "Invalid parameter: more than one tool message responds to 'tool_call_id' '{ids}'.",
    "duplicate_call_id": "Invalid parameter: 'tool_calls' holds the id '{ids}' more than once.",
}

_RESPONSES_TEXTS = {
    "missing_result": "No tool output found for function call {ids}.",
    "orphan_result": "No tool call found for function call output with call_id {ids}.",
    "duplicate_result": "More than one function call output was provided for call_id {ids}.",
    "duplicate_call_id": "More than one function call was provided with call_id {ids}.",
    "reasoning_alone": "Item '{ids}' of type 'reasoning' was provided without its required following item.",
}

_GEMINI_TEXTS = {
    "missing_result": (
        "Please ensure that the number of function response parts is equal to the number of function "
        "call parts of the function call turn."
    ),
    "orphan_result": (
        "Please ensure that function response turn comes immediately after a function call turn."
    ),
    "duplicate_result": (
        "Please ensure that the number of function response parts is equal to the number of function "
        "call parts of the function call turn."
    ),
    "duplicate_call_id": "Function call id {ids} appears more than once in the function call turn.",
    "call_after_user": (
        "Please ensure that function call turn comes immediately after a user turn or after a function "
        "response turn."
    ),
    "system_role": "Please use a valid role: user, model.",
}

_BEDROCK_TEXTS = {
    "missing_result": "Expected toolResult blocks at {where}.content for the following Ids: {ids}",
    "orphan_result": (
        "The number of toolResult blocks at {where}.content exceeds the number of toolUse blocks of "
        "previous turn."
    ),
    "duplicate_result": (
        "The number of toolResult blocks at {where}.content exceeds the number of toolUse blocks of "
        "previous turn."
    ),
    "duplicate_call_id": "toolUse ids must be unique: {ids}",
    "invalid_call_id": "Value at 'toolUseId' failed to satisfy constraint: Member must satisfy regular "
    "expression pattern: [a-zA-Z0-9_-]+",
    "mixed_results": "Conversation blocks and tool result blocks cannot be provided in the same turn.",
    "empty_error_result": (
        "The content field at {where}.toolResult cannot be empty when status value is error."
    ),
    "alternation": (
        "A conversation must alternate between user and assistant roles. Make sure the conversation "
        "alternates between user and assistant roles and try again."
    ),
    "tools_required": (
        "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    ),
    "system_role": (
        "1 validation error detected: Value 'system' at '{member}.role' failed to satisfy constraint: "
        "Member must satisfy enum value set: [user, assistant]"
    ),
    "first_user": (
        "A conversation must start with a user message. Try again with a conversation that starts with "
        "a user message."
    ),
}

_SAFE_ID = re.compile(r"[a-zA-Z0-9_-]+\Z")
"""An id Anthropic and Bedrock accept, whole: ``$`` would let an id end in a newline."""

RULES: dict[str, Rules] = {
    "anthropic": Rules(
        "anthropic",
        "messages",
        "user-message",
        system_role=False,
        results_first=True,
        unique_ids=True,
        id_pattern=_SAFE_ID,
        thinking_first=True,
        tools_required=True,
        texts=_ANTHROPIC_TEXTS,
    ),
    "openai-chat": Rules("openai-chat", "messages", "tool-messages", texts=_OPENAI_CHAT_TEXTS),
    "openai-responses": Rules("openai-responses", "input", "items", unique_ids=True, texts=_RESPONSES_TEXTS),
    "gemini": Rules(
        "gemini",
        "contents",
        "user-message",
        system_role=False,
        match_by_name=True,
        results_first=True,
        equal_counts=True,
        call_after_user=True,
        signature_keys=_GEMINI_SIGNATURES,
        texts=_GEMINI_TEXTS,
    ),
    "bedrock-converse": Rules(
        "bedrock-converse",
        "messages",
        "user-message",
        system_role=False,
        results_first=True,
        unique_ids=True,
        id_pattern=_SAFE_ID,
        alternation=True,
        no_mixed_results=True,
        equal_counts=True,
        tools_required=True,
        texts=_BEDROCK_TEXTS,
    ),
}


def rules_for(api: str) -> Rules:
    try:
        return RULES[api]
    except KeyError:
        raise UnknownAPIError(f"no pairing rules for API {api!r}") from None
