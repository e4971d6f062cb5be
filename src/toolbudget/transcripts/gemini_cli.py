"""Gemini CLI chat sessions (``~/.gemini/tmp/<project>/chats/session-*.json``).

Gemini CLI stores a call and its result inside the same ``gemini`` message.
In the neutral layout they are split: the assistant message carries the
calls, and one tool message per result follows it.
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
    Source,
    Thread,
    arr,
    compact_meta,
    dict_or_empty,
    first_str,
    obj,
    str_or_none,
    text_parts,
)

FORMAT = "gemini-cli-session-json"


def sniff(source: Source) -> bool:
    doc = source.doc
    if not (isinstance(doc, dict) and "sessionId" in doc and isinstance(doc.get("messages"), list)):
        return False
    return all(isinstance(m, dict) and "type" in m for m in doc["messages"][:5])


def load(source: Source) -> tuple[Conversation, ...]:
    doc = obj(source.doc, source.path)
    thread = Thread()
    models: list[Any] = []
    for index, raw in enumerate(arr(doc.get("messages"), f"{source.path}: messages")):
        message = obj(raw, f"{source.path}: messages.{index}")
        kind = message.get("type")
        if kind == "user":
            thread.user(_user_parts(message.get("content")))
        elif kind == "gemini":
            models.append(message.get("model"))
            _gemini_message(thread, message, f"{source.path}: messages.{index}")
        # "info" and "error" messages are notices the CLI printed; the model never saw them.
    meta = compact_meta(model=first_str(models), project_hash=str_or_none(doc.get("projectHash")))
    conversation = Conversation(
        id=str_or_none(doc.get("sessionId")) or source.stem,
        source=FORMAT,
        messages=thread.messages(),
        meta=frozen_mapping(meta),
    )
    return (conversation,)


def _user_parts(content: Any) -> list[Part]:
    if isinstance(content, list):
        return [part for block in content for part in _gemini_part(dict_or_empty(block))]
    return list(text_parts(content))


def _gemini_message(thread: Thread, message: dict[str, Any], where: str) -> None:
    parts: list[Part] = [_thought(dict_or_empty(t)) for t in message.get("thoughts") or []]
    parts.extend(_user_parts(message.get("content")))
    calls = [obj(c, f"{where}: toolCalls") for c in message.get("toolCalls") or []]
    parts.extend(_call(c) for c in calls)
    thread.close()
    thread.assistant(parts)
    for call in calls:
        result = _result(call)
        if result is not None:
            thread.result(result)
    thread.close()


def _thought(thought: dict[str, Any]) -> Thinking:
    subject = str_or_none(thought.get("subject"))
    return Thinking(
        text=str_or_none(thought.get("description")),
        source="gemini",
        extra=frozen_mapping({"subject": subject} if subject else None),
    )


def _call(call: dict[str, Any]) -> ToolCall:
    return ToolCall(
        id=str_or_none(call.get("id")), name=str(call.get("name", "")), arguments=call.get("args")
    )


def _result(call: dict[str, Any]) -> ToolResult | None:
    """The call's result, or ``None`` for a call that never got one (cancelled before it ran)."""
    entries = call.get("result")
    if not isinstance(entries, list) or not entries:
        return None
    content: list[Part] = []
    is_error = call.get("status") == "error"
    for entry in entries:
        entry = dict_or_empty(entry)
        response = entry.get("functionResponse")
        if isinstance(response, dict):
            body = dict_or_empty(response.get("response"))
            if "error" in body:
                is_error = True
                content.append(Text(str(body["error"])))
            elif isinstance(body.get("output"), str):
                content.append(Text(body["output"]))
            else:
                content.append(Data(body))
        else:
            content.extend(_gemini_part(entry))
    return ToolResult(
        call_id=str_or_none(call.get("id")),
        content=tuple(content),
        is_error=is_error,
        name=str_or_none(call.get("name")),
    )


def _gemini_part(part: dict[str, Any]) -> list[Part]:
    """A Gemini API ``Part`` (text or inline data) as found in user content and extra result parts."""
    if isinstance(part.get("text"), str):
        return [Text(part["text"])]
    inline = part.get("inlineData")
    if isinstance(inline, dict):
        mime = str_or_none(inline.get("mimeType"))
        kind = mime.split("/", 1)[0] if mime else "file"
        return [Media(kind=kind, media_type=mime, data=str_or_none(inline.get("data")))]
    return [Data(part)] if part else []
