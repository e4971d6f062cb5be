"""Gemini ``generateContent``: ``contents`` of parts, ``systemInstruction``, ``tools``.

A model turn's ``functionCall`` parts are answered by ``functionResponse``
parts in the next turn (role ``user``; some SDKs write ``function`` or
``tool``), matched by ``id`` where there is one and otherwise by name and
order. Ids are optional, so calls and results here may have ``None`` ids.

The REST API accepts both camelCase and snake_case field names. Both are
read, and every object goes back in the spelling it came in (a ``snake``
form hint); converted requests are written in camelCase.

``thoughtSignature`` may sit on any part and must go back unchanged; it is
carried in the part's ``extra`` like every other part-level field we do not
model (``partMetadata``, ``videoMetadata``...), in its own spelling.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

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
    frozen_mapping,
    set_origin,
    text_of,
)
from .._build import (
    new_data,
    new_message,
    new_request,
    new_text,
    new_thinking,
    new_tool_call,
    new_tool_def,
    new_tool_result,
)
from .._common import (
    EntryCache,
    cached,
    dumps_text,
    expect_dict,
    expect_list,
    expect_str,
    merge_runs,
    neutral,
    parse_history,
    plain_text,
    read_role,
    render_body,
    render_leftover,
    rest,
    rest_with,
    results_first,
    reused,
    split_data_url,
    unknown,
    unnest,
    with_extra,
)

__all__ = ["API", "SIGNATURE_KEYS", "SKIP_SIGNATURE", "adapt", "parse", "render"]

API = "gemini"

SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The documented stand-in signature for calls from histories built elsewhere."""

_ROLES: dict[str, Role] = {"user": "user", "model": "assistant", "function": "tool", "tool": "tool"}
# A `system` content is read (not refused) so that validation can report it the way the API
# does and repair can move it into `systemInstruction`; it is not a role the API takes.
_READ_ROLES: dict[str, Role] = {**_ROLES, "system": "system"}
_TOOL_ROLE_FORMS = {"function": ("role:function",), "tool": ("role:tool",)}
"""The hint of each wire role read as ``tool``."""

# A part's data field, in either spelling -> (camelCase name, spelt in snake_case?).
_DATA_FIELDS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
)


