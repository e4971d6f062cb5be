"""OpenAI Responses API: ``instructions``, ``input`` (a string or a list of items), ``tools``.

Every input item becomes exactly one canonical message, so a canonical index
is the ``input.N`` the API names in its errors: a ``function_call`` item is an
assistant message holding one ``ToolCall``, a ``function_call_output`` a
``tool`` message holding one ``ToolResult``, a ``reasoning`` item an assistant
message holding one ``Thinking``. The item *is* its part, so the item's own
fields (``id``, ``status``...) live in the part's ``extra``.

Items for hosted and built-in tools (web search, computer use, shells, MCP,
compaction...) are carried as :class:`~toolbudget.model.Opaque`, in a message
whose role says who produced them. ``previous_response_id`` stays in
``Request.extra``: a call whose output is missing may be answered on the
server side through it.
"""

from __future__ import annotations

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
from .._build import (
    new_message,
    new_opaque,
    new_request,
    new_text,
    new_tool_call,
    new_tool_def,
    new_tool_result,
)
from .._common import (
    EntryCache,
    arguments_text,
    data_url_type,
    dumps_text,
    expect_dict,
    expect_list,
    expect_str,
    fill_call_ids,
    neutral,
    parse_arguments,
    parse_entries,
    parse_tools,
    plain_text,
    read_role,
    render_body,
    render_leftover,
    rest,
    reused,
    unknown,
    with_extra,
)

__all__ = ["API", "adapt", "parse", "render"]

API = "openai-responses"

_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}

# Items we carry without modelling, by the canonical role of whoever produced them.
_OPAQUE_ROLES: dict[str, Role] = {
    **dict.fromkeys(
        (
            "file_search_call",
            "web_search_call",
            "computer_call",
            "code_interpreter_call",
            "image_generation_call",
            "local_shell_call",
            "shell_call",
            "apply_patch_call",
            "tool_search_call",
            "mcp_list_tools",
            "mcp_approval_request",
            "mcp_call",
            "compaction",
            "program",
            "item_reference",
        ),
        "assistant",
    ),
    **dict.fromkeys(
        (
            "computer_call_output",
            "local_shell_call_output",
            "shell_call_output",
            "apply_patch_call_output",
            "tool_search_output",
            "mcp_approval_response",
            "program_output",
        ),
        "tool",
    ),
    **dict.fromkeys(("additional_tools", "configuration_update", "compaction_trigger"), "system"),
}
_MODELLED_ITEMS = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
    }
)
ITEM_TYPES = _MODELLED_ITEMS | frozenset(_OPAQUE_ROLES)
PART_TYPES = frozenset({"input_text", "output_text", "refusal", "input_image", "input_file"})

_K_BODY = frozenset({"input", "instructions", "tools"})
_K_MESSAGE = frozenset({"type", "role", "content"})
_K_TEXT = frozenset({"type", "text"})
_K_REFUSAL = frozenset({"type", "refusal"})
_K_IMAGE = frozenset({"type", "image_url"})
_K_FILE_DATA = frozenset({"type", "file_data"})
_K_FILE_URL = frozenset({"type", "file_url"})
_K_TYPE = frozenset({"type"})
_K_CALL = frozenset({"type", "call_id", "name", "arguments"})
_K_CUSTOM_CALL = frozenset({"type", "call_id", "name", "input"})
_K_OUTPUT = frozenset({"type", "call_id", "output"})
_K_OUTPUT_NAMED = _K_OUTPUT | {"name"}
_TEXT_FORMS = {"input_text": ("input_text",), "output_text": ("output_text",)}
_K_REASONING = frozenset({"type", "encrypted_content"})
_SUMMARY_SEP = "\n\n"
# Fields that hold the conversation on the server, so `input` may be left out.
_SERVER_STATE = ("previous_response_id", "conversation", "prompt")
# The history fields of the other APIs, which a Responses body never has.
_OTHER_HISTORIES = ("messages", "contents")


# --- parse ---------------------------------------------------------------------------


