"""Hypothesis strategies for valid histories, and the damage real histories suffer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from toolbudget.model import Conversation, Message, Part, Request, Text, Thinking, ToolCall, ToolResult
from toolbudget.wire._common import FAMILY

TOOL_NAMES = ("Bash", "Read", "Grep", "run_shell_command", "str_replace_editor")

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
    max_size=40,
)


@st.composite
def conversations(draw: st.DrawFn, family: str | None = None) -> Conversation:
    """A valid conversation in the neutral layout: calls, then one tool message per result."""
    messages: list[Message] = [Message("user", (Text("task: " + draw(_text)),))]
    turns = draw(st.integers(1, 6))
    for t in range(turns):
        parts: list[Part] = []
        if family and draw(st.booleans()):
            parts.append(Thinking(draw(_text), f"sig-{t}", source=family))
        if draw(st.booleans()):
            parts.append(Text("say " + draw(_text)))
        n_calls = draw(st.integers(0, 3))
        calls = [
            ToolCall(f"call_{t}_{j}", draw(st.sampled_from(TOOL_NAMES)), {"arg": draw(_text), "n": j})
            for j in range(n_calls)
        ]
        if not calls and not any(isinstance(p, Text) for p in parts):
            parts.append(Text("thinking aloud"))
        messages.append(Message("assistant", (*parts, *calls)))
        for call in calls:
            content = (Text(draw(_text) or "(empty)"),)
            error = draw(st.booleans())
            messages.append(Message("tool", (ToolResult(call.id, content, error, call.name),)))
        if not calls or draw(st.booleans()):
            messages.append(Message("user", (Text("next " + draw(_text)),)))
    if draw(st.booleans()):
        messages.append(Message("assistant", (Text("done"),)))
        messages.append(Message("user", (Text("thanks"),)))
    return Conversation("generated", "hypothesis", tuple(messages))


def family_of(api: str) -> str:
    return FAMILY[api]


DAMAGES = (
    "drop_result",
    "duplicate_id",
    "move_result",
    "orphan_result",
    "interleave_user_text",
    "split_batch",
)


def carrier(api: str) -> str:
    return "user" if api in ("anthropic", "gemini", "bedrock-converse") else "tool"


def damage(request: Request, kind: str, data: st.DataObject) -> Request | None:
    """``request`` with one kind of damage, or ``None`` when it offers no place for it."""
    msgs = list(request.messages)
    api = request.api or ""
    result_spots = [(i, k) for i, m in enumerate(msgs) for k, p in enumerate(m.parts) if isinstance(p, ToolResult)]
    call_spots = [(i, k) for i, m in enumerate(msgs) for k, p in enumerate(m.parts) if isinstance(p, ToolCall)]
    if kind == "drop_result":
        if not result_spots:
            return None
        i, k = data.draw(st.sampled_from(result_spots))
        _remove_part(msgs, i, k)
    elif kind == "duplicate_id":
        if len(call_spots) < 2:
            return None
        (i1, k1), (i2, k2) = data.draw(st.lists(st.sampled_from(call_spots), min_size=2, max_size=2, unique=True))
        first = msgs[i1].parts[k1]
        second = msgs[i2].parts[k2]
        assert isinstance(first, ToolCall) and isinstance(second, ToolCall)
        old = second.id
        msgs = [_rename(m, old, first.id) if j >= i2 else m for j, m in enumerate(msgs)]
        msgs[i2] = _replace_part(msgs[i2], k2, replace(second, id=first.id))
    elif kind == "move_result":
        if not result_spots:
            return None
        i, k = data.draw(st.sampled_from(result_spots))
        part = msgs[i].parts[k]
        _remove_part(msgs, i, k)
        later = [j for j in range(i, len(msgs)) if msgs[j].role == "assistant"]
        if not later:
            return None
        j = _after_block(msgs, later[0]) if api == "openai-responses" else later[0] + 1
        msgs.insert(j, Message(carrier(api), (part,)))
    elif kind == "orphan_result":
        j = data.draw(st.integers(1, len(msgs)))
        ghost = ToolResult("ghost_call", (Text("orphaned output"),), False, "Bash")
        msgs.insert(j, Message(carrier(api), (ghost,)))
    elif kind == "interleave_user_text":
        spots = sorted({i for i, _ in call_spots})
        if not spots:
            return None
        i = data.draw(st.sampled_from(spots))
        msgs.insert(i + 1, Message("user", (Text("wait, one more thing"),)))
    elif kind == "split_batch":
        batches = [i for i, m in enumerate(msgs) if sum(isinstance(p, ToolCall) for p in m.parts) >= 2]
        if not batches:
            return None
        i = data.draw(st.sampled_from(batches))
        parts = msgs[i].parts
        cut = next(k for k, p in enumerate(parts) if isinstance(p, ToolCall)) + 1
        msgs[i : i + 1] = [Message("assistant", parts[:cut]), Message("assistant", parts[cut:])]
    else:
        raise AssertionError(kind)
    return replace(request, messages=tuple(msgs))


def _after_block(msgs: list[Message], i: int) -> int:
    j = i + 1
    while j < len(msgs) and msgs[j].role in ("assistant", "tool"):
        j += 1
    return j


def _remove_part(msgs: list[Message], i: int, k: int) -> None:
    parts = msgs[i].parts[:k] + msgs[i].parts[k + 1 :]
    if parts:
        msgs[i] = Message(msgs[i].role, parts)
    else:
        del msgs[i]


def _replace_part(message: Message, k: int, part: Part) -> Message:
    return Message(message.role, message.parts[:k] + (part,) + message.parts[k + 1 :])


def _rename(message: Message, old: str | None, new: str | None) -> Message:
    def fix(p: Part) -> Part:
        if isinstance(p, ToolResult) and p.call_id == old:
            return replace(p, call_id=new)
        return p

    if not any(isinstance(p, ToolResult) and p.call_id == old for p in message.parts):
        return message
    return Message(message.role, tuple(fix(p) for p in message.parts))


def signatures(request: Request) -> list[Any]:
    return sorted(p.signature or "" for m in request.messages for p in m.parts if isinstance(p, Thinking))