def snake_case(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


_SPELLINGS: dict[str, tuple[str, bool]] = {
    **{name: (name, False) for name in _DATA_FIELDS},
    **{snake_case(name): (name, True) for name in _DATA_FIELDS if snake_case(name) != name},
}
_ONLY = {key: frozenset({key}) for key in _SPELLINGS}
"""Each data field's spelling as the one modelled field of its part."""
_OPAQUE_FIELDS = frozenset({"executableCode", "codeExecutionResult", "toolCall", "toolResponse"})

_K_CONTENT = frozenset({"role", "parts"})
_K_PARTS = frozenset({"parts"})
_K_TEXT = frozenset({"text"})
_K_THOUGHT = frozenset({"text", "thought"})
_K_CALL = frozenset({"name", "args", "id"})
_K_CALL_NO_ID = frozenset({"name", "args"})
_K_RESPONSE = frozenset({"name", "response", "id"})
_K_RESPONSE_NO_ID = frozenset({"name", "response"})
_K_DECL = frozenset({"name", "description"})
_SCHEMA_KEYS = ("parameters", "parametersJsonSchema", "parameters_json_schema")
SIGNATURE_KEYS = ("thoughtSignature", "thought_signature")
"""The two spellings of a part's ``thoughtSignature``."""
# Portable request fields: sampling goes in generationConfig; the model and streaming are in the URL.
_SAMPLING = {"temperature": "temperature", "top_p": "topP"}
_URL_FIELDS = ("model", "stream")


def _spell(camel: str, snake: bool) -> str:
    return snake_case(camel) if snake else camel


# --- parse ---------------------------------------------------------------------------


def parse(body: Any, cache: EntryCache | None = None) -> Request:
    """Read a ``generateContent`` request body into a :class:`Request`."""
    wire = body if type(body) is dict else to_body(body)  # wire.parse has read it already
    messages = parse_history(cache, wire, "contents", _parse_content, "a Gemini generateContent body")
    modelled = {"contents"}
    form: list[str] = []
    system: tuple[Part, ...] = ()
    nested: tuple[str, dict[str, Any]] | None = None
    key = "systemInstruction" if "systemInstruction" in wire else "system_instruction"
    if key in wire:
        modelled.add(key)
        form.append("system:snake" if key == "system_instruction" else "system")
        raw = wire[key]
        if isinstance(raw, str):  # the JS SDKs accept a bare string
            system = (Text(raw),)
            form.append("system:str")
        else:
            content = expect_dict(raw, key)
            parts = expect_list(content.get("parts"), f"{key}.parts")
            system = tuple([_parse_part(p, key, j) for j, p in enumerate(parts)])
            nested = (key, content)
    tools: tuple[ToolDef, ...] = ()
    if "tools" in wire:
        modelled.add("tools")
        form.append("tools")
        tools = cached(
            cache, b"tools", wire["tools"], lambda: _parse_tools(expect_list(wire["tools"], "tools"))
        )
    if nested is not None:
        extra = rest_with(wire, frozenset(modelled), nested[0], nested[1], _K_PARTS)
    else:
        extra = rest(wire, frozenset(modelled))
    return new_request(API, messages, system, tools, extra, tuple(form), (API, wire))


def _parse_content(raw: Any, loc: str) -> Message:
    # Locations are spelled out only for an error: a long history's parse is mostly these calls.
    if not isinstance(raw, dict):
        expect_dict(raw, loc)
    wire = raw
    form: tuple[str, ...] = ()
    if "role" in wire:
        wire_role = wire["role"]
        role = _READ_ROLES.get(wire_role) if isinstance(wire_role, str) else None
        if role is None:
            role = read_role(wire_role, _READ_ROLES, f"{loc}.role", _ROLES)
        if role == "tool":
            form = _TOOL_ROLE_FORMS[wire_role]
    else:
        role = "user"  # the API reads a missing role as the user's
        form = ("role:absent",)
    if "parts" in wire:
        items = wire["parts"]
        if not isinstance(items, list):
            expect_list(items, f"{loc}.parts")
        found = []
        for j, item in enumerate(items):
            found.append(_parse_part(item, loc, j))
        parts = tuple(found)
    else:
        parts = ()
        form += ("parts:absent",)
    return new_message(role, parts, rest(wire, _K_CONTENT), form, (API, wire))


def _parse_part(raw: Any, loc: str, j: int) -> Part:
    """Part ``j`` of the ``parts`` of the content at ``loc``."""
    if not isinstance(raw, dict):
        expect_dict(raw, f"{loc}.parts.{j}")
    wire = raw
    for key in wire:
        found = _SPELLINGS.get(key)
        if found is not None:
            break
    else:
        shown = next(iter(wire), None)
        raise unknown("part field", shown, f"{loc}.parts.{j}", _DATA_FIELDS)
    field, snake = found
    value = wire[key]
    if field == "text":
        if not isinstance(value, str):
            expect_str(value, f"{loc}.parts.{j}.text")
        if wire.get("thought") is True:
            return new_thinking(value, None, False, None, rest(wire, _K_THOUGHT), (), (API, wire))
        extra = EMPTY if len(wire) == 1 else rest(wire, _K_TEXT)  # `text` is there
        return new_text(value, extra, (), (API, wire))
    form: tuple[str, ...] = ("snake",) if snake else ()
    if field == "functionCall":
        if not isinstance(value, dict):
            expect_dict(value, f"{loc}.parts.{j}.{key}")
        return _parse_call(key, wire, value, form, loc, j)
    if field == "functionResponse":
        if not isinstance(value, dict):
            expect_dict(value, f"{loc}.parts.{j}.{key}")
        return _parse_response(key, wire, value, form, loc, j)
    part: Part
    if field in ("inlineData", "fileData"):
        part = _parse_media(field, key, wire, f"{loc}.parts.{j}")
    else:
        part = Opaque(field, wire)
    return set_origin(part, API, wire)


def _parse_media(field: str, key: str, wire: dict[str, Any], loc: str) -> Media:
    inner = expect_dict(wire[key], f"{loc}.{key}")
    snake = key != field
    # The field name is always a hint: converted media (no hint) may pick either field.
    form = [field, "snake"] if snake else [field]
    modelled = set()
    mime_key = _nested_key(inner, "mimeType", snake, form)
    media_type = inner.get(mime_key)
    if isinstance(media_type, str):
        modelled.add(mime_key)
    else:
        media_type = None
        form.append("mimeType:absent")
    data: str | None = None
    url: str | None = None
    if field == "inlineData":
        data = expect_str(inner.get("data"), f"{loc}.{key}.data")
        modelled.add("data")
    else:
        uri_key = _nested_key(inner, "fileUri", snake, form)
        url = expect_str(inner.get(uri_key), f"{loc}.{key}.{uri_key}")
        modelled.add(uri_key)
    extra = rest_with(wire, frozenset({key}), key, inner, frozenset(modelled))
    return Media(_kind(media_type), media_type, data, url, extra, tuple(form))


def _nested_key(inner: dict[str, Any], camel: str, snake: bool, form: list[str]) -> str:
    """The spelling ``inner`` uses for ``camel``; notes it when it differs from the part's own."""
    preferred, other = (snake_case(camel), camel) if snake else (camel, snake_case(camel))
    if preferred not in inner and other in inner:
        form.append(f"{camel}:{'camel' if snake else 'snake'}")
        return other
    return preferred


def _kind(media_type: str | None) -> str:
    head = (media_type or "").partition("/")[0]
    return head if head in ("image", "audio", "video") else "document"


def _parse_call(
    key: str, wire: dict[str, Any], inner: dict[str, Any], form: tuple[str, ...], loc: str, j: int
) -> ToolCall:
    """The ``functionCall`` (spelt ``key``) of part ``j`` of the content at ``loc``."""
    name: Any = inner.get("name")
    if not isinstance(name, str):
        expect_str(name, f"{loc}.parts.{j}.{key}.name")
    if "args" in inner:
        arguments = inner["args"]
        if not isinstance(arguments, dict):
            expect_dict(arguments, f"{loc}.parts.{j}.{key}.args")
    else:
        arguments, form = {}, (*form, "args:absent")
    call_id = inner.get("id")
    if isinstance(call_id, str):
        extra = rest_with(wire, _ONLY[key], key, inner, _K_CALL)
    else:
        call_id, extra = None, rest_with(wire, _ONLY[key], key, inner, _K_CALL_NO_ID)
    return new_tool_call(call_id, name, arguments, None, True, extra, form, (API, wire))


_TEXT_KEY = "response:text:"


def _parse_response(
    key: str, wire: dict[str, Any], inner: dict[str, Any], form: tuple[str, ...], loc: str, j: int
) -> ToolResult:
    """The ``functionResponse`` (spelt ``key``) of part ``j`` of the content at ``loc``.

    The plain ``{"output": text}`` and ``{"error": text}`` objects read as
    text, so budgets and previews see text; any other object is data.
    """
    name: Any = inner.get("name")
    if not isinstance(name, str):
        expect_str(name, f"{loc}.parts.{j}.{key}.name")
    is_error = False
    content: tuple[Part, ...]
    if "response" not in inner:
        content, form = (), (*form, "response:absent")
    else:
        response = inner["response"]
        if not isinstance(response, dict):
            expect_dict(response, f"{loc}.parts.{j}.{key}.response")
        only = next(iter(response.items())) if len(response) == 1 else None
        if only is not None and only[0] == "output" and isinstance(only[1], str):
            content, form = (new_text(only[1], EMPTY, (), None),), (*form, "response:output")
        elif only is not None and only[0] == "error" and isinstance(only[1], str):
            content, form, is_error = (new_text(only[1], EMPTY, (), None),), (*form, "response:error"), True
        elif only is not None and isinstance(only[1], str):
            # Any one-key text object (``{"result": text}``): text too, and cut under its own key.
            content, form = (new_text(only[1], EMPTY, (), None),), (*form, f"{_TEXT_KEY}{only[0]}")
        else:
            content, form = (new_data(response, EMPTY, (), None),), (*form, "response:data")
    call_id = inner.get("id")
    if isinstance(call_id, str):
        extra = rest_with(wire, _ONLY[key], key, inner, _K_RESPONSE)
    else:
        call_id, extra = None, rest_with(wire, _ONLY[key], key, inner, _K_RESPONSE_NO_ID)
    return new_tool_result(call_id, content, is_error, name, extra, form, (API, wire))


def _parse_tools(entries: list[Any]) -> tuple[ToolDef, ...]:
    """Function declarations become one ``ToolDef`` each, remembering which entry held them.

    An entry that holds anything besides a non-empty declaration list is
    carried whole, so the grouping always goes back exactly.
    """
    tools: list[ToolDef] = []
    for i, raw in enumerate(entries):
        loc = f"tools.{i}"
        entry = expect_dict(raw, loc)
        key = next(iter(entry), "") if len(entry) == 1 else ""
        declarations = entry.get(key)
        if key in ("functionDeclarations", "function_declarations") and declarations:
            snake = key == "function_declarations"
            for j, raw_decl in enumerate(expect_list(declarations, f"{loc}.{key}")):
                tools.append(_parse_declaration(raw_decl, f"{loc}.{key}.{j}", i, snake))
        else:
            name = key or next(iter(entry), "tool")
            tools.append(
                new_tool_def(name, None, None, name, frozen_mapping(entry), ("entry",), (API, entry))
            )
    return tuple(tools)


def _parse_declaration(raw: Any, loc: str, group: int, snake: bool) -> ToolDef:
    wire = expect_dict(raw, loc)
    form = [f"group:{group}"]
    if snake:
        form.append("snake")
    modelled = set(_K_DECL)
    if "description" in wire:
        form.append("description")
    parameters = None
    schema_key = next((k for k in _SCHEMA_KEYS if k in wire), None)
    if schema_key is not None:
        parameters = wire[schema_key]
        modelled.add(schema_key)
        form.append(f"schema:{schema_key}")
    name = expect_str(wire.get("name"), f"{loc}.name")
    extra = rest(wire, frozenset(modelled))
    return new_tool_def(
        name, wire.get("description"), parameters, "function", extra, tuple(form), (API, wire)
    )


# --- render --------------------------------------------------------------------------


def render(request: Request) -> dict[str, Any]:
    """Write a :class:`Request` as a ``generateContent`` body (converting it if it came from elsewhere)."""
    return render_body(request, API, adapt, _fill, _URL_FIELDS)


def _fill(request: Request, body: dict[str, Any]) -> None:
    form = request.form
    if request.system or "system" in form or "system:snake" in form:
        key = "system_instruction" if "system:snake" in form else "systemInstruction"
        system = request.system
        if "system:str" in form and len(system) == 1 and plain_text(system[0]):
            body[key] = system[0].text  # type: ignore[union-attr]
        else:
            body[key] = unnest(request.extra, key, {"parts": [_render_part(p) for p in system]})
    body["contents"] = [_render_content(m) for m in request.messages]
    if request.tools or "tools" in form:
        body["tools"] = _render_tools(request.tools)


def _render_content(message: Message) -> Any:
    wire = reused(message, API)
    if wire is not None:
        return wire
    form = message.form
    out: dict[str, Any] = {}
    role = message.role
    if role == "assistant":
        out["role"] = "model"
    elif role == "tool" and "role:function" in form:
        out["role"] = "function"
    elif role == "tool" and "role:tool" in form:
        out["role"] = "tool"
    elif role == "system":
        out["role"] = "system"  # as it came: validation reports it, repair moves it
    elif "role:absent" not in form or role != "user":
        out["role"] = "user"
    if message.parts or "parts:absent" not in form:
        out["parts"] = [_render_part(p) for p in message.parts]
    return with_extra(out, message.extra)


def _render_part(part: Part) -> Any:
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, Text):
        return with_extra({"text": part.text}, part.extra)
    if isinstance(part, Thinking):
        return with_extra({"text": part.text or "", "thought": True}, part.extra)
    if isinstance(part, ToolCall):
        return _render_call(part)
    if isinstance(part, ToolResult):
        return _render_response(part)
    return render_leftover(part, _render_media, _text_part)


