"""The five wire APIs: one package each, holding everything toolbudget knows of that API.

Each package gives ``parse(body) -> Request`` and ``render(Request) -> body``
for requests, ``DIALECT`` (a :class:`Dialect`) for replies (stop reason,
content units, usage, the request's output limit, a :class:`Folder` for its
streams) and ``recall_tool()``. The rest of the library asks :func:`module`
or :func:`dialect` rather than knowing a provider's field names.

This package also tells a body's API from its shape (:func:`detect_api`) and
lays a parsed request out for another API (:func:`adapt`, what each module's
``render`` does first). "Convert", in this library, means one thing: a
conversation read off disk made into an API's request body
(:func:`toolbudget.to_request`, ``toolbudget convert``). Three helpers of the wire
forms are shared with the rest of the library, so they are offered here rather
than reached for in ``_common``: :func:`dumps_text` (a value as the JSON text a
text-only field carries), :func:`parse_arguments` (a call's argument text,
parsed, and whether it parsed) and :func:`tools_for_calls` (placeholder
definitions for calls that came without any).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Protocol, cast

from ..errors import UnknownAPIError
from ..jsonio import to_body, type_name
from ..model import Request
from ._common import EntryCache, dumps_text, parse_arguments, tools_for_calls
from ._reply import Dialect
from ._stream import Folder

__all__ = [
    "APIS",
    "Dialect",
    "EntryCache",
    "Folder",
    "WireModule",
    "adapt",
    "detect_api",
    "dialect",
    "dumps_text",
    "module",
    "parse",
    "parse_arguments",
    "render",
    "resolve_api",
    "tools_for_calls",
]

APIS: tuple[str, ...] = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")

_MODULES = {
    "anthropic": "anthropic",
    "openai-chat": "openai_chat",
    "openai-responses": "openai_responses",
    "gemini": "gemini",
    "bedrock-converse": "bedrock",
}

# Spellings a user may type for an API.
_ALIASES = {
    "messages": "anthropic",
    "claude": "anthropic",
    "openai": "openai-chat",
    "chat": "openai-chat",
    "chat-completions": "openai-chat",
    "responses": "openai-responses",
    "google": "gemini",
    "bedrock": "bedrock-converse",
    "converse": "bedrock-converse",
}


class WireModule(Protocol):
    API: str
    DIALECT: Dialect

    def parse(self, body: Any, cache: EntryCache | None = None) -> Request: ...

    def render(self, request: Request) -> dict[str, Any]: ...

    def adapt(self, request: Request) -> Request: ...

    def recall_tool(self) -> dict[str, Any]: ...


def resolve_api(api: str) -> str:
    """The canonical name of an API, accepting common aliases."""
    name = api.strip().lower().replace("_", "-")
    name = _ALIASES.get(name, name)
    if name not in _MODULES:
        raise UnknownAPIError(f"unknown API {api!r} (expected one of: {', '.join(APIS)})")
    return name


_LOADED: dict[str, WireModule] = {}


def module(api: str) -> WireModule:
    """The wire module of an API."""
    loaded = _LOADED.get(api)
    if loaded is None:
        mod: ModuleType = importlib.import_module(f"{__name__}.{_MODULES[resolve_api(api)]}")
        loaded = _LOADED[api] = cast(WireModule, mod)
    return loaded


def dialect(api: str) -> Dialect:
    """How replies, streams and output limits of ``api`` are laid out (:class:`Dialect`)."""
    return module(api).DIALECT


def parse(body: Any, api: str | None = None, cache: EntryCache | None = None) -> Request:
    """Parse a body of ``api`` (told from the body's shape when ``None``).

    ``cache`` remembers parsed history entries across calls (see :class:`EntryCache`).
    """
    body = to_body(body)
    return module(api or detect_api(body)).parse(body, cache)


def render(request: Request, api: str | None = None) -> dict[str, Any]:
    """Render a request for ``api`` (its own API when ``None``), converting it if needed."""
    target = api or request.api
    if target is None:
        raise UnknownAPIError("this request has no API of its own; name the API to render it for")
    return module(target).render(request)


def adapt(request: Request, api: str) -> Request:
    """The request laid out for ``api``, still a :class:`Request` (itself when it is ``api``'s own)."""
    mod = module(api)
    return request if request.api == mod.API else mod.adapt(request)


def detect_api(body: Any) -> str:
    """Tell a request body's wire API from its shape.

    Raises :class:`UnknownAPIError` when the shape fits none, or fits more than
    one equally (a lone user message with text is both Anthropic and OpenAI).
    """
    body = to_body(body)
    if "contents" in body or "systemInstruction" in body or "system_instruction" in body:
        return "gemini"
    if "input" in body and "messages" not in body:
        return "openai-responses"
    if "toolConfig" in body or "inferenceConfig" in body or "additionalModelRequestFields" in body:
        return "bedrock-converse"
    messages = body.get("messages")
    if not isinstance(messages, list):
        if "messages" in body:
            raise UnknownAPIError(f"`messages` must be an array of messages, not {type_name(messages)}")
        raise UnknownAPIError(
            "cannot tell the API of this body: it has no `messages`, `input` or `contents`; "
            "pass the API explicitly"
        )
    votes = _vote_messages(messages)
    system = body.get("system")
    if isinstance(system, str):
        votes.add("anthropic")
    elif isinstance(system, list) and system and isinstance(system[0], dict):
        votes.add("anthropic" if "type" in system[0] else "bedrock-converse")
    if "tools" in body and isinstance(body["tools"], list) and body["tools"]:
        first = body["tools"][0]
        if isinstance(first, dict):
            if first.get("type") == "function" and "function" in first:
                votes.add("openai-chat")
            elif "input_schema" in first:
                votes.add("anthropic")
    if len(votes) == 1:
        return votes.pop()
    if not votes:
        odd = _odd_message(messages)
        if odd is not None:
            raise UnknownAPIError(f"cannot tell the API of this body: {odd}")
        raise UnknownAPIError(
            "cannot tell the API of this body: its messages fit both Anthropic and OpenAI Chat; "
            "pass the API explicitly"
        )
    raise UnknownAPIError(f"cannot tell the API of this body: it mixes {' and '.join(sorted(votes))} shapes")


_ROLES = ("user", "assistant", "system", "developer", "tool", "function")
"""Every role a message of ``messages`` has in some API."""


def _odd_message(messages: list[Any]) -> str | None:
    """What makes no API's message, and where: said instead of "fits both" when the shape is wrong."""
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index} must be an object, not {type_name(message)}"
        role = message.get("role")
        if not isinstance(role, str):
            return f"messages.{index}.role must be a string, not {type_name(role)}"
        if role not in _ROLES:
            return f"messages.{index}.role {role!r} is not a role of any API ({', '.join(_ROLES)})"
    return None


def _vote_messages(messages: list[Any]) -> set[str]:
    votes: set[str] = set()
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("system", "developer", "tool", "function"):
            votes.add("openai-chat")
        if "tool_calls" in message or "tool_call_id" in message:
            votes.add("openai-chat")
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind in ("tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"):
                    votes.add("anthropic")
                elif kind in ("image_url", "input_audio", "refusal", "file"):
                    votes.add("openai-chat")
                elif kind is None and ("toolUse" in block or "toolResult" in block or "text" in block):
                    votes.add("bedrock-converse")
        if len(votes) > 1:
            break
    return votes
