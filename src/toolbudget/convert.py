"""From a conversation read off disk to the request body an agent would send next.

This is what "convert" means throughout toolbudget, and what ``toolbudget
convert`` writes. Laying an already parsed :class:`~toolbudget.model.Request`
out for another API is a different step, :func:`toolbudget.wire.adapt`.

The body is what the transcript recorded, in the wire form of the API asked
for, with two additions a provider needs:

- ``max_tokens``, in the API's own field: Anthropic's ``max_tokens`` (which it
  requires: :data:`DEFAULT_MAX_TOKENS` when none is given), Chat's
  ``max_completion_tokens``, Responses' ``max_output_tokens``, Gemini's
  ``generationConfig.maxOutputTokens`` and Bedrock's ``inferenceConfig.maxTokens``.
  It must be a positive number.
- for Bedrock, which refuses a conversation that does not start with a user
  message ("A conversation must start with a user message"), a short opening
  user turn, :data:`OPENING_USER_TEXT`, before a conversation whose agent
  spoke first (Codex and tau2 sessions can). The other APIs accept such a
  history, so it is left as recorded.
"""

from __future__ import annotations

from typing import Any

from . import wire
from .errors import InputError
from .model import Conversation, Message, Request, Text, frozen_mapping

__all__ = ["DEFAULT_MAX_TOKENS", "OPENING_USER_TEXT", "to_request"]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; a transcript rarely records it."""

OPENING_USER_TEXT = "[toolbudget] The recorded conversation starts with the assistant's turn."
"""The user turn put first in a Bedrock body whose conversation the agent opened."""


def _limit(api: str, max_tokens: int | None) -> dict[str, Any]:
    dialect = wire.dialect(api)
    if max_tokens is None:
        if not dialect.max_tokens_required:
            return {}
        max_tokens = DEFAULT_MAX_TOKENS
    elif isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise InputError(f"max_tokens must be a positive number of tokens, not {max_tokens!r}")
    holder, key = dialect.new_max_tokens_slot
    return {holder: {key: max_tokens}} if holder else {key: max_tokens}


def to_request(
    conversation: Conversation,
    api: str,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The body an agent at the end of ``conversation`` would send to ``api``.

    ``model`` defaults to the model the transcript names, and is left out when
    it names none: a made-up model name would be a lie in the output.
    ``max_tokens`` that is not a positive integer raises :class:`InputError`.
    """
    api = wire.resolve_api(api)
    extra: dict[str, Any] = {}
    chosen = model or conversation.meta.get("model")
    if isinstance(chosen, str) and api not in ("gemini", "bedrock-converse"):
        extra["model"] = chosen  # Gemini and Bedrock name the model in the URL
    extra.update(_limit(api, max_tokens))
    messages = conversation.messages
    if api == "bedrock-converse":
        first = next((m for m in messages if m.role != "system"), None)
        if first is not None and first.role == "assistant":
            at = messages.index(first)
            messages = (*messages[:at], Message("user", (Text(OPENING_USER_TEXT),)), *messages[at:])
    request = Request(None, messages, conversation.system, conversation.tools, frozen_mapping(extra))
    return wire.render(request, api)