def _text_part(text: str) -> Any:
    return {"text": text}


def _render_call(part: ToolCall) -> Any:
    snake = "snake" in part.form
    inner: dict[str, Any] = {"name": part.name}
    arguments = part.arguments
    if arguments is None and part.arguments_json is not None:
        arguments = {"input": part.arguments_json}  # text that never parsed, kept readable
    elif arguments is not None and not isinstance(arguments, dict):
        arguments = {"input": arguments}  # `args` is an object
    if not ("args:absent" in part.form and not arguments):
        inner["args"] = arguments if arguments is not None else {}
    if part.id is not None:
        inner["id"] = part.id
    key = _spell("functionCall", snake)
    return with_extra({key: unnest(part.extra, key, inner)}, part.extra)


def _render_response(part: ToolResult) -> Any:
    snake = "snake" in part.form
    key = _spell("functionResponse", snake)
    inner: dict[str, Any] = {"name": part.name or ""}
    content = part.content
    if content or "response:absent" not in part.form:
        inner["response"] = _response_object(part)
    media = [_render_media(p) for p in content if isinstance(p, Media)]
    if media:
        # Gemini 3 takes images and files in a result as the response's own parts.
        inner["parts"] = media
    if part.call_id is not None:
        inner["id"] = part.call_id
    return with_extra({key: unnest(part.extra, key, inner)}, part.extra)


