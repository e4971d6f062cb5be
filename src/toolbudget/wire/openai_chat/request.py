"""OpenAI Chat Completions: ``messages`` with the system prompt inline, ``tool_calls``, ``tools``.

Each result is a ``tool`` message of its own that answers one entry of the
``tool_calls`` list of an assistant message before it, so every wire message
maps onto exactly one canonical message and indexes match ``messages.N``.

The legacy ``function`` role (and an assistant's ``function_call``) is mapped
rather than refused: old clients still send it, and it is the same pairing
with the function's name in place of an id. Its result is a ``ToolResult``
whose ``call_id`` is ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...errors import ShapeError
from ...jsonio import to_body
from ...model import (
    EMPTY,
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
    set_origin,
    text_of,
)
from .._build import new_message, new_request, new_text, new_tool_call, new_tool_def, new_tool_result
from .._common import (
    EntryCache,
    arguments_text,
    data_url_type,
    dumps_text,
    expect_dict,
    expect_list,
    expect_str,
    fill_call_ids,
    merge_runs,
    neutral,
    parse_arguments,
    parse_history,
    parse_tools,
    plain_text,
    read_role,
    render_body,
    render_leftover,
    rest,
    rest_with,
    reused,
    unknown,
    unnest,
    with_extra,
)

__all__ = ["API", "adapt", "parse", "render"]

API = "openai-chat"

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}
PART_TYPES = frozenset({"text", "refusal", "image_url", "input_audio", "file"})

_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
_AUDIO_FORMAT = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}

_K_MESSAGE = frozenset({"role", "content"})
_K_MESSAGE_CALLS = _K_MESSAGE | {"tool_calls"}
_K_RESULT = _K_MESSAGE | {"tool_call_id"}
_K_RESULT_NAMED = _K_RESULT | {"name"}
_K_TEXT = frozenset({"type", "text"})
_K_REFUSAL = frozenset({"type", "refusal"})
_K_IMAGE = frozenset({"type", "image_url"})
_K_AUDIO = frozenset({"type", "input_audio"})
_K_FILE = frozenset({"type", "file"})
_K_URL = frozenset({"url"})
_K_DATA = frozenset({"data"})
_K_FILE_DATA = frozenset({"file_data"})
_K_CALL = frozenset({"id", "type", "function"})
_K_CUSTOM_CALL = frozenset({"id", "type", "custom"})
_K_FUNCTION = frozenset({"name", "arguments"})
_K_CUSTOM = frozenset({"name", "input"})
_K_BODY = frozenset({"messages", "tools"})
_K_TYPE = frozenset({"type"})
_NO_KEYS: frozenset[str] = frozenset()


# --- parse ---------------------------------------------------------------------------


def parse(body: Any, cache: EntryCache | None = None) -> Request:
    """Read a Chat Completions request body into a :class:`Request`."""
    wire = body if type(body) is dict else to_body(body)  # wire.parse has read it already
    messages = parse_history(cache, wire, "messages", _parse_message, "a Chat Completions body")
    tools: tuple[ToolDef, ...] = ()
    form: tuple[str, ...] = ()
    if "tools" in wire:
        tools = parse_tools(cache, wire["tools"], _parse_tool)
        form = ("tools",)
    return new_request(API, messages, (), tools, rest(wire, _K_BODY), form, (API, wire))


def _parse_message(raw: Any, loc: str) -> Message:
    # Locations are spelled out only for an error: a long history's parse is mostly these calls.
    if not isinstance(raw, dict):
        expect_dict(raw, loc)
    wire = raw
    wire_role = wire.get("role")
    role = _ROLES.get(wire_role) if isinstance(wire_role, str) else None
    if role is None:
        role = read_role(wire_role, _ROLES, f"{loc}.role", _ROLES)
    if role == "tool":
        return _parse_result_message(wire, wire_role == "function", loc)
    parts, content_form = _parse_content(wire, loc)
    form: tuple[str, ...] = (content_form, "role:developer") if wire_role == "developer" else (content_form,)
    modelled = _K_MESSAGE
    if role == "assistant":
        calls = wire.get("tool_calls")
        if calls is not None:  # some clients send `null`, which stays in extra as given
            if not isinstance(calls, list):
                expect_list(calls, f"{loc}.tool_calls")
            found = []
            for j, call in enumerate(calls):
                found.append(_parse_call(call, loc, j))
            parts += tuple(found)
            modelled = _K_MESSAGE_CALLS
            form += ("tool_calls",)
        legacy = wire.get("function_call")
        if legacy is not None:
            parts += (_parse_function_call(legacy, f"{loc}.function_call"),)
            modelled |= {"function_call"}
    return new_message(role, parts, rest(wire, modelled), form, (API, wire))


def _parse_content(wire: dict[str, Any], loc: str) -> tuple[tuple[Part, ...], str]:
    """The parts of a message's ``content``, and a hint for how it was spelt (absent, null, string, list)."""
    if "content" not in wire:
        return (), "content:absent"
    content = wire["content"]
    if content is None:
        return (), "content:null"
    if isinstance(content, str):
        return (new_text(content, EMPTY, (), None),), "content:str"
    if not isinstance(content, list):
        expect_list(content, f"{loc}.content")
    parts = []
    for j, item in enumerate(content):
        parts.append(_parse_part(item, loc, j))
    return tuple(parts), "content:list"