def parse(body: Any, cache: EntryCache | None = None) -> Request:
    """Read a Responses API request body into a :class:`Request`."""
    wire = body if type(body) is dict else to_body(body)  # wire.parse has read it already
    form: list[str] = []
    messages: tuple[Message, ...] = ()
    if "input" not in wire:
        _expect_server_state(wire)
        form.append("input:absent")
    elif isinstance(wire["input"], str):
        messages = (Message("user", (Text(wire["input"]),)),)
        form.append("input:str")
    else:
        messages = parse_entries(cache, expect_list(wire["input"], "input"), "input", _parse_item)
    system: tuple[Part, ...] = ()
    if "instructions" in wire:
        instructions = wire["instructions"]
        if instructions is None:
            form.append("instructions:null")
        else:
            system = (Text(expect_str(instructions, "instructions")),)
            form.append("instructions")
    tools: tuple[ToolDef, ...] = ()
    if "tools" in wire:
        tools = parse_tools(cache, wire["tools"], _parse_tool)
        form.append("tools")
    return new_request(API, messages, system, tools, rest(wire, _K_BODY), tuple(form), (API, wire))


def _expect_server_state(wire: dict[str, Any]) -> None:
    """Accept a body without ``input`` only when its conversation lives on the server.

    Without this, another API's body (``messages``, ``contents``) read as a
    Responses body with nothing in it, so it always validated.
    """
    other = next((key for key in _OTHER_HISTORIES if key in wire), None)
    if other is not None:
        raise ShapeError(f"not an OpenAI Responses body: it has `{other}` but no `input`")
    if not any(key in wire for key in _SERVER_STATE):
        raise ShapeError(
            "an OpenAI Responses body needs `input`, or `previous_response_id`, `conversation` or "
            "`prompt` for a conversation held on the server"
        )


def _parse_item(raw: Any, loc: str) -> Message:
    # Locations are spelled out only for an error: a long history's parse is mostly these calls.
    if not isinstance(raw, dict):
        expect_dict(raw, loc)
    wire = raw
    kind = wire.get("type")
    if "type" not in wire:
        # Both easy input messages and item references may leave out their `type`.
        if "role" in wire:
            return _parse_message(wire, loc)
        if "id" in wire:
            kind = "item_reference"
    if kind == "message":
        return _parse_message(wire, loc)
    origin = (API, wire)  # the item is its part: the message and the part both came from it
    part: Part
    if kind in ("function_call", "custom_tool_call"):
        return new_message("assistant", (_parse_call(kind, wire, loc),), EMPTY, (), origin)
    if kind in ("function_call_output", "custom_tool_call_output"):
        return new_message("tool", (_parse_output(kind, wire, loc),), EMPTY, (), origin)
    if kind == "reasoning":
        part = _parse_reasoning(wire, loc)
        return new_message("assistant", (part,), EMPTY, (), origin)
    if isinstance(kind, str) and kind in _OPAQUE_ROLES:
        part = new_opaque(kind, wire, EMPTY, (), origin)
        return new_message(_OPAQUE_ROLES[kind], (part,), EMPTY, (), origin)
    raise unknown("item type", kind, f"{loc}.type", ITEM_TYPES)


def _parse_message(wire: dict[str, Any], loc: str) -> Message:
    wire_role = wire.get("role")
    role = _ROLES.get(wire_role) if isinstance(wire_role, str) else None
    if role is None:
        role = read_role(wire_role, _ROLES, f"{loc}.role", _ROLES)
    form: tuple[str, ...] = () if "type" in wire else ("type:absent",)
    if wire_role == "developer":
        form += ("role:developer",)
    content: Any = wire.get("content")
    if isinstance(content, str):
        parts: tuple[Part, ...] = (new_text(content, EMPTY, (), None),)
        form += ("content:str",)
    else:
        if not isinstance(content, list):
            expect_list(content, f"{loc}.content")
        found = []
        for j, item in enumerate(content):
            found.append(_parse_part(item, loc, ".content.", j))
        parts = tuple(found)
    return new_message(role, parts, rest(wire, _K_MESSAGE), form, (API, wire))


def _parse_part(raw: Any, loc: str, within: str, j: int) -> Part:
    """Part ``j`` of a list at ``loc + within``, the content of a message or the output of a result."""
    if not isinstance(raw, dict):
        expect_dict(raw, f"{loc}{within}{j}")
    wire = raw
    kind = wire.get("type")
    if kind in ("input_text", "output_text"):
        text = wire.get("text")
        if not isinstance(text, str):
            expect_str(text, f"{loc}{within}{j}.text")
        return new_text(text, rest(wire, _K_TEXT), _TEXT_FORMS[kind], (API, wire))
    loc = f"{loc}{within}{j}"
    part: Part
    if kind == "refusal":
        part = Text(expect_str(wire.get("refusal"), f"{loc}.refusal"), rest(wire, _K_REFUSAL), ("refusal",))
    elif kind == "input_image":
        url = wire.get("image_url")
        if isinstance(url, str):
            part = Media(
                "image", data_url_type(url), url=url, extra=rest(wire, _K_IMAGE), form=("image_url",)
            )
        else:  # an uploaded file (`file_id`), kept as given
            part = Media("image", extra=rest(wire, _K_TYPE), form=("input_image",))
    elif kind == "input_file":
        part = _parse_file(wire)
    else:
        raise unknown("content part type", kind, f"{loc}.type", PART_TYPES)
    return set_origin(part, API, wire)