def _response_object(part: ToolResult) -> dict[str, Any]:
    content = part.content
    label = "error" if part.is_error else "output"
    label = next((f[len(_TEXT_KEY) :] for f in part.form if f.startswith(_TEXT_KEY)), label)
    if len(content) == 1 and isinstance(content[0], Text):
        return {label: content[0].text}
    if len(content) == 1 and isinstance(content[0], Data) and not part.is_error:
        value = content[0].value
        return value if isinstance(value, dict) else {"output": value}
    chunks = [
        p.text if isinstance(p, Text) else dumps_text(p.value) if isinstance(p, Data) else text_of((p,))
        for p in content
        if not isinstance(p, Media)
    ]
    return {label: "\n".join(c for c in chunks if c)}


def _render_media(part: Media) -> Any:
    form = part.form
    snake = "snake" in form
    media_type = part.media_type
    data = part.data
    url = part.url
    if data is None and url is not None and "fileData" not in form:
        split = split_data_url(url)  # a data URL from the OpenAI APIs travels inline here
        if split is not None:
            media_type, data = split
    inner: dict[str, Any] = {}
    if media_type is not None:
        inner[_nested_spelling("mimeType", snake, form)] = media_type
    elif "mimeType:absent" not in form:
        inner["mimeType"] = "application/octet-stream"  # required on both fields
    if data is not None and "fileData" not in form:
        key = _spell("inlineData", snake)
        inner["data"] = data
    elif url is not None:
        key = _spell("fileData", snake)
        inner[_nested_spelling("fileUri", snake, form)] = url
    else:
        return {"text": f"[{part.kind} not carried]"}
    return with_extra({key: unnest(part.extra, key, inner)}, part.extra)


