"""mini-swe-agent trajectories (``*.traj.json``, ``trajectory_format: "mini-swe-agent-1"``).

There are no structured calls: each assistant message holds one fenced
``bash`` block, and the user message after it is that command's output. Calls
are therefore paired by position and given synthetic ids. A user message that
is mini-swe-agent's format-error nag is not a result: the assistant message
before it made no valid call, so it stays plain text and the nag stays a user
message.
"""

from __future__ import annotations

import re
from typing import Any

from ..model import Conversation, Message, Part, Text, Thinking, ToolCall, ToolResult, frozen_mapping
from ._base import (
    Source,
    arr,
    compact_meta,
    dict_or_empty,
    family_of,
    mapping_get,
    obj,
    str_or_none,
    synthetic_id,
    text_parts,
)

FORMAT = "mini-swe-agent-traj-v1"

# mini-swe-agent's own action pattern: a ```bash fence, its body, a closing fence.
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_DEFAULT_NAG = "Please always provide EXACTLY ONE action"
_TOOL = "bash"


def sniff(source: Source) -> bool:
    doc = source.doc
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list) or "sessionId" in doc:
        return False
    version = doc.get("trajectory_format")
    if isinstance(version, str):
        return version.startswith("mini-swe-agent")
    return mapping_get(doc, "info", "mini_version") is not None


def load(source: Source) -> tuple[Conversation, ...]:
    doc = obj(source.doc, source.path)
    raw = arr(doc.get("messages"), f"{source.path}: messages")
    messages = [obj(m, f"{source.path}: messages.{i}") for i, m in enumerate(raw)]
    system: tuple[Part, ...] = ()
    if messages and messages[0].get("role") == "system":
        system = text_parts(messages[0].get("content"))
        messages = messages[1:]
    model = _model(doc, messages)
    out = _turns(messages, _nag_prefix(doc), family_of(model))
    info = dict_or_empty(doc.get("info"))
    meta = compact_meta(
        model=model,
        exit_status=str_or_none(info.get("exit_status")),
        mini_version=str_or_none(info.get("mini_version")),
    )
    conversation = Conversation(
        id=str_or_none(doc.get("instance_id")) or source.stem,
        source=FORMAT,
        messages=out,
        system=system,
        meta=frozen_mapping(meta),
    )
    return (conversation,)


def _nag_prefix(doc: dict[str, Any]) -> str:
    """The fixed opening of the run's own format-error template, so a customised nag is still recognised."""
    template = mapping_get(doc, "info", "config", "agent", "format_error_template")
    if isinstance(template, str):
        fixed = template.split("{", 1)[0].strip()
        if len(fixed) >= 20:
            return fixed
    return _DEFAULT_NAG


def _turns(messages: list[dict[str, Any]], nag: str, family: str | None) -> tuple[Message, ...]:
    out: list[Message] = []
    pending: ToolCall | None = None
    calls = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        role = message.get("role")
        if role == "assistant":
            following = messages[index + 1] if index + 1 < len(messages) else None
            pending = _call(text, following, nag, calls)
            calls += pending is not None
            parts = _assistant_parts(message, text, pending, family)
            if parts:
                out.append(Message("assistant", parts))
        elif role == "user" and pending is not None:
            out.append(Message("tool", (ToolResult(pending.id, (Text(text),), name=_TOOL),)))
            pending = None
        elif role in ("user", "system") and text:
            out.append(Message("user" if role == "user" else "system", (Text(text),)))
    return tuple(out)


def _call(text: str, following: dict[str, Any] | None, nag: str, index: int) -> ToolCall | None:
    """The message's command, when mini-swe-agent ran one (the next message is its output)."""
    actions = _ACTION.findall(text)
    if following is None:
        ran = len(actions) == 1
    else:
        reply = following.get("content")
        ran = following.get("role") == "user" and not (isinstance(reply, str) and reply.startswith(nag))
    if not ran:
        return None
    command = actions[0] if actions else text
    return ToolCall(synthetic_id(index), _TOOL, {"command": command})


def _assistant_parts(
    message: dict[str, Any], text: str, call: ToolCall | None, family: str | None
) -> tuple[Part, ...]:
    """Reasoning, the visible text and the call. With a call, the fenced block it came
    from is left out of the text, since the call already holds that command."""
    parts: list[Part] = list(_reasoning(message, family))
    if call is None:
        parts.extend(text_parts(text))
        return tuple(parts)
    match = _ACTION.search(text)
    visible = (text[: match.start()] + text[match.end() :]).strip() if match else ""
    parts.extend(text_parts(visible))
    parts.append(call)
    return tuple(parts)


def _reasoning(message: dict[str, Any], family: str | None) -> tuple[Thinking, ...]:
    """The provider's reasoning text and signature, kept in ``extra.response`` of the raw completion."""
    choices = mapping_get(message, "extra", "response", "choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    reply = dict_or_empty(mapping_get(first, "message"))
    text = str_or_none(reply.get("reasoning"))
    details = reply.get("reasoning_details")
    signature = next(
        (
            str_or_none(d.get("data"))
            for d in (details if isinstance(details, list) else [])
            if isinstance(d, dict) and d.get("type") == "reasoning.encrypted"
        ),
        None,
    )
    if text is None and signature is None:
        return ()
    return (Thinking(text=text, signature=signature, redacted=text is None, source=family),)


def _model(doc: dict[str, Any], messages: list[dict[str, Any]]) -> str | None:
    name = mapping_get(doc, "info", "config", "model", "model_name")
    if isinstance(name, str):
        return name
    for message in messages:
        name = mapping_get(message, "extra", "response", "model")
        if isinstance(name, str):
            return name
    return None
