"""From a conversation read off disk to the request body an agent would send next."""

from __future__ import annotations

from typing import Any

from . import wire
from .model import Conversation, Request, frozen_mapping

__all__ = ["DEFAULT_MAX_TOKENS", "to_request"]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; a transcript rarely records it."""


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
    """
    api = wire.resolve_api(api)
    extra: dict[str, Any] = {}
    chosen = model or conversation.meta.get("model")
    if isinstance(chosen, str) and api not in ("gemini", "bedrock-converse"):
        extra["model"] = chosen  # Gemini and Bedrock name the model in the URL
    if api == "anthropic":
        extra["max_tokens"] = max_tokens or DEFAULT_MAX_TOKENS
    elif max_tokens is not None:
        key = {"openai-chat": "max_completion_tokens", "openai-responses": "max_output_tokens"}.get(api)
        if key:
            extra[key] = max_tokens
    request = Request(
        None, conversation.messages, conversation.system, conversation.tools, frozen_mapping(extra)
    )
    return wire.render(request, api)