def _parse_part(raw: Any, loc: str, j: int) -> Part:
    """Part ``j`` of the content of the message at ``loc``."""
    if not isinstance(raw, dict):
        expect_dict(raw, f"{loc}.content.{j}")
    wire = raw
    kind = wire.get("type")
    if kind == "text":
        text = wire.get("text")
        if not isinstance(text, str):
            expect_str(text, f"{loc}.content.{j}.text")
        return new_text(text, rest(wire, _K_TEXT), (), (API, wire))
    loc = f"{loc}.content.{j}"
    part: Part
    if kind == "refusal":
        part = Text(expect_str(wire.get("refusal"), f"{loc}.refusal"), rest(wire, _K_REFUSAL), ("refusal",))
    elif kind == "image_url":
        inner = expect_dict(wire.get("image_url"), f"{loc}.image_url")
        url = expect_str(inner.get("url"), f"{loc}.image_url.url")
        extra = rest_with(wire, _K_IMAGE, "image_url", inner, _K_URL)
        part = Media("image", data_url_type(url), url=url, extra=extra)
    elif kind == "input_audio":
        inner = expect_dict(wire.get("input_audio"), f"{loc}.input_audio")
        data = expect_str(inner.get("data"), f"{loc}.input_audio.data")
        fmt = inner.get("format")
        # The format stays in extra (it is the wire's spelling); media_type is what other APIs read.
        media_type = _AUDIO_MIME.get(fmt) if isinstance(fmt, str) else None
        extra = rest_with(wire, _K_AUDIO, "input_audio", inner, _K_DATA)
        part = Media("audio", media_type, data, extra=extra, form=("input_audio",))
    elif kind == "file":
        inner = expect_dict(wire.get("file"), f"{loc}.file")
        part = _parse_file(wire, inner)
    else:
        raise unknown("content part type", kind, f"{loc}.type", PART_TYPES)
    return set_origin(part, API, wire)


def _parse_file(wire: dict[str, Any], inner: dict[str, Any]) -> Media:
    file_data = inner.get("file_data")
    if not isinstance(file_data, str):
        # An uploaded file (``file_id``): nothing inline, everything kept as given.
        return Media("document", extra=rest_with(wire, _K_FILE, "file", inner, _NO_KEYS), form=("file",))
    extra = rest_with(wire, _K_FILE, "file", inner, _K_FILE_DATA)
    media_type = data_url_type(file_data)
    if media_type is not None:
        return Media("document", media_type, url=file_data, extra=extra, form=("file",))
    # Bare base64 (the reference allows it): ``data``, with a hint to send it back bare.
    return Media("document", data=file_data, extra=extra, form=("file", "file_data:raw"))


