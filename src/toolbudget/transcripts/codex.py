"""OpenAI Codex rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Three generations of the file are read:

* **wrapped** (from about September 2025): every line is ``{timestamp, type,
  payload}``, with ``type`` one of ``session_meta``, ``turn_context``,
  ``response_item``, ``event_msg``, ``compacted`` (and, later, other markers);
* **bare** (the first Rust releases, to about early September 2025): the first line
  is the session meta itself (``{id, timestamp, instructions, git}``), every
  other line a bare Responses item, with ``{"record_type": "state"}`` lines
  between them;
* **saved** (the TypeScript CLI, spring 2025): one JSON document,
  ``~/.codex/sessions/rollout-<date>-<id>.json``, holding ``{session: {id,
  timestamp, instructions}, items: [Responses item, ...]}``.

``response_item`` lines are the history: they are the Responses API items the
model was sent. ``event_msg`` lines mostly repeat the same facts for the UI and
telemetry, so reading them too would double every message and result, with one
exception: the user's prompts. Some rollouts (``cli_version`` 0.128 among them)
keep a prompt only as an ``event_msg`` of type ``user_message`` (or, in
paginated history, an ``item_completed`` event holding a ``UserMessage``
item), and without it the session would start with a tool call and two of
the model's answers would run together. So a prompt event becomes a user
message, unless a ``response_item`` user message near it already says the
same text: "near" is the stretch between two pieces of model output, where
Codex writes a prompt's item and its event together, in either order.

Items arrive one per line: a reasoning item, an assistant message and the
calls of one model turn sit next to each other and are merged into one
assistant message; the outputs that follow become tool messages, and the next
call after an output starts a new assistant message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from ..model import (
    Conversation,
    Data,
    Media,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    frozen_mapping,
)
from ._base import (
    CallNames,
    Source,
    Thread,
    compact_meta,
    dict_or_empty,
    mapping_get,
    obj,
    parse_arguments,
    str_or_none,
)

FORMAT = "codex-rollout-jsonl"

_LINE_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
# Items the model itself produced. A prompt's item and its event never have one between them.
_MODEL_OUTPUT = _CALLS | {"reasoning", "web_search_call"}
# Bare-generation lines are the Responses items themselves.
_BARE_ITEMS = _CALLS | _OUTPUTS | {"message", "reasoning", "web_search_call"}
# Codex once prefixed the typed prompt with this heading inside the user message.
_REQUEST_HEADING = "## My request for Codex:"
_SNIFF_LIMIT = 20


def sniff(source: Source) -> bool:
    """A wrapped rollout (``{timestamp, type, payload}`` lines), a bare one or a saved one."""
    records = source.records[:_SNIFF_LIMIT]
    wrapped = any(
        isinstance(r, dict) and r.get("type") in _LINE_TYPES and isinstance(r.get("payload"), dict)
        for r in records
    )
    return wrapped or _is_bare(records) or _is_saved(source.doc)


def _is_saved(doc: Any) -> bool:
    """The TypeScript CLI's one-document rollout: ``{session: {id, ...}, items: [...]}``."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("items"), list)
        and isinstance(doc.get("session"), dict)
        and "id" in doc["session"]
    )


def _is_bare(records: tuple[Any, ...]) -> bool:
    """A session meta line without ``type`` first, then state markers or bare Responses items."""
    if not records or not _is_bare_meta(records[0]):
        return False
    return any(
        isinstance(r, dict) and ("record_type" in r or r.get("type") in _BARE_ITEMS) for r in records[1:]
    )


def _is_bare_meta(record: Any) -> bool:
    return isinstance(record, dict) and "type" not in record and "id" in record and "timestamp" in record


def _lines(source: Source) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """``(index, line type, payload)`` for every line, whichever generation wrote the file.

    The other generations' entries are given the wrapped line types, so one
    reader serves all three. A saved rollout's index counts its session first,
    then its items.
    """
    if _is_saved(source.doc):
        yield 0, "session_meta", source.doc["session"]
        for index, item in enumerate(source.doc["items"], start=1):
            yield index, "response_item", obj(item, f"{source.path}: items.{index - 1}")
        return
    records = source.records
    bare = _is_bare(records)
    for index, raw in enumerate(records):
        if not bare:
            record = raw if isinstance(raw, dict) else {}
            yield index, record.get("type"), dict_or_empty(record.get("payload"))
        elif index == 0:
            yield index, "session_meta", raw
        elif isinstance(raw, dict) and raw.get("type") in _BARE_ITEMS:
            yield index, "response_item", raw