def _parse_file(wire: dict[str, Any]) -> Media:
    file_data = wire.get("file_data")
    if isinstance(file_data, str):
        media_type = data_url_type(file_data)
        if media_type is not None:
            return Media(
                "document", media_type, url=file_data, extra=rest(wire, _K_FILE_DATA), form=("file_data",)
            )
        return Media("document", data=file_data, extra=rest(wire, _K_FILE_DATA), form=("file_data",))
    file_url = wire.get("file_url")
    if isinstance(file_url, str):
        return Media("document", url=file_url, extra=rest(wire, _K_FILE_URL), form=("file_url",))
    return Media("document", extra=rest(wire, _K_TYPE), form=("input_file",))


def _parse_call(kind: str, wire: dict[str, Any], loc: str) -> ToolCall:
    call_id: Any = wire.get("call_id")
    if not isinstance(call_id, str):
        expect_str(call_id, f"{loc}.call_id")
    name: Any = wire.get("name")
    if not isinstance(name, str):
        expect_str(name, f"{loc}.name")
    if kind == "custom_tool_call":
        value = expect_str(wire.get("input"), f"{loc}.input")
        extra = rest(wire, _K_CUSTOM_CALL)
        return new_tool_call(call_id, name, value, None, True, extra, ("custom",), (API, wire))
    text: Any = wire.get("arguments")
    if not isinstance(text, str):
        expect_str(text, f"{loc}.arguments")
    arguments, ok = parse_arguments(text)
    return new_tool_call(call_id, name, arguments, text, ok, rest(wire, _K_CALL), (), (API, wire))


def _parse_output(kind: str, wire: dict[str, Any], loc: str) -> ToolResult:
    call_id: Any = wire.get("call_id")
    if not isinstance(call_id, str):
        expect_str(call_id, f"{loc}.call_id")
    output: Any = wire.get("output")
    form: tuple[str, ...] = ("custom",) if kind == "custom_tool_call_output" else ()
    if isinstance(output, str):
        parts: tuple[Part, ...] = (new_text(output, EMPTY, (), None),)
        form += ("output:str",)
    else:
        if not isinstance(output, list):
            expect_list(output, f"{loc}.output")
        found = []
        for j, item in enumerate(output):
            found.append(_parse_part(item, loc, ".output.", j))
        parts = tuple(found)
        form += ("output:list",)
    name = wire.get("name")
    if isinstance(name, str):
        # Not a documented field; some clients write it, so it goes back only where it came.
        form += ("name",)
        return new_tool_result(call_id, parts, False, name, rest(wire, _K_OUTPUT_NAMED), form, (API, wire))
    return new_tool_result(call_id, parts, False, None, rest(wire, _K_OUTPUT), form, (API, wire))


def _parse_reasoning(wire: dict[str, Any], loc: str) -> Thinking:
    """A reasoning item: its summary read as text, its encrypted content as the signature.

    The summary list itself stays in ``extra`` (with ``id``, ``status`` and any
    ``content``), so it goes back split exactly as it came while the text
    still matches it.
    """
    summary = expect_list(wire.get("summary"), f"{loc}.summary")
    texts = [
        expect_str(expect_dict(s, f"{loc}.summary.{j}").get("text"), f"{loc}.summary.{j}.text")
        for j, s in enumerate(summary)
    ]
    signature = wire.get("encrypted_content")
    if signature is not None:
        expect_str(signature, f"{loc}.encrypted_content")
    thinking = Thinking(
        _SUMMARY_SEP.join(texts) if texts else None,
        signature,
        redacted=not texts,
        extra=rest(wire, _K_REASONING),
        form=("encrypted_content",) if "encrypted_content" in wire else (),
    )
    return set_origin(thinking, API, wire)


