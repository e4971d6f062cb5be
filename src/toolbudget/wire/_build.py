"""The parsers' constructors: the model's objects, built without their ``__init__``.

A frozen dataclass's ``__init__`` writes each field through
``object.__setattr__`` (to get past the frozen ``__setattr__``), and the
parsers then set ``origin`` the same way: about 1 µs an object on the 2-core
machine these figures come from. A long history's parse builds hundreds of
them, and those constructors were half of it.

Each function here makes the very object the constructor would, with its
``origin`` set, in about a quarter of the time: it fills a *draft*, an
instance of a plain class with the same slots (plain attribute stores, the
fastest there are), then makes the draft an instance of the model class by
assigning its ``__class__``, which Python allows between classes of the same
layout. Nothing else runs in a model object's construction (the classes have
no ``__post_init__``), so nothing is skipped. The drafts are checked against
the model when this module is imported: a field added to a model class and not
here fails at once rather than leaving a slot unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ..model import (
    Data,
    Media,
    Message,
    Opaque,
    Part,
    Request,
    Role,
    Text,
    Thinking,
    ToolCall,
    ToolDef,
    ToolResult,
)

__all__ = [
    "new_data",
    "new_media",
    "new_message",
    "new_opaque",
    "new_request",
    "new_text",
    "new_thinking",
    "new_tool_call",
    "new_tool_def",
    "new_tool_result",
]


def _draft(cls: type, *names: str) -> type:
    """A plain class with the slots of ``cls``, whose fields must be ``names``, in order."""
    declared = tuple(f.name for f in fields(cls))
    if declared != names or tuple(getattr(cls, "__slots__", ())) != names:
        raise AssertionError(f"{cls.__name__} has the fields {declared}; its builder sets {names}")
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": names, "__module__": __name__})
    probe = draft()
    for name in names:
        setattr(probe, name, None)
    probe.__class__ = cls  # TypeError now, on import, if the two layouts ever differ
    return draft


_TextDraft: Any = _draft(Text, "text", "extra", "form", "origin")
_MediaDraft: Any = _draft(Media, "kind", "media_type", "data", "url", "extra", "form", "origin")
_DataDraft: Any = _draft(Data, "value", "extra", "form", "origin")
_ThinkingDraft: Any = _draft(Thinking, "text", "signature", "redacted", "source", "extra", "form", "origin")
_ToolCallDraft: Any = _draft(
    ToolCall, "id", "name", "arguments", "arguments_json", "arguments_ok", "extra", "form", "origin"
)
_ToolResultDraft: Any = _draft(
    ToolResult, "call_id", "content", "is_error", "name", "extra", "form", "origin"
)
_OpaqueDraft: Any = _draft(Opaque, "type", "value", "extra", "form", "origin")
_MessageDraft: Any = _draft(Message, "role", "parts", "extra", "form", "origin")
_ToolDefDraft: Any = _draft(ToolDef, "name", "description", "parameters", "kind", "extra", "form", "origin")
_RequestDraft: Any = _draft(Request, "api", "messages", "system", "tools", "extra", "form", "origin")


def new_text(value: str, extra: Mapping[str, Any], form: tuple[str, ...], origin: Any) -> Text:
    part = _TextDraft()
    part.text = value
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = Text
    return part  # type: ignore[no-any-return]


def new_media(
    kind: str,
    media_type: str | None,
    data: str | None,
    url: str | None,
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> Media:
    part = _MediaDraft()
    part.kind = kind
    part.media_type = media_type
    part.data = data
    part.url = url
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = Media
    return part  # type: ignore[no-any-return]


def new_data(value: Any, extra: Mapping[str, Any], form: tuple[str, ...], origin: Any) -> Data:
    part = _DataDraft()
    part.value = value
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = Data
    return part  # type: ignore[no-any-return]


def new_thinking(
    value: str | None,
    signature: str | None,
    redacted: bool,
    source: str | None,
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> Thinking:
    part = _ThinkingDraft()
    part.text = value
    part.signature = signature
    part.redacted = redacted
    part.source = source
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = Thinking
    return part  # type: ignore[no-any-return]


def new_tool_call(
    call_id: str | None,
    name: str,
    arguments: Any,
    arguments_json: str | None,
    arguments_ok: bool,
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> ToolCall:
    part = _ToolCallDraft()
    part.id = call_id
    part.name = name
    part.arguments = arguments
    part.arguments_json = arguments_json
    part.arguments_ok = arguments_ok
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = ToolCall
    return part  # type: ignore[no-any-return]


def new_tool_result(
    call_id: str | None,
    content: tuple[Part, ...],
    is_error: bool,
    name: str | None,
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> ToolResult:
    part = _ToolResultDraft()
    part.call_id = call_id
    part.content = content
    part.is_error = is_error
    part.name = name
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = ToolResult
    return part  # type: ignore[no-any-return]


def new_opaque(kind: str, value: Any, extra: Mapping[str, Any], form: tuple[str, ...], origin: Any) -> Opaque:
    part = _OpaqueDraft()
    part.type = kind
    part.value = value
    part.extra = extra
    part.form = form
    part.origin = origin
    part.__class__ = Opaque
    return part  # type: ignore[no-any-return]


def new_message(
    role: Role, parts: tuple[Part, ...], extra: Mapping[str, Any], form: tuple[str, ...], origin: Any
) -> Message:
    entry = _MessageDraft()
    entry.role = role
    entry.parts = parts
    entry.extra = extra
    entry.form = form
    entry.origin = origin
    entry.__class__ = Message
    return entry  # type: ignore[no-any-return]


def new_tool_def(
    name: str,
    description: str | None,
    parameters: Any,
    kind: str,
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> ToolDef:
    tool = _ToolDefDraft()
    tool.name = name
    tool.description = description
    tool.parameters = parameters
    tool.kind = kind
    tool.extra = extra
    tool.form = form
    tool.origin = origin
    tool.__class__ = ToolDef
    return tool  # type: ignore[no-any-return]


def new_request(
    api: str | None,
    messages: tuple[Message, ...],
    system: tuple[Part, ...],
    tools: tuple[ToolDef, ...],
    extra: Mapping[str, Any],
    form: tuple[str, ...],
    origin: Any,
) -> Request:
    request = _RequestDraft()
    request.api = api
    request.messages = messages
    request.system = system
    request.tools = tools
    request.extra = extra
    request.form = form
    request.origin = origin
    request.__class__ = Request
    return request  # type: ignore[no-any-return]
