"""Helpers shared by the wire modules: shape checks, origin reuse, neutral layout."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import orjson

from ..errors import ShapeError
from ..jsonio import type_name
from ..model import (
    EMPTY,
    Data,
    Media,
    Message,
    Opaque,
    Part,
    Request,
    Text,
    Thinking,
    ToolCall,
    ToolDef,
    ToolResult,
    frozen_mapping,
)

T = TypeVar("T")


def expect_dict(value: Any, location: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ShapeError(f"expected an object, found {type_name(value)}", location=location)
    return value


def expect_list(value: Any, location: str) -> list[Any]:
    if not isinstance(value, list):
        raise ShapeError(f"expected an array, found {type_name(value)}", location=location)
    return value


def expect_str(value: Any, location: str) -> str:
    if not isinstance(value, str):
        raise ShapeError(f"expected a string, found {type_name(value)}", location=location)
    return value


def opt_str(value: Any, location: str) -> str | None:
    return None if value is None else expect_str(value, location)


def rest(wire: Mapping[str, Any], modelled: frozenset[str]) -> Mapping[str, Any]:
    """The fields of ``wire`` we do not model, in their original order."""
    extra = {k: v for k, v in wire.items() if k not in modelled}
    return frozen_mapping(extra) if extra else EMPTY


def reused(obj: Any, api: str) -> Any:
    """The wire value ``obj`` was parsed from, if it came from ``api`` unchanged."""
    origin = obj.origin
    if origin is not None and origin[0] == api:
        return origin[1]
    return None


def with_extra(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    if extra:
        for key, value in extra.items():
            out.setdefault(key, value)
    return out


def unknown(kind: str, value: Any, location: str, known: Iterable[str]) -> ShapeError:
    shown = repr(value) if isinstance(value, str) else type_name(value)
    names = ", ".join(sorted(known))
    return ShapeError(f"unknown {kind} {shown} (expected one of: {names})", location=location)


def dumps_text(value: Any) -> str:
    """JSON text for a value that must travel as text (structured content on a text-only wire)."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


# --- neutral form, used when converting between APIs -------------------------------


def neutral_part(part: Part) -> Part | None:
    """The same part with every API-specific field dropped (``None`` for opaque parts)."""
    if isinstance(part, Text):
        return part if not (part.extra or part.form or part.origin) else Text(part.text)
    if isinstance(part, Media):
        return Media(part.kind, part.media_type, part.data, part.url)
    if isinstance(part, Data):
        return Data(part.value)
    if isinstance(part, Thinking):
        return Thinking(part.text, part.signature, part.redacted, part.source)
    if isinstance(part, ToolCall):
        return ToolCall(part.id, part.name, part.arguments, part.arguments_json, part.arguments_ok)
    if isinstance(part, ToolResult):
        content = tuple(p for p in map(neutral_part, part.content) if p is not None)
        return ToolResult(part.call_id, content, part.is_error, part.name)
    if isinstance(part, Opaque):
        return None
    raise AssertionError(part)


FAMILY = {
    "anthropic": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "gemini": "gemini",
    "bedrock-converse": "bedrock",
}


def neutral(request: Request) -> Request:
    """A copy of ``request`` with nothing that belongs to its wire API.

    Thinking blocks keep a note of which provider signed them, so the target
    API can keep the ones it will accept.
    """
    family = FAMILY.get(request.api or "")

    def part(p: Part) -> Part | None:
        if isinstance(p, Thinking):
            return Thinking(p.text, p.signature, p.redacted, p.source or family)
        return neutral_part(p)

    def parts(ps: Iterable[Part]) -> tuple[Part, ...]:
        return tuple(q for q in map(part, ps) if q is not None)

    messages = tuple(Message(m.role, parts(m.parts)) for m in request.messages)
    tools = tuple(ToolDef(t.name, t.description, t.parameters) for t in request.tools if t.kind == "function")
    extra = {k: v for k, v in request.extra.items() if k in PORTABLE_FIELDS}
    return Request(None, messages, parts(request.system), tools, frozen_mapping(extra))


# Request fields that mean the same on every API we convert between.
PORTABLE_FIELDS = frozenset({"model", "temperature", "top_p", "stream"})


def merge_runs(messages: Iterable[Message], key: Callable[[Message], str | None]) -> list[Message]:
    """Merge neighbouring messages whose ``key`` is equal and not ``None``."""
    out: list[Message] = []
    last_key: str | None = None
    for message in messages:
        k = key(message)
        if out and k is not None and k == last_key:
            out[-1] = Message(out[-1].role, out[-1].parts + message.parts)
        else:
            out.append(message)
        last_key = k
    return out


def results_first(message: Message) -> Message:
    """The message with its tool results moved in front of everything else."""
    results = tuple(p for p in message.parts if isinstance(p, ToolResult))
    if not results or message.parts[: len(results)] == results:
        return message
    others = tuple(p for p in message.parts if not isinstance(p, ToolResult))
    return replace(message, parts=results + others)


_SAFE_ID = re.compile(r"[^A-Za-z0-9_-]")


def safe_ids(messages: Sequence[Message]) -> list[Message]:
    """Rewrite call ids that Anthropic-style APIs refuse (pattern ``^[a-zA-Z0-9_-]+$``).

    Ids are rewritten the same way in calls and results, deterministically, and
    a rewritten id never collides with an id already present.
    """
    ids = {p.id for m in messages for p in m.parts if isinstance(p, ToolCall) and p.id}
    ids |= {p.call_id for m in messages for p in m.parts if isinstance(p, ToolResult) and p.call_id}
    bad = sorted(i for i in ids if not i or _SAFE_ID.search(i))
    if not bad:
        return list(messages)
    taken = set(ids)
    mapping: dict[str, str] = {}
    for old in bad:
        base = _SAFE_ID.sub("_", old) or "call"
        new, n = base, 1
        while new in taken:
            n += 1
            new = f"{base}_{n}"
        taken.add(new)
        mapping[old] = new

    def fix(p: Part) -> Part:
        if isinstance(p, ToolCall) and p.id in mapping:
            return replace(p, id=mapping[p.id])
        if isinstance(p, ToolResult) and p.call_id in mapping:
            return replace(p, call_id=mapping[p.call_id])
        return p

    return [replace(m, parts=tuple(fix(p) for p in m.parts)) for m in messages]