class _Session:
    """The state of one rollout while its items are read in order."""

    def __init__(self) -> None:
        self.thread = Thread()
        self.names = CallNames()
        self.system: list[Part] = []
        self.seen_user = False
        self.web_searches = 0

    def item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(item)
        elif kind == "reasoning":
            self.thread.assistant([_thinking(item)])
        elif kind in _CALLS:
            self.thread.assistant([self.names.add(_call(item))])
        elif kind in _OUTPUTS:
            call_id = str_or_none(item.get("call_id"))
            content, is_error = _output(item.get("output"))
            # The same spelling hint the Responses parser gives, so rendering keeps the item type.
            form = ("custom",) if kind == "custom_tool_call_output" else ()
            self.thread.result(ToolResult(call_id, content, is_error, self.names.name(call_id), form=form))
        elif kind == "web_search_call":
            # A server-side search: it has no output item, so as a ToolCall it would
            # look like a call still waiting for its result. It is skipped from the
            # history and only counted in meta["web_searches"].
            self.web_searches += 1
        # Other item types (ghost snapshots, compaction markers) carry nothing the model reads.

    def prompt(self, parts: list[Part]) -> None:
        """A user prompt known only from its event. It ends the model's open turn, like any user message."""
        self.seen_user = True
        self.thread.user(parts)

    def _message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        parts = _content_parts(item.get("content"))
        if role == "assistant":
            self.thread.assistant(parts)
        elif role == "user":
            self.seen_user = True
            self.thread.user(parts)
        elif role in ("developer", "system"):
            # Leading developer messages are standing instructions: they join the
            # system prompt. Later ones were injected mid-session and stay in place.
            if self.seen_user:
                self.thread.system(parts)
            else:
                self.system.extend(parts)


def load(source: Source) -> tuple[Conversation, ...]:
    for index, raw in enumerate(source.records):
        obj(raw, source.where(index))
    lines = list(_lines(source))
    carried = _carried_prompts(lines)
    session = _Session()
    session_meta: dict[str, Any] = {}
    model: str | None = None
    for index, kind, payload in lines:
        if kind == "session_meta" and not session_meta:
            session_meta = payload
        elif kind == "turn_context" and model is None:
            model = str_or_none(payload.get("model"))
        elif kind == "response_item":
            session.item(payload)
        elif kind == "event_msg" and index not in carried:
            prompt = _event_prompt(payload)
            if prompt is not None:
                session.prompt(prompt[1])
    instructions = _instructions(session_meta)
    system: tuple[Part, ...] = ((Text(instructions),) if instructions else ()) + tuple(session.system)
    meta = compact_meta(
        model=model,
        cwd=str_or_none(session_meta.get("cwd")),
        cli_version=str_or_none(session_meta.get("cli_version")),
        originator=str_or_none(session_meta.get("originator")),
        model_provider=str_or_none(session_meta.get("model_provider")),
        web_searches=session.web_searches or None,
    )
    conversation = Conversation(
        id=str_or_none(session_meta.get("id")) or source.stem,
        source=FORMAT,
        messages=session.thread.messages(),
        system=system,
        meta=frozen_mapping(meta),
    )
    return (conversation,)


# --- prompts kept as events ---------------------------------------------------------


def _event_prompt(payload: dict[str, Any]) -> tuple[str, list[Part]] | None:
    """``(comparison key, parts)`` of a prompt event, or None for every other event.

    ``user_message`` holds the typed text and the images sent inline (data
    URLs); ``item_completed`` with a ``UserMessage`` item holds the same inputs
    as a list. Images attached from disk are named only by their local path,
    which says nothing of their content, so they are left out.
    """
    kind = payload.get("type")
    if kind == "user_message":
        text = payload.get("message")
        text = text if isinstance(text, str) else ""
        images = [u for u in payload.get("images") or [] if isinstance(u, str)]
        parts: list[Part] = [Text(text)] if text else []
        parts.extend(Media(kind="image", url=url) for url in images)
        return _prompt_key(text), parts
    item = dict_or_empty(payload.get("item"))
    if kind == "item_completed" and item.get("type") == "UserMessage":
        parts = []
        for entry in item.get("content") or []:
            entry = dict_or_empty(entry)
            if entry.get("type") == "text" and isinstance(entry.get("text"), str):
                parts.append(Text(entry["text"]))
            elif entry.get("type") == "image" and isinstance(entry.get("image_url"), str):
                parts.append(Media(kind="image", url=entry["image_url"]))
        text = "".join(p.text for p in parts if isinstance(p, Text))
        return _prompt_key(text), [p for p in parts if not (isinstance(p, Text) and not p.text)]
    return None


