"""Which requests the proxy manages, which it counts, and which it passes through untouched.

Only the calls that send a conversation are managed; everything else (a
client's ``HEAD /`` probe, ``GET /v1/models``, ``/v1/responses/compact``,
batches, paths nobody here knows) goes upstream byte for byte, since the
proxy cannot know what changing it would break.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Route", "family_of", "route_of"]

_GEMINI = re.compile(r"/v1(?:beta|alpha)?/models/[^/:]+:(generateContent|streamGenerateContent|countTokens)")


@dataclass(frozen=True, slots=True)
class Route:
    """What to do with one request."""

    kind: str
    """``manage`` (the managed call), ``count`` (manage, then count upstream), ``passthrough``,
    ``metrics``, ``healthz``, ``recall`` (the proxy's own recall of an archived output)."""
    family: str
    """The upstream it goes to: ``anthropic``, ``openai``, ``gemini`` or ``chatgpt`` (Codex's
    ChatGPT-login backend; its error envelope is OpenAI's)."""
    api: str | None = None
    """The wire API of a managed or counted body."""
    stream: bool | None = None
    """Whether the path itself asks for a stream (Gemini); ``None``: the body says."""


def family_of(path: str, headers: Mapping[str, str]) -> str:
    """The upstream of a request the routes do not name: told by its path, else its credential header."""
    if path.startswith(("/v1/messages", "/v1/complete")):
        return "anthropic"
    if path.startswith(("/v1beta/", "/v1alpha/", "/upload/")):
        return "gemini"
    if path.startswith("/backend-api/"):
        return "chatgpt"
    names = {name.lower() for name in headers}
    if "x-goog-api-key" in names:
        return "gemini"
    if "x-api-key" in names or "anthropic-version" in names:
        return "anthropic"
    return "openai"


def route_of(method: str, path: str, headers: Mapping[str, str]) -> Route:
    """The route of ``method`` on ``path`` (the query is not part of it: ``?beta=true`` changes nothing)."""
    if method == "GET" and path == "/metrics":
        return Route("metrics", "openai")
    if method == "GET" and path == "/healthz":
        return Route("healthz", "openai")
    if method == "GET" and path.startswith("/toolbudget/recall/"):
        return Route("recall", "openai")
    if method == "POST":
        if path == "/v1/messages":
            return Route("manage", "anthropic", "anthropic")
        if path == "/v1/messages/count_tokens":
            return Route("count", "anthropic", "anthropic")
        if path == "/v1/chat/completions":
            return Route("manage", "openai", "openai-chat")
        if path == "/v1/responses":
            return Route("manage", "openai", "openai-responses")
        if path == "/backend-api/codex/responses":  # Codex logged in with ChatGPT: the same body
            return Route("manage", "chatgpt", "openai-responses")
        gemini = _GEMINI.fullmatch(path)
        if gemini is not None:
            action = gemini.group(1)
            if action == "countTokens":
                return Route("count", "gemini", "gemini")
            return Route("manage", "gemini", "gemini", stream=action == "streamGenerateContent")
    return Route("passthrough", family_of(path, headers))