def _parse_call(raw: Any, loc: str, j: int) -> ToolCall:
    """Call ``j`` of the ``tool_calls`` of the message at ``loc``."""
    if not isinstance(raw, dict):
        expect_dict(raw, f"{loc}.tool_calls.{j}")
    wire = raw
    kind = wire.get("type")
    call_id = wire.get("id")
    if not isinstance(call_id, str):
        expect_str(call_id, f"{loc}.tool_calls.{j}.id")
    if kind == "function" or ("type" not in wire and "function" in wire):
        inner = wire.get("function")
        if not isinstance(inner, dict):
            expect_dict(inner, f"{loc}.tool_calls.{j}.function")
        text = inner.get("arguments")
        if not isinstance(text, str):
            expect_str(text, f"{loc}.tool_calls.{j}.function.arguments")
        arguments, ok = parse_arguments(text)
        name = inner.get("name")
        if not isinstance(name, str):
            expect_str(name, f"{loc}.tool_calls.{j}.function.name")
        extra = rest_with(wire, _K_CALL, "function", inner, _K_FUNCTION)
        form: tuple[str, ...] = () if "type" in wire else ("type:absent",)
        return new_tool_call(call_id, name, arguments, text, ok, extra, form, (API, wire))
    loc = f"{loc}.tool_calls.{j}"
    if kind != "custom":
        raise unknown("tool call type", kind, f"{loc}.type", ("function", "custom"))
    inner = expect_dict(wire.get("custom"), f"{loc}.custom")
    call = ToolCall(
        call_id,
        expect_str(inner.get("name"), f"{loc}.custom.name"),
        expect_str(inner.get("input"), f"{loc}.custom.input"),
        extra=rest_with(wire, _K_CUSTOM_CALL, "custom", inner, _K_CUSTOM),
        form=("custom",),
    )
    return set_origin(call, API, wire)


def _parse_function_call(raw: Any, loc: str) -> ToolCall:
    wire = expect_dict(raw, loc)
    text = expect_str(wire.get("arguments"), f"{loc}.arguments")
    arguments, ok = parse_arguments(text)
    name = expect_str(wire.get("name"), f"{loc}.name")
    call = ToolCall(None, name, arguments, text, ok, rest(wire, _K_FUNCTION), ("function_call",))
    return set_origin(call, API, wire)


def _parse_result_message(wire: dict[str, Any], legacy: bool, loc: str) -> Message:
    """A ``tool`` (or legacy ``function``) message. The message is the result: its fields go on the part."""
    parts, content_form = _parse_content(wire, loc)
    name = wire.get("name")
    if not legacy:
        call_id: str | None = wire.get("tool_call_id")
        if not isinstance(call_id, str):
            expect_str(call_id, f"{loc}.tool_call_id")
        message_form: tuple[str, ...] = ()
    else:
        call_id = None
        name = expect_str(name, f"{loc}.name")
        message_form = ("role:function",)
    if isinstance(name, str):
        modelled = _K_RESULT_NAMED
        form: tuple[str, ...] = (content_form, "name")
    else:
        modelled, form, name = _K_RESULT, (content_form,), None
    origin = (API, wire)
    result = new_tool_result(call_id, parts, False, name, rest(wire, modelled), form, origin)
    return new_message("tool", (result,), EMPTY, message_form, origin)


def _parse_tool(raw: Any, loc: str) -> ToolDef:
    wire = expect_dict(raw, loc)
    kind = wire.get("type")
    if not isinstance(kind, str):
        raise ShapeError("a tool's `type` must be a string", location=f"{loc}.type")
    if kind in ("function", "custom"):
        inner = expect_dict(wire.get(kind), f"{loc}.{kind}")
        modelled = {"name"}
        form: tuple[str, ...] = ("type:custom",) if kind == "custom" else ()
        if "description" in inner:
            modelled.add("description")
            form += ("description",)
        if kind == "function" and "parameters" in inner:
            modelled.add("parameters")
            form += ("parameters",)
        return new_tool_def(
            expect_str(inner.get("name"), f"{loc}.{kind}.name"),
            inner.get("description"),
            inner.get("parameters") if kind == "function" else None,
            "function",
            rest_with(wire, frozenset({"type", kind}), kind, inner, frozenset(modelled)),
            form,
            (API, wire),
        )
    name = wire.get("name")
    name = name if isinstance(name, str) else kind
    return new_tool_def(name, None, None, kind, rest(wire, _K_TYPE), (), (API, wire))