def _item_prompt_key(item: dict[str, Any]) -> str | None:
    """The comparison key of a ``response_item`` user message, or None for any other item."""
    if item.get("type") != "message" or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return _prompt_key(content)
    blocks = content if isinstance(content, list) else []
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "input_text"]
    # Codex wraps an image attached from disk in these tag texts; the event leaves them out.
    return _prompt_key("".join(t for t in texts if isinstance(t, str) and not _is_image_tag(t)))


def _is_image_tag(text: str) -> bool:
    stripped = text.strip()
    return stripped == "</image>" or (stripped.startswith("<image") and stripped.endswith(">"))


def _prompt_key(text: str) -> str:
    heading = text.find(_REQUEST_HEADING)
    if heading >= 0:
        text = text[heading + len(_REQUEST_HEADING) :]
    return text.strip()


def _carried_prompts(lines: list[tuple[int, Any, dict[str, Any]]]) -> set[int]:
    """Indexes of the prompt events whose text a ``response_item`` already carries.

    The lines are cut into stretches at each piece of model output. In each,
    every prompt event is matched to a user message item of the same text, one
    to one; an event matched is carried and is skipped. An unmatched event of
    the other kind with the same text (a legacy ``user_message`` beside a
    paginated ``item_completed``) is the same prompt twice, so only one of them
    is kept.
    """
    carried: set[int] = set()
    items: Counter[str] = Counter()
    events: list[tuple[int, str, str]] = []

    def settle() -> None:
        kept: dict[str, Counter[str]] = {"user_message": Counter(), "item_completed": Counter()}
        for index, kind, key in events:
            other = kept["item_completed" if kind == "user_message" else "user_message"]
            if items[key] > 0:
                items[key] -= 1
                carried.add(index)
            elif other[key] > 0:
                other[key] -= 1
                carried.add(index)
            else:
                kept[kind][key] += 1
        items.clear()
        events.clear()

    for index, kind, payload in lines:
        if kind == "response_item":
            if _is_model_output(payload):
                settle()
            key = _item_prompt_key(payload)
            if key is not None:
                items[key] += 1
        elif kind == "event_msg":
            prompt = _event_prompt(payload)
            if prompt is not None:
                events.append((index, str(payload.get("type")), prompt[0]))
    settle()
    return carried


def _is_model_output(item: dict[str, Any]) -> bool:
    kind = item.get("type")
    return kind in _MODEL_OUTPUT or (kind == "message" and item.get("role") == "assistant")


def _instructions(session_meta: dict[str, Any]) -> str | None:
    text = mapping_get(session_meta, "base_instructions", "text")
    if isinstance(text, str):
        return text
    return str_or_none(session_meta.get("instructions"))


def _content_parts(content: Any) -> list[Part]:
    if isinstance(content, str):
        return [Text(content)]
    parts: list[Part] = []
    for block in content if isinstance(content, list) else []:
        block = dict_or_empty(block)
        kind = block.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text"):
            parts.append(Text(str(block.get("text", ""))))
        elif kind == "input_image":
            parts.append(Media(kind="image", url=str_or_none(block.get("image_url"))))
        elif block:
            parts.append(Data(block))
    return parts


def _thinking(item: dict[str, Any]) -> Thinking:
    """A reasoning item. Without readable summary text it is redacted: only the encrypted payload remains."""
    texts = [
        str(block.get("text", ""))
        for key in ("summary", "content")
        for block in (item.get(key) or [])
        if isinstance(block, dict)
    ]
    text = "\n\n".join(t for t in texts if t) or None
    signature = str_or_none(item.get("encrypted_content"))
    return Thinking(
        text=text, signature=signature, redacted=text is None and signature is not None, source="openai"
    )


def _call(item: dict[str, Any]) -> ToolCall:
    call_id = str_or_none(item.get("call_id")) or str_or_none(item.get("id"))
    kind = item.get("type")
    if kind == "function_call":
        arguments, arguments_json, ok = parse_arguments(item.get("arguments"))
        return ToolCall(call_id, str(item.get("name", "")), arguments, arguments_json, ok)
    if kind == "custom_tool_call":
        # Free-form input (apply_patch's patch text): the value is the text itself, not JSON.
        return ToolCall(call_id, str(item.get("name", "")), item.get("input"), form=("custom",))
    return ToolCall(call_id, "local_shell", item.get("action"))


def _output(output: Any) -> tuple[tuple[Part, ...], bool]:
    """Result content and error flag. The output string is kept exactly as the model read it."""
    if isinstance(output, str):
        return (Text(output),), False
    if isinstance(output, list):
        return tuple(_content_parts(output)), False
    if isinstance(output, dict):
        content = output.get("content")
        failed = output.get("success") is False
        if isinstance(content, str):
            return (Text(content),), failed
        return (Data(output),), failed
    return (), False
