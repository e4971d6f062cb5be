"""Hypothesis strategies for valid histories, and the damage real histories suffer."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass, replace
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

from toolbudget.model import (
    Conversation,
    Message,
    Part,
    Request,
    Role,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    text_of,
)
from toolbudget.wire._common import FAMILY

T = TypeVar("T")

TOOL_NAMES = ("Bash", "Read", "Grep", "run_shell_command", "str_replace_editor")

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
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


def carrier(api: str) -> Role:
    return "user" if api in ("anthropic", "gemini", "bedrock-converse") else "tool"


class Chooser(Protocol):
    """Where damage gets its choices: Hypothesis, or a seeded ``random.Random``."""

    def choice(self, options: Sequence[T]) -> T: ...

    def integer(self, low: int, high: int) -> int: ...


class Drawn:
    """A :class:`Chooser` that draws from Hypothesis."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def choice(self, options: Sequence[T]) -> T:
        return self.data.draw(st.sampled_from(options))

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(st.integers(low, high))


class Seeded:
    """A :class:`Chooser` from a seeded generator: the same seed, the same damage."""

    def __init__(self, seed: str) -> None:
        self.random = random.Random(seed)

    def choice(self, options: Sequence[T]) -> T:
        return self.random.choice(options)

    def integer(self, low: int, high: int) -> int:
        return self.random.randint(low, high)


def damage(request: Request, kind: str, data: Chooser) -> Request | None:
    """``request`` with one kind of damage, or ``None`` when it offers no place for it."""
    msgs = list(request.messages)
    api = request.api or ""
    result_spots = [
        (i, k) for i, m in enumerate(msgs) for k, p in enumerate(m.parts) if isinstance(p, ToolResult)
    ]
    call_spots = [
        (i, k) for i, m in enumerate(msgs) for k, p in enumerate(m.parts) if isinstance(p, ToolCall)
    ]
    if kind == "drop_result":
        if not result_spots:
            return None
        i, k = data.choice(result_spots)
        _remove_part(msgs, i, k)
    elif kind == "duplicate_id":
        if len(call_spots) < 2:
            return None
        a = data.integer(0, len(call_spots) - 1)
        b = data.integer(0, len(call_spots) - 2)
        b += b >= a
        (i1, k1), (i2, k2) = sorted((call_spots[a], call_spots[b]))
        first = msgs[i1].parts[k1]
        second = msgs[i2].parts[k2]
        assert isinstance(first, ToolCall) and isinstance(second, ToolCall)
        old = second.id
        msgs = [_rename(m, old, first.id) if j >= i2 else m for j, m in enumerate(msgs)]
        msgs[i2] = _replace_part(msgs[i2], k2, replace(second, id=first.id))
    elif kind == "move_result":
        if not result_spots:
            return None
        i, k = data.choice(result_spots)
        part = msgs[i].parts[k]
        _remove_part(msgs, i, k)
        later = [j for j in range(i, len(msgs)) if msgs[j].role == "assistant"]
        if not later:
            return None
        j = _after_block(msgs, later[0]) if api == "openai-responses" else later[0] + 1
        msgs.insert(j, Message(carrier(api), (part,)))
    elif kind == "orphan_result":
        j = data.integer(1, len(msgs))
        ghost = ToolResult("ghost_call", (Text("orphaned output"),), False, "Bash")
        msgs.insert(j, Message(carrier(api), (ghost,)))
    elif kind == "interleave_user_text":
        spots = sorted({i for i, _ in call_spots})
        if not spots:
            return None
        i = data.choice(spots)
        msgs.insert(i + 1, Message("user", (Text("wait, one more thing"),)))
    elif kind == "split_batch":
        batches = [i for i, m in enumerate(msgs) if sum(isinstance(p, ToolCall) for p in m.parts) >= 2]
        if not batches:
            return None
        i = data.choice(batches)
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
    return Message(message.role, (*message.parts[:k], part, *message.parts[k + 1 :]))


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


def rebuilt(value: Any) -> Any:
    """``value`` rebuilt through the constructors, which drops every ``origin``.

    Rendering the result exercises the real render path instead of the reuse of
    the caller's objects, so a round trip through it proves the model is exact.
    """
    if is_dataclass(value) and not isinstance(value, type):
        fields_ = {f.name: rebuilt(getattr(value, f.name)) for f in dataclass_fields(value) if f.init}
        return type(value)(**fields_)
    if isinstance(value, tuple):
        return tuple(rebuilt(v) for v in value)
    return value


def lost_results(damaged: Request, fixed: Request) -> list[str | None]:
    """Calls whose first result was in ``damaged`` but is gone from ``fixed``.

    A repair may drop a second result for the same call, or a result with no
    call at all; it must never drop the result a call was answered with. (It
    may append to one: Bedrock's text that shared a message with results is
    folded into the last result.)
    """
    calls = {p.id for m in damaged.messages for p in m.parts if isinstance(p, ToolCall)}
    kept = {text_of(p.content) for m in fixed.messages for p in m.parts if isinstance(p, ToolResult)}
    answered: set[str | None] = set()
    lost: list[str | None] = []
    for message in damaged.messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id in calls and part.call_id not in answered:
                answered.add(part.call_id)
                text = text_of(part.content)
                if text not in kept and not any(k.startswith(text) for k in kept):
                    lost.append(part.call_id)
    return lost


def bash_body(output: str) -> dict[str, Any]:
    """An Anthropic body whose one Bash call answered ``output``: the smallest history a cut needs."""
    return {
        "model": "m",
        "max_tokens": 10,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]},
        ],
    }


def bash_turns(turns: int) -> list[dict[str, Any]]:
    """A tau-bench trajectory (OpenAI Chat messages) of ``turns`` Bash calls, each answering 600 lines."""
    traj: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for t in range(turns):
        call = {"id": f"c{t}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        traj.append({"role": "assistant", "content": f"step {t}", "tool_calls": [call]})
        text = "".join(f"line {n} of output {t}\n" for n in range(600))
        traj.append({"role": "tool", "tool_call_id": f"c{t}", "name": "bash", "content": text})
    return traj