# --- render --------------------------------------------------------------------------


def render(request: Request) -> dict[str, Any]:
    """Write a :class:`Request` as a Chat Completions body (converting it if it came from elsewhere)."""
    return render_body(request, API, adapt, _fill)


def _fill(request: Request, body: dict[str, Any]) -> None:
    messages = [_render_message(m) for m in request.messages]
    if request.system:
        # This API has no top-level system prompt; a transform that set one gets a first message.
        messages.insert(0, _render_message(Message("system", request.system)))
    body["messages"] = messages
    if request.tools or "tools" in request.form:
        body["tools"] = [_render_tool(t) for t in request.tools]


def _render_message(message: Message) -> Any:
    wire = reused(message, API)
    if wire is not None:
        return wire
    if message.role == "tool":
        return _render_result_message(message)
    form = message.form
    role = message.role
    if role == "system" and "role:developer" in form:
        out: dict[str, Any] = {"role": "developer"}
    else:
        out = {"role": role}
    calls = [p for p in message.parts if isinstance(p, ToolCall)]
    content = [p for p in message.parts if not isinstance(p, (ToolCall, Thinking))]
    _put_content(out, content, form, none_when_empty=role == "assistant")
    legacy = next((c for c in calls if c.id is None and "function_call" in c.form), None)
    if legacy is not None:
        calls = [c for c in calls if c is not legacy]
        out["function_call"] = _render_function_call(legacy)
    if calls or "tool_calls" in form:
        out["tool_calls"] = [_render_call(c) for c in calls]
    return with_extra(out, message.extra)


def _put_content(
    out: dict[str, Any], parts: Sequence[Part], form: tuple[str, ...], *, none_when_empty: bool
) -> None:
    """Set ``content`` in the spelling the hints ask for, while they still describe the parts."""
    if not parts:
        if "content:absent" in form:
            return
        if "content:null" in form:
            out["content"] = None
        elif "content:list" in form:
            out["content"] = []
        else:
            out["content"] = None if none_when_empty else ""
        return
    if "content:list" not in form and len(parts) == 1 and plain_text(parts[0]):
        out["content"] = parts[0].text  # type: ignore[union-attr]
    else:
        out["content"] = [_render_part(p) for p in parts]


def _render_part(part: Part) -> Any:
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, Text):
        if "refusal" in part.form:
            return with_extra({"type": "refusal", "refusal": part.text}, part.extra)
        return with_extra({"type": "text", "text": part.text}, part.extra)
    return render_leftover(part, _render_media, _text_block)


def _text_block(text: str) -> Any:
    return {"type": "text", "text": text}


def _render_media(part: Media) -> Any:
    extra = part.extra
    url = part.url
    if url is None and part.data is not None and part.kind != "audio":
        url = f"data:{part.media_type or 'application/octet-stream'};base64,{part.data}"
    if part.kind == "image" and url is not None:
        return with_extra({"type": "image_url", "image_url": unnest(extra, "image_url", {"url": url})}, extra)
    if part.kind == "audio" and part.data is not None:
        audio = unnest(extra, "input_audio", {"data": part.data})
        if "format" not in audio and "input_audio" not in part.form:
            audio["format"] = _AUDIO_FORMAT.get(part.media_type or "", "wav")
        return with_extra({"type": "input_audio", "input_audio": audio}, extra)
    if part.kind == "document" and (url is not None or "file" in part.form):
        if "file_data:raw" in part.form and part.url is None and part.data is not None:
            inner: dict[str, Any] = {"file_data": part.data}
        else:
            inner = {} if url is None else {"file_data": url}
        if "file" not in part.form:
            inner["filename"] = "document"  # the API wants a name with inline file data
        return with_extra({"type": "file", "file": unnest(extra, "file", inner)}, extra)
    return {"type": "text", "text": f"[{part.kind} not carried]"}


