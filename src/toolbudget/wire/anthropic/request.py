"""Anthropic Messages API: ``system``, ``messages`` of content blocks, ``tools``.

Tool results live in the user message after the call, as ``tool_result``
blocks that must come first. Block types we do not model (server tools, MCP,
compaction, search results...) are carried as :class:`~toolbudget.model.Opaque`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import ShapeError
from ...jsonio import to_body, type_name
from ...model import (
    EMPTY,
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
from .._build import new_message, new_request, new_text, new_tool_call, new_tool_def, new_tool_result
from .._common import (
    EntryCache,
    cached,
    expect_dict,
    expect_list,
    expect_str,
    fill_call_ids,
    kept_in,
    merge_runs,
    neutral,
    parse_history,
    parse_tools,
    read_role,
    render_body,
    render_leftover,
    rest,
    results_first,
    reused,
    safe_ids,
    tools_for_calls,
    unknown,
    with_extra,
)

__all__ = ["API", "parse", "render"]

API = "anthropic"

_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}
# `system` is read so that validation can report it the way the API does and repair can move
# it; the API itself takes only these two in `messages`.
_API_ROLES = ("assistant", "user")

# Block types the API documents that we carry without modelling.
OPAQUE_TYPES = frozenset(
    {
        "search_result",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "tool_search_tool_result",
        "advisor_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "mcp_tool_listing",
        "container_upload",
        "compaction",
        "tool_addition",
        "tool_removal",
        "tool_reference",
        "browser_state",
        "fallback",
    }
)
_MODELLED_TYPES = frozenset(
    {"text", "image", "document", "thinking", "redacted_thinking", "tool_use", "tool_result"}
)
KNOWN_TYPES = OPAQUE_TYPES | _MODELLED_TYPES

_K_TEXT = frozenset({"type", "text"})
_K_MEDIA = frozenset({"type", "source"})
_K_THINKING = frozenset({"type", "thinking", "signature"})
_K_REDACTED = frozenset({"type", "data"})
_K_TOOL_USE = frozenset({"type", "id", "name", "input"})
_K_TOOL_RESULT = frozenset({"type", "tool_use_id", "content", "is_error"})
_K_MESSAGE = frozenset({"role", "content"})
_K_TOOL = frozenset({"name", "description", "input_schema", "type"})
_K_BODY = frozenset({"messages", "system", "tools"})
_CONTENT_STR = ("content:str",)


# --- parse ---------------------------------------------------------------------------


def parse(body: Any, cache: EntryCache | None = None) -> Request:
    """Read a Messages API request body into a :class:`Request`."""
    wire = body if type(body) is dict else to_body(body)  # wire.parse has read it already
    messages = parse_history(cache, wire, "messages", _parse_message, "an Anthropic Messages body")
    system: tuple[Part, ...] = ()
    form: tuple[str, ...] = ()
    if "system" in wire:
        raw = wire["system"]
        if isinstance(raw, str):
            system, form = (Text(raw),), ("system:str",)
        elif not isinstance(raw, list):  # both forms are valid: say so, not just "an array"
            raise ShapeError(
                f"expected a string or an array of text blocks, found {type_name(raw)}", location="system"
            )
        else:
            system = cached(
                cache,
                b"system",
                raw,
                lambda: tuple(
                    _parse_block(b, f"system.{i}") for i, b in enumerate(expect_list(raw, "system"))
                ),
            )
            form = ("system",)
    tools: tuple[ToolDef, ...] = ()
    if "tools" in wire:
        tools = parse_tools(cache, wire["tools"], _parse_tool)
        form += ("tools",)
    return new_request(API, messages, system, tools, rest(wire, _K_BODY), form, (API, wire))


def _parse_message(raw: Any, loc: str) -> Message:
    # Locations are spelled out only for an error, and fields are counted rather than
    # compared with the modelled ones once each is known to be there: a long history's
    # parse is mostly these calls.
    if not isinstance(raw, dict):
        raise ShapeError(f"expected an object, found {type_name(raw)}", location=loc)
    value = raw.get("role")
    role = _ROLES.get(value) if isinstance(value, str) else None
    if role is None:
        role = read_role(value, _ROLES, f"{loc}.role", _API_ROLES)
    if "content" not in raw:
        raise ShapeError("a message needs `content`", location=loc)
    content = raw["content"]
    if isinstance(content, str):
        parts: tuple[Part, ...] = (new_text(content, EMPTY, (), None),)
        form: tuple[str, ...] = _CONTENT_STR
    else:
        if not isinstance(content, list):
            expect_list(content, f"{loc}.content")
        blocks = []
        for j, block in enumerate(content):
            blocks.append(_parse_block(block, loc, ".content.", j))
        parts = tuple(blocks)
        form = ()
    extra = EMPTY if len(raw) == 2 else rest(raw, _K_MESSAGE)  # `role` and `content` are there
    return new_message(role, parts, extra, form, (API, raw))


def _parse_block(raw: Any, loc: str, within: str = "", j: int | None = None) -> Part:
    """One content block; its location is ``loc``, or ``loc + within + j`` when ``j`` is given."""
    if not isinstance(raw, dict):
        raise ShapeError(f"expected an object, found {type_name(raw)}", location=_at(loc, within, j))
    wire = raw
    kind = wire.get("type")
    if kind == "text":
        text: Any = wire.get("text")
        if not isinstance(text, str):
            expect_str(text, f"{_at(loc, within, j)}.text")
        extra = EMPTY if len(wire) == 2 else rest(wire, _K_TEXT)
        return new_text(text, extra, (), (API, wire))
    if kind == "tool_result":
        return _parse_result(wire, _at(loc, within, j) if j is None else "", loc, within, j)
    if kind == "tool_use":
        call_id: Any = wire.get("id")
        name: Any = wire.get("name")
        arguments: Any = wire.get("input")
        if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, dict)):
            where = _at(loc, within, j)
            expect_str(call_id, f"{where}.id")
            expect_str(name, f"{where}.name")
            expect_dict(arguments, f"{where}.input")
        extra = EMPTY if len(wire) == 4 else rest(wire, _K_TOOL_USE)
        return new_tool_call(call_id, name, arguments, None, True, extra, (), (API, wire))
    where = _at(loc, within, j)
    part: Part
    if kind == "thinking":
        part = Thinking(
            expect_str(wire.get("thinking"), f"{where}.thinking"),
            wire.get("signature"),
            extra=rest(wire, _K_THINKING),
            form=("signature",) if "signature" in wire else (),
        )
    elif kind == "redacted_thinking":
        part = Thinking(
            None, expect_str(wire.get("data"), f"{where}.data"), True, extra=rest(wire, _K_REDACTED)
        )
    elif not isinstance(kind, str):
        raise unknown("content block type", kind, f"{where}.type", KNOWN_TYPES)
    elif kind in {"image", "document"}:
        part = _parse_media(kind, wire, where)
    elif kind in OPAQUE_TYPES:
        part = Opaque(kind, wire)
    else:
        raise unknown("content block type", kind, f"{where}.type", KNOWN_TYPES)
    object.__setattr__(part, "origin", (API, wire))
    return part


def _at(loc: str, within: str, j: int | None) -> str:
    return loc if j is None else f"{loc}{within}{j}"


def _parse_media(kind: str, wire: dict[str, Any], loc: str) -> Media:
    source = expect_dict(wire.get("source"), f"{loc}.source")
    stype = source.get("type")
    if stype == "base64" and set(source) == {"type", "media_type", "data"}:
        return Media(kind, source["media_type"], source["data"], extra=rest(wire, _K_MEDIA), form=("base64",))
    if stype == "url" and set(source) == {"type", "url"}:
        return Media(kind, url=source["url"], extra=rest(wire, _K_MEDIA), form=("url",))
    # Files, text and content sources are carried whole.
    return Media(kind, extra=rest(wire, frozenset({"type"})), form=("source",))


def _parse_result(
    wire: dict[str, Any], where: str, loc: str = "", within: str = "", j: int | None = None
) -> ToolResult:
    """A ``tool_result`` block, at ``where`` (or, when that is empty, ``loc + within + j``)."""
    content: Any = wire.get("content")
    if "content" not in wire:
        parts: tuple[Part, ...] = ()
        form: tuple[str, ...] = ("content:absent",)
    elif isinstance(content, str):
        parts = (new_text(content, EMPTY, (), None),)
        form = ("content:str",)
    else:
        where = where or _at(loc, within, j)
        if not isinstance(content, list):
            expect_list(content, f"{where}.content")
        blocks = []
        for k, block in enumerate(content):
            blocks.append(_parse_block(block, where, ".content.", k))
        parts = tuple(blocks)
        form = ("content:list",)
    is_error = wire.get("is_error")
    if "is_error" in wire:
        form += ("is_error",)
    call_id = wire.get("tool_use_id")
    if not isinstance(call_id, str):
        expect_str(call_id, f"{where or _at(loc, within, j)}.tool_use_id")
    # Every field modelled, when the ones counted are all there is: `type`, `tool_use_id` and these two.
    modelled_only = len(wire) == 2 + ("content" in wire) + ("is_error" in wire)
    extra = EMPTY if modelled_only else rest(wire, _K_TOOL_RESULT)
    return new_tool_result(call_id, parts, bool(is_error), None, extra, form, (API, wire))


def _parse_tool(raw: Any, loc: str) -> ToolDef:
    wire = expect_dict(raw, loc)
    kind = wire.get("type", "function")
    form: tuple[str, ...] = ()
    if kind == "custom":
        kind, form = "function", ("type:custom",)
    if not isinstance(kind, str):
        raise ShapeError("a tool's `type` must be a string", location=f"{loc}.type")
    name = wire.get("name", "")
    return new_tool_def(
        expect_str(name, f"{loc}.name"),
        wire.get("description"),
        wire.get("input_schema"),
        kind,
        rest(wire, _K_TOOL),
        form
        + (("description",) if "description" in wire else ())
        + (("schema",) if "input_schema" in wire else ()),
        (API, wire),
    )


# --- render --------------------------------------------------------------------------


def render(request: Request) -> dict[str, Any]:
    """Write a :class:`Request` as a Messages API body (converting it if it came from elsewhere)."""
    return render_body(request, API, adapt, _fill)


def _fill(request: Request, body: dict[str, Any]) -> None:
    if request.system or "system" in request.form or "system:str" in request.form:
        body["system"] = _render_system(request)
    body["messages"] = [_render_message(m) for m in request.messages]
    if request.tools or "tools" in request.form:
        body["tools"] = [_render_tool(t) for t in request.tools]


def _render_system(request: Request) -> Any:
    system = request.system
    if "system:str" in request.form and len(system) == 1 and _plain_text(system[0]):
        return system[0].text  # type: ignore[union-attr]
    return [_render_block(p) for p in system]


def _plain_text(part: Part) -> bool:
    return isinstance(part, Text) and not part.extra


def _render_message(message: Message) -> Any:
    wire = reused(message, API)
    if wire is not None:
        return wire
    role = "user" if message.role == "tool" else message.role
    parts = message.parts
    content: Any
    if "content:str" in message.form and len(parts) == 1 and _plain_text(parts[0]):
        content = parts[0].text  # type: ignore[union-attr]
    else:
        content = [_render_block(p) for p in parts]
    return with_extra({"role": role, "content": content}, message.extra)


def _render_block(part: Part) -> Any:
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, Text):
        return with_extra({"type": "text", "text": part.text}, part.extra)
    if isinstance(part, ToolResult):
        return _render_result(part)
    if isinstance(part, ToolCall):
        arguments = part.arguments if isinstance(part.arguments, dict) else _wrap_arguments(part)
        call = {"type": "tool_use", "id": part.id or "", "name": part.name, "input": arguments}
        return with_extra(call, part.extra)
    if isinstance(part, Thinking):
        if part.redacted:
            return with_extra({"type": "redacted_thinking", "data": part.signature or ""}, part.extra)
        out: dict[str, Any] = {"type": "thinking", "thinking": part.text or ""}
        if part.signature is not None or "signature" in part.form:
            out["signature"] = part.signature
        return with_extra(out, part.extra)
    return render_leftover(part, _render_media, _text_block)


def _text_block(text: str) -> Any:
    return {"type": "text", "text": text}


def _wrap_arguments(call: ToolCall) -> dict[str, Any]:
    # Anthropic needs an object; a free-form input (or text that never parsed) is wrapped.
    if call.arguments is not None:
        return {"input": call.arguments}
    return {"input": call.arguments_json or ""}


def _render_media(part: Media) -> Any:
    if "source" in part.form:
        return with_extra({"type": part.kind}, part.extra)
    if part.data is not None:
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type, "data": part.data}
    elif part.url is not None:
        source = {"type": "url", "url": part.url}
    else:
        return {"type": "text", "text": f"[{part.kind} not carried]"}
    kind = part.kind if part.kind in ("image", "document") else "document"
    return with_extra({"type": kind, "source": source}, part.extra)


def _render_result(part: ToolResult) -> Any:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id or ""}
    content = part.content
    if not content and ("content:absent" in part.form or not part.form):
        pass
    elif len(content) == 1 and _plain_text(content[0]) and "content:list" not in part.form:
        # A string unless the wire said list: the plainest form for new results.
        out["content"] = content[0].text  # type: ignore[union-attr]
    else:
        out["content"] = [_render_block(p) for p in content]
    if part.is_error or "is_error" in part.form:
        out["is_error"] = part.is_error
    return with_extra(out, part.extra)


def _render_tool(tool: ToolDef) -> Any:
    wire = reused(tool, API)
    if wire is not None:
        return wire
    out: dict[str, Any] = {}
    if tool.kind != "function":
        out["type"] = tool.kind
    elif "type:custom" in tool.form:
        out["type"] = "custom"
    out["name"] = tool.name
    if tool.description is not None or "description" in tool.form:
        out["description"] = tool.description
    if tool.parameters is not None or "schema" in tool.form or tool.kind == "function":
        out["input_schema"] = tool.parameters if tool.parameters is not None else {"type": "object"}
    return with_extra(out, tool.extra)


# --- converting from another API -----------------------------------------------------


def adapt(request: Request) -> Request:
    """Lay out a request from another API (or a transcript) the way this API wants it."""
    request = neutral(request)
    system = list(request.system)
    messages: list[Message] = []
    leading = True
    for message in fill_call_ids(request.messages):
        if message.role == "system" and leading:
            system.extend(p for p in message.parts if isinstance(p, Text))
            continue
        leading = False
        parts = tuple(_portable(p) for p in message.parts if kept_in(p, "anthropic"))
        if not parts:
            continue
        role: Role = "user" if message.role in ("tool", "system") else message.role
        messages.append(Message(role, parts))
    messages = [results_first(m) for m in merge_runs(messages, lambda m: m.role)]
    messages = safe_ids(messages)
    tools = request.tools or tools_for_calls(messages)
    return Request(API, tuple(messages), tuple(system), tools, request.extra)


def _portable(part: Part) -> Part:
    if isinstance(part, ToolResult):
        content = tuple(p for p in part.content if not isinstance(p, Text) or p.text)
        return replace(part, content=content) if content != part.content else part
    return part