def _nested_spelling(camel: str, snake: bool, form: tuple[str, ...]) -> str:
    if f"{camel}:snake" in form:
        return snake_case(camel)
    if f"{camel}:camel" in form:
        return camel
    return _spell(camel, snake)


def _render_tools(tools: Sequence[ToolDef]) -> list[Any]:
    """Declarations go back into the entry they came from; converted ones share one entry."""
    out: list[Any] = []
    group: str | None = None
    declarations: list[Any] = []
    for tool in tools:
        if tool.kind != "function":
            out.append(reused(tool, API) or _render_entry(tool))
            group = None
            continue
        tool_group = next((f for f in tool.form if f.startswith("group:")), "")
        if group != tool_group:
            declarations = []
            out.append({_spell("functionDeclarations", "snake" in tool.form): declarations})
            group = tool_group
        declarations.append(reused(tool, API) or _render_declaration(tool))
    return out


def _render_entry(tool: ToolDef) -> Any:
    # Parsed entries are carried whole; one built by hand names its kind.
    return dict(tool.extra) if tool.extra or "entry" in tool.form else {tool.kind: {}}


def _render_declaration(tool: ToolDef) -> Any:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description is not None or "description" in tool.form:
        out["description"] = tool.description
    schema_key = next((f[7:] for f in tool.form if f.startswith("schema:")), None)
    if schema_key is not None:
        out[schema_key] = tool.parameters
    elif tool.parameters is not None:
        # JSON Schema from other APIs: `parameters` takes only an OpenAPI subset.
        out["parametersJsonSchema"] = tool.parameters
    return with_extra(out, tool.extra)