def _render_call(call: ToolCall) -> Any:
    wire = reused(call, API)
    if wire is not None:
        return wire
    if "custom" in call.form:
        text = call.arguments if isinstance(call.arguments, str) else arguments_text(call)
        inner = unnest(call.extra, "custom", {"name": call.name, "input": text})
        return with_extra({"id": call.id or "", "type": "custom", "custom": inner}, call.extra)
    out: dict[str, Any] = {"id": call.id or ""}
    if "type:absent" not in call.form:
        out["type"] = "function"
    out["function"] = unnest(call.extra, "function", {"name": call.name, "arguments": arguments_text(call)})
    return with_extra(out, call.extra)


def _render_function_call(call: ToolCall) -> Any:
    wire = reused(call, API)
    if wire is not None:
        return wire
    return with_extra({"name": call.name, "arguments": arguments_text(call)}, call.extra)


def _render_result_message(message: Message) -> Any:
    results = [p for p in message.parts if isinstance(p, ToolResult)]
    if not results:
        return _render_message(Message("user", message.parts))
    result = results[0]
    wire = reused(result, API)
    if wire is not None and len(message.parts) == 1:
        return wire
    # Anything else in the message travels as text after the result's own content.
    content = list(result.content) + [p for p in message.parts if p is not result]
    legacy = result.call_id is None and "role:function" in message.form
    out: dict[str, Any] = {"role": "function" if legacy else "tool"}
    if not legacy:
        out["tool_call_id"] = result.call_id or ""
    # A tool message's `name` is a legacy field: written back only where it was given.
    if legacy or (result.name is not None and "name" in result.form):
        out["name"] = result.name or ""
    _put_content(out, [_result_text(p) for p in content], result.form, none_when_empty=False)
    return with_extra(out, result.extra)


def _result_text(part: Part) -> Part:
    # A tool message carries text only (a string or text parts).
    if isinstance(part, Text):
        return part
    if isinstance(part, Data):
        return Text(dumps_text(part.value))
    if isinstance(part, Media):
        return Text(f"[{part.kind} not carried]")
    if isinstance(part, ToolResult):
        return Text(text_of(part.content))
    if isinstance(part, Opaque):
        return Text(dumps_text(part.value))
    return Text(text_of((part,)))


def _render_tool(tool: ToolDef) -> Any:
    wire = reused(tool, API)
    if wire is not None:
        return wire
    if tool.kind != "function":
        return with_extra({"type": tool.kind}, tool.extra)
    kind = "custom" if "type:custom" in tool.form else "function"
    inner: dict[str, Any] = {"name": tool.name}
    if tool.description is not None or "description" in tool.form:
        inner["description"] = tool.description
    if kind == "function" and (tool.parameters is not None or "parameters" in tool.form):
        inner["parameters"] = tool.parameters
    return with_extra({"type": kind, kind: unnest(tool.extra, kind, inner)}, tool.extra)


# --- converting from another API -----------------------------------------------------


def adapt(request: Request) -> Request:
    """Lay out a request from another API (or a transcript) the way this API wants it.

    Results leave the user messages they share with other content (Anthropic,
    Bedrock) and become ``tool`` messages of their own, placed first so they
    follow their calls straight away; neighbouring assistant messages merge,
    so parallel calls share one ``tool_calls`` list. Reasoning has no place
    in this API's requests and is dropped; calls without ids (Gemini) get
    stable ones.
    """
    request = neutral(request)
    messages: list[Message] = []
    system = tuple(p for p in request.system if isinstance(p, Text))
    if system:
        messages.append(Message("system", system))
    for message in fill_call_ids(request.messages):
        others: list[Part] = []
        for part in message.parts:
            if isinstance(part, ToolResult):
                messages.append(Message("tool", (part,)))
            elif not isinstance(part, Thinking):
                others.append(part)
        if others:
            role: Role = "user" if message.role == "tool" else message.role
            messages.append(Message(role, tuple(others)))
    # Responses items give each call a message: parallel calls must share one assistant message.
    messages = merge_runs(messages, lambda m: "assistant" if m.role == "assistant" else None)
    return Request(API, tuple(messages), (), request.tools, request.extra)
