"""Amazon Bedrock Converse: ``messages`` of tagged content blocks, ``system``, ``toolConfig``.

A block has no ``type`` field: it is tagged by its one key (``text``,
``toolUse``, ``toolResult``...). Results answering an assistant turn sit in
the next user message as ``toolResult`` blocks. ``modelId`` belongs to the
URL, not the body; if a caller puts it in the body anyway it is carried in
``extra`` like every other field.

Media formats (``png``, ``pdf``...) stay in ``extra`` in the wire's own words;
``media_type`` holds the matching MIME type, which is what other APIs read.
"""

from __future__ import annotations

from dataclasses import replace
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
    frozen_mapping,
    set_origin,
    text_of,
)
from .._build import (
    new_data,
    new_message,
    new_request,
    new_text,
    new_tool_call,
    new_tool_def,
    new_tool_result,
)
from .._common import (
    EntryCache,
    arguments_text,
    cached,
    expect_dict,
    expect_list,
    expect_str,
    fill_call_ids,
    kept_in,
    merge_runs,
    neutral,
    opt_str,
    parse_history,
    read_role,
    render_body,
    render_leftover,
    rest,
    rest_with,
    results_first,
    reused,
    safe_ids,
    split_data_url,
    tools_for_calls,
    unknown,
    unnest,
    with_extra,
)

__all__ = ["API", "adapt", "parse", "render"]

API = "bedrock-converse"

# `system` is read so that validation can report it the way the service does and repair can
# move it; the service's ConversationRole takes only these two.
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system"}
_API_ROLES = ("assistant", "user")