# --- converting from another API -----------------------------------------------------


def adapt(request: Request) -> Request:
    """Lay out a request from another API (or a transcript) the way this API wants it.

    Turns alternate: neighbouring turns of one side merge, so all the results
    answering a model turn land in the one user turn after it (Gemini wants
    as many response parts there as there were calls), results first. Every
    result carries its call's name, and the first call of each model turn
    gets the documented stand-in signature when it has none. Reasoning from
    elsewhere is dropped: Gemini does not take thought text back, only
    signatures, and those never carry over between providers.

    Sampling settings move into ``generationConfig``. ``model`` and ``stream``
    stay in ``extra`` for the caller (``Request.model`` still answers) but are
    not written into the body: on this API they are part of the URL.
    """
    request = neutral(request)
    system = [p for p in request.system if isinstance(p, Text)]
    contents: list[Message] = []
    leading = True
    for message in request.messages:
        if message.role == "system" and leading:
            system.extend(p for p in message.parts if isinstance(p, Text))
            continue
        leading = False
        parts = tuple(p for p in message.parts if not isinstance(p, Thinking))
        if parts:
            contents.append(Message("assistant" if message.role == "assistant" else "user", parts))
    contents = [results_first(m) for m in merge_runs(contents, lambda m: m.role)]
    contents = _sign_calls(_name_results(contents))
    extra = dict(request.extra)
    config = {theirs: extra.pop(ours) for ours, theirs in _SAMPLING.items() if ours in extra}
    if config:
        extra["generationConfig"] = config
    return Request(API, tuple(contents), tuple(system), request.tools, frozen_mapping(extra), ("url_fields",))


def _name_results(contents: list[Message]) -> list[Message]:
    names = {p.id: p.name for m in contents for p in m.parts if isinstance(p, ToolCall) and p.id}
    if not any(isinstance(p, ToolResult) and p.name is None for m in contents for p in m.parts):
        return contents

    def named(p: Part) -> Part:
        if isinstance(p, ToolResult) and p.name is None:
            return replace(p, name=names.get(p.call_id or "", ""))
        return p

    return [replace(m, parts=tuple(named(p) for p in m.parts)) for m in contents]


def _sign_calls(contents: Iterable[Message]) -> list[Message]:
    out: list[Message] = []
    for message in contents:
        first = next(message.tool_calls(), None)
        if message.role == "assistant" and first is not None and not _signed(message.parts):
            signed = replace(first, extra=frozen_mapping({**first.extra, "thoughtSignature": SKIP_SIGNATURE}))
            message = replace(message, parts=tuple(signed if p is first else p for p in message.parts))
        out.append(message)
    return out


def _signed(parts: Iterable[Part]) -> bool:
    return any(isinstance(p, ToolCall) and any(k in p.extra for k in SIGNATURE_KEYS) for p in parts)