def _parse_tool(raw: Any, loc: str) -> ToolDef:
    wire = expect_dict(raw, loc)
    kind = wire.get("type")
    if not isinstance(kind, str):
        raise ShapeError("a tool's `type` must be a string", location=f"{loc}.type")
    if kind in ("function", "custom"):
        modelled = {"type", "name"}
        form: tuple[str, ...] = ("type:custom",) if kind == "custom" else ()
        if "description" in wire:
            modelled.add("description")
            form += ("description",)
        if kind == "function":
            # Always a hint here: a tool without one is a converted tool, which gets defaults.
            if "parameters" in wire:
                modelled.add("parameters")
                form += ("parameters",)
            else:
                form += ("parameters:absent",)
        return new_tool_def(
            expect_str(wire.get("name"), f"{loc}.name"),
            wire.get("description"),
            wire.get("parameters") if kind == "function" else None,
            "function",
            rest(wire, frozenset(modelled)),
            form,
            (API, wire),
        )
    # Built-in tools (web_search, file_search, mcp, namespace...) are carried whole.
    name = wire.get("name")
    return new_tool_def(
        name if isinstance(name, str) else kind, None, None, kind, rest(wire, _K_TYPE), (), (API, wire)
    )


# --- render --------------------------------------------------------------------------


def render(request: Request) -> dict[str, Any]:
    """Write a :class:`Request` as a Responses API body (converting it if it came from elsewhere)."""
    return render_body(request, API, adapt, _fill)


def _fill(request: Request, body: dict[str, Any]) -> None:
    form = request.form
    if request.system:
        body["instructions"] = text_of(request.system)
    elif "instructions:null" in form:
        body["instructions"] = None
    messages = request.messages
    if "input:str" in form and len(messages) == 1 and _plain_message(messages[0]):
        body["input"] = messages[0].parts[0].text  # type: ignore[union-attr]
    elif messages or "input:absent" not in form:
        body["input"] = [_render_item(m) for m in messages]
    if request.tools or "tools" in form:
        body["tools"] = [_render_tool(t) for t in request.tools]


def _plain_message(message: Message) -> bool:
    parts = message.parts
    return (
        message.role == "user"
        and not message.extra
        and not message.form
        and len(parts) == 1
        and isinstance(parts[0], Text)
        and not parts[0].extra
        and not parts[0].form
    )


def _render_item(message: Message) -> Any:
    wire = reused(message, API)
    if wire is not None:
        return wire
    parts = message.parts
    if len(parts) == 1 and not isinstance(parts[0], (Text, Media, Data)):
        return _render_part_item(parts[0])
    out: dict[str, Any] = {} if "type:absent" in message.form else {"type": "message"}
    role = message.role
    if role == "system":
        out["role"] = "developer" if "role:developer" in message.form else "system"
    else:
        out["role"] = "user" if role == "tool" else role
    if "content:str" in message.form and len(parts) == 1 and plain_text(parts[0]):
        out["content"] = parts[0].text  # type: ignore[union-attr]
    else:
        out["content"] = [_render_part(p, role) for p in parts]
    return with_extra(out, message.extra)


def _render_part_item(part: Part) -> Any:
    """A message holding one call, result, reasoning or opaque item is that item."""
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, ToolCall):
        if "custom" in part.form:
            text = part.arguments if isinstance(part.arguments, str) else arguments_text(part)
            out = {"type": "custom_tool_call", "call_id": part.id or "", "name": part.name, "input": text}
        else:
            arguments = arguments_text(part)
            out = {
                "type": "function_call",
                "call_id": part.id or "",
                "name": part.name,
                "arguments": arguments,
            }
        return with_extra(out, part.extra)
    if isinstance(part, ToolResult):
        return _render_output(part)
    if isinstance(part, Thinking):
        return _render_reasoning(part)
    if isinstance(part, Opaque):
        return part.value
    raise AssertionError(part)


def _render_output(part: ToolResult) -> Any:
    kind = "custom_tool_call_output" if "custom" in part.form else "function_call_output"
    out: dict[str, Any] = {"type": kind, "call_id": part.call_id or ""}
    content = part.content
    if "output:list" not in part.form and all(plain_text(p) or isinstance(p, Data) for p in content):
        out["output"] = text_of(_as_text(p) for p in content)
    else:
        out["output"] = [_render_part(p, "user") for p in content]
    if part.name is not None and "name" in part.form:
        # The API refuses unknown fields on input items: a name from elsewhere stays in the model only.
        out["name"] = part.name
    return with_extra(out, part.extra)


def _as_text(part: Part) -> Part:
    return Text(dumps_text(part.value)) if isinstance(part, Data) else part


def _render_reasoning(part: Thinking) -> Any:
    out: dict[str, Any] = {"type": "reasoning"}
    summary = part.extra.get("summary")
    if not _summary_matches(summary, part.text):
        summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    out["summary"] = summary
    if part.signature is not None or "encrypted_content" in part.form:
        out["encrypted_content"] = part.signature
    return with_extra(out, part.extra)


