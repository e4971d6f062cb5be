"""OpenAI Codex rollout files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Only ``response_item`` lines are history: they are the Responses API items the
model was sent. ``event_msg`` lines repeat the same facts for the UI and
telemetry, so reading them too would double every message and result.

Items arrive one per line: a reasoning item, an assistant message and the
calls of one model turn sit next to each other and are merged into one
assistant message; the outputs that follow become tool messages, and the next
call after an output starts a new assistant message.
"""

from __future__ import annotations

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
_SNIFF_LIMIT = 20


def sniff(source: Source) -> bool:
    """Rollout lines are ``{timestamp, type, payload}`` with one of Codex's line types."""
    return any(
        isinstance(r, dict) and r.get("type") in _LINE_TYPES and isinstance(r.get("payload"), dict)
        for r in source.records[:_SNIFF_LIMIT]
    )


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
    session = _Session()
    session_meta: dict[str, Any] = {}
    model: str | None = None
    for index, raw in enumerate(source.records):
        record = obj(raw, source.where(index))
        payload = dict_or_empty(record.get("payload"))
        kind = record.get("type")
        if kind == "session_meta" and not session_meta:
            session_meta = payload
        elif kind == "turn_context" and model is None:
            model = str_or_none(payload.get("model"))
        elif kind == "response_item":
            session.item(payload)
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