_MIME: dict[str, dict[str, str]] = {
    "image": {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"},
    "document": {
        "pdf": "application/pdf",
        "csv": "text/csv",
        "doc": "application/msword",
        "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls": "application/vnd.ms-excel",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "html": "text/html",
        "txt": "text/plain",
        "md": "text/markdown",
    },
    "video": {
        "mkv": "video/x-matroska",
        "mov": "video/quicktime",
        "mp4": "video/mp4",
        "webm": "video/webm",
        "flv": "video/x-flv",
        "mpeg": "video/mpeg",
        "mpg": "video/mpg",
        "wmv": "video/x-ms-wmv",
        "three_gp": "video/3gpp",
    },
    "audio": {
        "mp3": "audio/mpeg",
        "wav": "audio/wav",
        "flac": "audio/flac",
        "ogg": "audio/ogg",
        "opus": "audio/opus",
        "aac": "audio/aac",
        "m4a": "audio/mp4",
        "webm": "audio/webm",
        "pcm": "audio/pcm",
    },
}
_FORMAT: dict[str, dict[str, str]] = {kind: {v: k for k, v in m.items()} for kind, m in _MIME.items()}
_FORMAT["image"]["image/jpg"] = "jpeg"
_FORMAT["audio"]["audio/mp3"] = "mp3"

_MEDIA_KEYS = frozenset(_MIME)
_OPAQUE_KEYS = frozenset(
    {"cachePoint", "guardContent", "citationsContent", "searchResult", "toolAddition", "toolRemoval"}
)
BLOCK_KEYS = _MEDIA_KEYS | _OPAQUE_KEYS | frozenset({"text", "toolUse", "toolResult", "reasoningContent"})
RESULT_KEYS = frozenset({"text", "json", "image", "document", "video", "searchResult"})
SYSTEM_KEYS = frozenset({"text", "cachePoint", "guardContent"})

_K_MESSAGE = frozenset({"role", "content"})
_K_TOOL_USE = frozenset({"toolUseId", "name", "input"})
_K_TOOL_RESULT = frozenset({"toolUseId", "content", "status"})
_K_TOOL_RESULT_NO_STATUS = frozenset({"toolUseId", "content"})
_K_SOURCE = frozenset({"source"})
_K_REASONING = frozenset({"reasoningText"})
_K_SPEC = frozenset({"name", "description", "inputSchema"})
_K_TOOLS = frozenset({"tools"})
_K_BODY = frozenset({"messages", "system", "toolConfig"})
_NO_KEYS: frozenset[str] = frozenset()
_ONLY_TEXT = frozenset({"text"})
_ONLY_JSON = frozenset({"json"})
_ONLY_TOOL_USE = frozenset({"toolUse"})
_ONLY_TOOL_RESULT = frozenset({"toolResult"})
_ERROR_STATUS = {"success": False, "error": True}
# Portable request fields: sampling goes in inferenceConfig; the model (and ConverseStream) are in the URL.
_SAMPLING = {"temperature": "temperature", "top_p": "topP"}
_URL_FIELDS = ("model", "stream")


# --- parse ---------------------------------------------------------------------------


def parse(body: Any, cache: EntryCache | None = None) -> Request:
    """Read a Converse request body into a :class:`Request`."""
    wire = body if type(body) is dict else to_body(body)  # wire.parse has read it already
    messages = parse_history(cache, wire, "messages", _parse_message, "a Bedrock Converse body")
    form: list[str] = []
    system: tuple[Part, ...] = ()
    if "system" in wire:
        blocks = expect_list(wire["system"], "system")
        system = tuple([_parse_block(b, SYSTEM_KEYS, "system", ".", i) for i, b in enumerate(blocks)])
        form.append("system")
    tools: tuple[ToolDef, ...] = ()
    config = wire.get("toolConfig")
    if isinstance(config, dict) and "tools" in config:
        entries = expect_list(config["tools"], "toolConfig.tools")
        tools = cached(
            cache,
            b"tools",
            entries,
            lambda: tuple(_parse_tool(t, f"toolConfig.tools.{i}") for i, t in enumerate(entries)),
        )
        form.append("tools")
        # The rest of toolConfig (toolChoice) stays in extra, under its own key.
        extra = rest_with(wire, _K_BODY, "toolConfig", config, _K_TOOLS)
    else:
        extra = rest(wire, _K_BODY - {"toolConfig"})
    return new_request(API, messages, system, tools, extra, tuple(form), (API, wire))


def _parse_message(raw: Any, loc: str) -> Message:
    # Locations are spelled out only for an error: a long history's parse is mostly these calls.
    if not isinstance(raw, dict):
        expect_dict(raw, loc)
    wire = raw
    value = wire.get("role")
    role = _ROLES.get(value) if isinstance(value, str) else None
    if role is None:
        role = read_role(value, _ROLES, f"{loc}.role", _API_ROLES)
    blocks = wire.get("content")
    if not isinstance(blocks, list):
        expect_list(blocks, f"{loc}.content")
    parts = []
    for j, block in enumerate(blocks):
        parts.append(_parse_block(block, BLOCK_KEYS, loc, ".content.", j))
    return new_message(role, tuple(parts), rest(wire, _K_MESSAGE), (), (API, wire))


def _at(loc: str, within: str, j: int | None) -> str:
    return loc if j is None else f"{loc}{within}{j}"


def _parse_block(raw: Any, known: frozenset[str], loc: str, within: str = "", j: int | None = None) -> Part:
    """A block tagged by one of ``known``, at ``loc`` (or ``loc + within + j`` when ``j`` is given)."""
    if not isinstance(raw, dict):
        expect_dict(raw, _at(loc, within, j))
    for key in raw:
        if key in known:
            break
    else:
        raise unknown("content block", next(iter(raw), None), _at(loc, within, j), known)
    return _parse_tagged(raw, key, loc, within, j)


def _parse_tagged(wire: dict[str, Any], key: str, loc: str, within: str, j: int | None) -> Part:
    """A block tagged by ``key``, at ``loc`` or ``loc + within + j`` (as :func:`_parse_block`)."""
    value = wire[key]
    if key == "text":
        if not isinstance(value, str):
            expect_str(value, f"{_at(loc, within, j)}.text")
        extra = EMPTY if len(wire) == 1 else rest(wire, _ONLY_TEXT)
        return new_text(value, extra, (), (API, wire))
    if key == "toolUse":
        if not isinstance(value, dict):
            expect_dict(value, f"{_at(loc, within, j)}.toolUse")
        if "input" not in value:
            raise ShapeError("a toolUse block needs `input`", location=f"{_at(loc, within, j)}.toolUse")
        call_id: Any = value.get("toolUseId")
        if not isinstance(call_id, str):
            expect_str(call_id, f"{_at(loc, within, j)}.toolUse.toolUseId")
        name: Any = value.get("name")
        if not isinstance(name, str):
            expect_str(name, f"{_at(loc, within, j)}.toolUse.name")
        extra = rest_with(wire, _ONLY_TOOL_USE, key, value, _K_TOOL_USE)
        # Parsed here: whatever `input` holds goes back as it is.
        return new_tool_call(call_id, name, value["input"], None, True, extra, ("toolUse",), (API, wire))
    where = _at(loc, within, j)
    if key == "toolResult":
        return _parse_result(wire, expect_dict(value, f"{where}.toolResult"), where)
    part: Part
    if key == "reasoningContent":
        part = _parse_reasoning(wire, expect_dict(value, f"{where}.reasoningContent"), where)
    elif key in _MEDIA_KEYS:
        part = _parse_media(key, wire, expect_dict(value, f"{where}.{key}"))
    else:
        part = Opaque(key, wire)
    return set_origin(part, API, wire)


def _parse_media(kind: str, wire: dict[str, Any], inner: dict[str, Any]) -> Media:
    fmt = inner.get("format")
    media_type = _MIME[kind].get(fmt) if isinstance(fmt, str) else None
    source = inner.get("source")
    outer = frozenset({kind})
    if isinstance(source, dict) and len(source) == 1:
        if isinstance(source.get("bytes"), str):
            extra = rest_with(wire, outer, kind, inner, _K_SOURCE)
            return Media(kind, media_type, source["bytes"], extra=extra, form=("bytes",))
        location = source.get("s3Location")
        if isinstance(location, dict) and set(location) == {"uri"} and isinstance(location["uri"], str):
            extra = rest_with(wire, outer, kind, inner, _K_SOURCE)
            return Media(kind, media_type, url=location["uri"], extra=extra, form=("s3",))
    # Text and structured document sources, and S3 locations with an owner, are carried whole.
    return Media(kind, media_type, extra=rest_with(wire, outer, kind, inner, _NO_KEYS), form=("source",))


def _parse_result(wire: dict[str, Any], inner: dict[str, Any], loc: str) -> ToolResult:
    """A ``toolResult`` block at ``loc``; its fields are ``inner``."""
    items: Any = inner.get("content")
    if not isinstance(items, list):
        expect_list(items, f"{loc}.toolResult.content")
    content = []
    for k, item in enumerate(items):
        content.append(_parse_result_item(item, loc, k))
    status = inner.get("status")
    is_error = _ERROR_STATUS.get(status) if isinstance(status, str) else None
    modelled = _K_TOOL_RESULT if is_error is not None else _K_TOOL_RESULT_NO_STATUS
    call_id: Any = inner.get("toolUseId")
    if not isinstance(call_id, str):
        expect_str(call_id, f"{loc}.toolResult.toolUseId")
    extra = rest_with(wire, _ONLY_TOOL_RESULT, "toolResult", inner, modelled)
    form = ("status",) if is_error is not None else ()
    return new_tool_result(call_id, tuple(content), bool(is_error), None, extra, form, (API, wire))


def _parse_result_item(raw: Any, loc: str, k: int) -> Part:
    """Item ``k`` of the content of the ``toolResult`` block at ``loc``."""
    if not isinstance(raw, dict):
        expect_dict(raw, f"{loc}.toolResult.content.{k}")
    for key in raw:
        if key in RESULT_KEYS:
            break
    else:
        shown = next(iter(raw), None)
        raise unknown("tool result content block", shown, f"{loc}.toolResult.content.{k}", RESULT_KEYS)
    if key == "json":
        extra = EMPTY if len(raw) == 1 else rest(raw, _ONLY_JSON)
        return new_data(raw["json"], extra, (), (API, raw))
    return _parse_tagged(raw, key, loc, ".toolResult.content.", k)


def _parse_reasoning(wire: dict[str, Any], inner: dict[str, Any], loc: str) -> Part:
    outer = frozenset({"reasoningContent"})
    reasoning = inner.get("reasoningText")
    if isinstance(reasoning, dict) and set(reasoning) <= {"text", "signature"}:
        return Thinking(
            expect_str(reasoning.get("text"), f"{loc}.reasoningContent.reasoningText.text"),
            opt_str(reasoning.get("signature"), f"{loc}.reasoningContent.reasoningText.signature"),
            extra=rest_with(wire, outer, "reasoningContent", inner, _K_REASONING),
            form=("signature",) if "signature" in reasoning else (),
        )
    redacted = inner.get("redactedContent")
    if len(inner) == 1 and isinstance(redacted, str):
        return Thinking(None, redacted, True, extra=rest(wire, outer))
    return Opaque("reasoningContent", wire)


def _parse_tool(raw: Any, loc: str) -> ToolDef:
    wire = expect_dict(raw, loc)
    spec = wire.get("toolSpec")
    if not isinstance(spec, dict):
        # cachePoint and systemTool entries are carried whole.
        kind = next(iter(wire), "tool")
        inner = wire.get(kind)
        name = inner.get("name") if isinstance(inner, dict) else None
        name = name if isinstance(name, str) else kind
        return new_tool_def(name, None, None, kind, frozen_mapping(wire), ("entry",), (API, wire))
    # Always a hint: a tool without one is a converted tool, which gets the required defaults.
    form = ["toolSpec"]
    modelled = {"name", "description"}
    if "description" in spec:
        form.append("description")
    schema = spec.get("inputSchema")
    parameters = None
    if isinstance(schema, dict) and set(schema) == {"json"}:
        parameters = schema["json"]
        modelled.add("inputSchema")
        form.append("schema")
    return new_tool_def(
        expect_str(spec.get("name"), f"{loc}.toolSpec.name"),
        spec.get("description"),
        parameters,
        "function",
        rest_with(wire, frozenset({"toolSpec"}), "toolSpec", spec, frozenset(modelled)),
        tuple(form),
        (API, wire),
    )


# --- render --------------------------------------------------------------------------


def render(request: Request) -> dict[str, Any]:
    """Write a :class:`Request` as a Converse body (converting it if it came from elsewhere)."""
    return render_body(request, API, adapt, _fill, _URL_FIELDS)


def _fill(request: Request, body: dict[str, Any]) -> None:
    body["messages"] = [_render_message(m) for m in request.messages]
    if request.system or "system" in request.form:
        body["system"] = [_render_block(p) for p in request.system]
    if request.tools or "tools" in request.form:
        config = {"tools": [_render_tool(t) for t in request.tools]}
        body["toolConfig"] = unnest(request.extra, "toolConfig", config)


def _render_message(message: Message) -> Any:
    wire = reused(message, API)
    if wire is not None:
        return wire
    role = "user" if message.role == "tool" else message.role
    return with_extra({"role": role, "content": [_render_block(p) for p in message.parts]}, message.extra)


def _render_block(part: Part) -> Any:
    wire = reused(part, API)
    if wire is not None:
        return wire
    if isinstance(part, Text):
        return with_extra({"text": part.text}, part.extra)
    if isinstance(part, ToolCall):
        inner = {"toolUseId": part.id or "", "name": part.name, "input": _input(part)}
        return with_extra({"toolUse": unnest(part.extra, "toolUse", inner)}, part.extra)
    if isinstance(part, ToolResult):
        return _render_result(part)
    if isinstance(part, Thinking):
        if part.redacted:
            return with_extra({"reasoningContent": {"redactedContent": part.signature or ""}}, part.extra)
        reasoning: dict[str, Any] = {"text": part.text or ""}
        if part.signature is not None or "signature" in part.form:
            reasoning["signature"] = part.signature
        inner = unnest(part.extra, "reasoningContent", {"reasoningText": reasoning})
        return with_extra({"reasoningContent": inner}, part.extra)
    return render_leftover(part, _render_media, _text_block)


def _text_block(text: str) -> Any:
    return {"text": text}


def _input(call: ToolCall) -> Any:
    if "toolUse" in call.form:
        return call.arguments  # parsed here: `input` goes back exactly as it came
    if call.arguments is None:
        # Text that never parsed stays readable; a call without arguments takes an empty object.
        return {} if call.arguments_json is None else {"input": call.arguments_json}
    if not isinstance(call.arguments, dict):
        return {"input": call.arguments}  # a custom tool's free text: the models want an object
    return call.arguments


def _render_result(part: ToolResult) -> Any:
    content = [_render_result_item(p) for p in part.content]
    inner: dict[str, Any] = {"toolUseId": part.call_id or "", "content": content}
    if part.is_error or "status" in part.form:
        inner["status"] = "error" if part.is_error else "success"
    return with_extra({"toolResult": unnest(part.extra, "toolResult", inner)}, part.extra)


def _render_result_item(part: Part) -> Any:
    if isinstance(part, Data):
        return reused(part, API) or with_extra({"json": part.value}, part.extra)
    # A result's content holds no calls, results or reasoning; their text stands in.
    if isinstance(part, ToolResult):
        return {"text": text_of(part.content)}
    if isinstance(part, ToolCall):
        return {"text": arguments_text(part)}
    if isinstance(part, Thinking):
        return {"text": part.text or ""}
    if isinstance(part, Media) and part.kind not in RESULT_KEYS:
        return {"text": f"[{part.kind} not carried]"}  # a result holds no audio
    return _render_block(part)


def _render_media(part: Media) -> Any:
    kind = part.kind if part.kind in _MIME else "document"
    inner: dict[str, Any] = {}
    media_type = part.media_type
    if "source" in part.form:
        pass  # carried whole in extra
    elif "bytes" in part.form and part.data is not None:
        inner["source"] = {"bytes": part.data}
    elif "s3" in part.form and part.url is not None:
        inner["source"] = {"s3Location": {"uri": part.url}}
    if "source" in part.form or inner:
        # Parsed here: the wire's own fields (format, name...) are all in extra.
        return with_extra({part.kind: unnest(part.extra, part.kind, inner)}, part.extra)
    if part.data is not None:
        inner["source"] = {"bytes": part.data}
    elif part.url is not None and part.url.startswith("s3://"):
        inner["source"] = {"s3Location": {"uri": part.url}}
    elif part.url is not None and (split := split_data_url(part.url)) is not None:
        media_type, data = split
        inner["source"] = {"bytes": data}
    else:
        return {"text": f"[{part.kind} not carried]"}
    fmt = _FORMAT[kind].get(media_type or "")
    if fmt is None:
        return {"text": f"[{part.kind} not carried: no {kind} format for {media_type}]"}
    inner["format"] = fmt
    if kind == "document":
        inner["name"] = "document"  # required; converted documents have none
    return {kind: inner}


def _render_tool(tool: ToolDef) -> Any:
    wire = reused(tool, API)
    if wire is not None:
        return wire
    if tool.kind != "function":
        return dict(tool.extra) if tool.extra or "entry" in tool.form else {tool.kind: {}}
    spec: dict[str, Any] = {"name": tool.name}
    if tool.description is not None or "description" in tool.form:
        spec["description"] = tool.description
    if tool.parameters is not None or "schema" in tool.form:
        spec["inputSchema"] = {"json": tool.parameters}
    elif "toolSpec" not in tool.form:
        spec["inputSchema"] = {"json": {"type": "object", "properties": {}}}  # required
    return with_extra({"toolSpec": unnest(tool.extra, "toolSpec", spec)}, tool.extra)


# --- converting from another API -----------------------------------------------------


def adapt(request: Request) -> Request:
    """Lay out a request from another API (or a transcript) the way this API wants it.

    Roles alternate, so neighbouring messages of one side merge; that puts the
    results of one turn into one user message, first. Empty text is dropped
    (Converse refuses blank text blocks), as is reasoning that Bedrock did not
    sign. Ids get the pattern Claude models on Bedrock accept.

    Sampling settings move into ``inferenceConfig``. ``model`` and ``stream``
    stay in ``extra`` for the caller but are not written into the body: the
    model id and the streaming variant are part of the URL.
    """
    request = neutral(request)
    system = [p for p in request.system if isinstance(p, Text) and p.text]
    messages: list[Message] = []
    leading = True
    for message in fill_call_ids(request.messages):
        if message.role == "system" and leading:
            system.extend(p for p in message.parts if isinstance(p, Text) and p.text)
            continue
        leading = False
        parts = tuple(_portable(p) for p in message.parts if kept_in(p, "bedrock"))
        if parts:
            messages.append(Message("assistant" if message.role == "assistant" else "user", parts))
    messages = [_results_alone(results_first(m)) for m in merge_runs(messages, lambda m: m.role)]
    messages = safe_ids(messages)
    extra = dict(request.extra)
    config = {theirs: extra.pop(ours) for ours, theirs in _SAMPLING.items() if ours in extra}
    if config:
        extra["inferenceConfig"] = config
    # "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    tools = request.tools or tools_for_calls(messages)
    return Request(API, tuple(messages), tuple(system), tools, frozen_mapping(extra), ("url_fields",))


def _portable(part: Part) -> Part:
    if not isinstance(part, ToolResult):
        return part
    content = tuple(p for p in part.content if not isinstance(p, Text) or p.text)
    if not content and part.is_error:
        # "The content field ... cannot be empty when status value is error."
        content = (Text("error"),)
    return replace(part, content=content) if content != part.content else part


def _results_alone(message: Message) -> Message:
    """Converse refuses other blocks beside ``toolResult`` blocks in one message.

    Text (and media) that a user message held next to its results goes inside
    the last result's content instead, where the model still reads it right
    after the results, as it did before.
    """
    results = [p for p in message.parts if isinstance(p, ToolResult)]
    if not results or len(results) == len(message.parts):
        return message
    others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
    last = results[-1]
    results[-1] = replace(last, content=last.content + others)
    return Message(message.role, tuple(results))