def _summary_matches(summary: Any, text: str | None) -> bool:
    """Whether the kept summary list still reads as ``text`` (a transform may have changed it)."""
    if not isinstance(summary, list):
        return False
    texts: list[str] = []
    for item in summary:
        value = item.get("text") if isinstance(item, dict) else None
        if not isinstance(value, str):
            return False
        texts.append(value)
    return (_SUMMARY_SEP.join(texts) if texts else None) == text


def _render_part(part: Part, role: Role) -> Any:
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, Text):
        if "refusal" in part.form:
            return with_extra({"type": "refusal", "refusal": part.text}, part.extra)
        if "input_text" in part.form or "output_text" in part.form:
            kind = "output_text" if "output_text" in part.form else "input_text"
            return with_extra({"type": kind, "text": part.text}, part.extra)
        if role == "assistant":
            # An output_text part must say its annotations, even when there are none.
            return with_extra({"type": "output_text", "text": part.text, "annotations": []}, part.extra)
        return with_extra({"type": "input_text", "text": part.text}, part.extra)
    return render_leftover(part, _render_media, _input_text)


def _input_text(text: str) -> Any:
    return {"type": "input_text", "text": text}


def _render_media(part: Media) -> Any:
    form = part.form
    if "input_image" in form or "input_file" in form:
        return with_extra({"type": form[0]}, part.extra)
    if "image_url" in form and part.url is not None:
        return with_extra({"type": "input_image", "image_url": part.url}, part.extra)
    if "file_data" in form and (part.url or part.data) is not None:
        return with_extra({"type": "input_file", "file_data": part.url or part.data}, part.extra)
    if "file_url" in form and part.url is not None:
        return with_extra({"type": "input_file", "file_url": part.url}, part.extra)
    url = part.url
    if url is None and part.data is not None:
        url = f"data:{part.media_type or 'application/octet-stream'};base64,{part.data}"
    if part.kind == "image" and url is not None:
        out: dict[str, Any] = {"type": "input_image", "image_url": url}
        if "detail" not in part.extra:
            out["detail"] = "auto"
        return with_extra(out, part.extra)
    if part.kind == "document" and url is not None:
        if url.startswith("data:"):
            return with_extra({"type": "input_file", "filename": "document", "file_data": url}, part.extra)
        return with_extra({"type": "input_file", "file_url": url}, part.extra)
    return {"type": "input_text", "text": f"[{part.kind} not carried]"}


def _render_tool(tool: ToolDef) -> Any:
    wire = reused(tool, API)
    if wire is not None:
        return wire
    if tool.kind != "function":
        return with_extra({"type": tool.kind}, tool.extra)
    out: dict[str, Any] = {"type": "custom" if "type:custom" in tool.form else "function", "name": tool.name}
    if tool.description is not None or "description" in tool.form:
        out["description"] = tool.description
    if "type:custom" not in tool.form:
        if tool.parameters is not None or "parameters" in tool.form:
            out["parameters"] = tool.parameters
        elif not tool.form:
            out["parameters"] = {"type": "object", "properties": {}}
        if not tool.form and "strict" not in tool.extra:
            # Schemas written for other APIs are rarely strict-mode schemas.
            out["strict"] = False
    return with_extra(out, tool.extra)


# --- converting from another API -----------------------------------------------------


def adapt(request: Request) -> Request:
    """Lay out a request from another API (or a transcript) the way this API wants it.

    Each call and each result becomes an item of its own; results that shared a
    user message with other content (Anthropic, Bedrock) come first, so they
    follow their calls. The top-level system prompt becomes ``instructions``.
    Reasoning from elsewhere is dropped: a reasoning item must carry the id
    of the response that produced it, which no other API keeps.
    """
    request = neutral(request)
    messages: list[Message] = []
    for message in fill_call_ids(request.messages):
        run: list[Part] = []
        role: Role = "user" if message.role == "tool" else message.role
        results = [p for p in message.parts if isinstance(p, ToolResult)]
        messages.extend(Message("tool", (p,)) for p in results)
        for part in message.parts:
            if isinstance(part, (Text, Media, Data)):
                run.append(part)
                continue
            if run:
                messages.append(Message(role, tuple(run)))
                run = []
            if isinstance(part, ToolCall):
                messages.append(Message("assistant", (part,)))
        if run:
            messages.append(Message(role, tuple(run)))
    system = tuple(p for p in request.system if isinstance(p, Text))
    return Request(API, tuple(messages), system, request.tools, request.extra)
