"""A session's next request, budgeted from its last one: the work of the new messages alone.

An agent's request k+1 is request k with messages appended. Everything the
pipeline decides about the earlier messages (their parse, their pairing,
their cuts and compaction levels, the rendered JSON of each) stays as it was
until a compaction event, which the schedule itself announces. So a session
keeps, from its last request, what it needs to go on from there
(:class:`Prefix`), and the next one costs a walk over the new messages plus
one ``orjson.dumps`` of the history, which is how the unchanged prefix is
recognised: the JSON text of the earlier history, less its closing bracket,
begins the new one's. Byte equality of canonical JSON is exact where ``==``
on dicts is not (``1 == 1.0 == True``), and the text is ours, so a caller
that edits its earlier body in place cannot make it lie.

A compaction event changes the level of a few old results, which the
schedule names: their turns are cut again and their messages rendered again,
and the rest of the last answer stands (see :func:`toolbudget.budget.extend`).
Whenever the new messages could change a decision on the old ones otherwise
(a result answering an earlier call, a pairing violation, a fold that moves,
a store that failed, a caller's token counter), the session does the whole
pipeline instead, and keeps a fresh :class:`Prefix` from that. Both paths
give the same bytes; ``tests/test_incremental.py`` checks that on every
request of every shared session, on every API.

A managed body built this way shares its earlier messages' JSON objects with
the bodies returned before it (as a resent history already did): nothing in
toolbudget changes them afterwards, and a caller that wants to edit a
returned body copies it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ._fastinit import fast_init
from .budget import Trail
from .model import Message, Request
from .policy import Policy

__all__ = [
    "HISTORY",
    "Prefix",
    "entries_after",
    "fingerprint",
    "head_of",
    "opening",
    "parse_entries",
    "render_entries",
]

HISTORY = {
    "anthropic": "messages",
    "openai-chat": "messages",
    "openai-responses": "input",
    "gemini": "contents",
    "bedrock-converse": "messages",
}
"""The field of each API's body that holds the history."""


@fast_init
@dataclass(frozen=True, slots=True)
class Prefix:
    """The last request a session managed, kept so that its extension is budgeted from it."""

    api: str
    policy: Policy
    head: bytes
    """The JSON text of the body without its history: the fields besides it must not change."""
    history: memoryview
    """The JSON text of the history, less its closing bracket."""
    count: int
    """How many history entries it had."""
    request: Request
    managed: Request | None
    """The managed request, ``None`` when the request went out as it came."""
    out: dict[str, Any] | None
    """The managed body (ours: never changed after), ``None`` when it went out as it came."""
    trail: Trail
    pending: Mapping[str, str]
    """The keys its markers name, with their texts: checked in the store before each request."""
    chars_before: int
    chars_after: int
    calls: frozenset[str]
    """The ids of every call in its history."""
    sizes: tuple[int, ...]
    """The characters of each of its messages."""


def head_of(body: Mapping[str, Any], key: str) -> bytes | None:
    """The JSON text of ``body`` without its history field, ``None`` when it is not JSON orjson writes."""
    try:
        return orjson.dumps({k: v for k, v in body.items() if k != key})
    except TypeError:
        return None


def fingerprint(entries: Any) -> bytes | None:
    """The JSON text of a history list (``None`` when it is not one, or not JSON orjson writes)."""
    if not isinstance(entries, list) or not entries:
        return None
    try:
        return orjson.dumps(entries)
    except TypeError:
        return None


def opening(text: bytes) -> memoryview:
    """A history's JSON text less its closing bracket: what the text of any extension begins with."""
    return memoryview(text)[:-1]


_AFTER = frozenset(b",]")


def entries_after(prefix: Prefix, body: Mapping[str, Any]) -> tuple[list[Any], bytes, bytes] | None:
    """The entries ``body`` appends to the prefix's history (none: the same body again), with its
    history's text and its head, or ``None`` when its history does not begin with the prefix's."""
    key = HISTORY[prefix.api]
    entries = body.get(key)
    if not isinstance(entries, list) or len(entries) < prefix.count:
        return None
    text = fingerprint(entries)
    if text is None:
        return None
    old = prefix.history
    # "[e1,...,en" begins "[e1,...,en,e(n+1)...]" (or "[e1,...,en]"): the first n entries are the
    # same JSON values.
    if len(text) <= len(old) or text[len(old)] not in _AFTER or not text.startswith(old):
        return None
    head = head_of(body, key)
    if head is None or head != prefix.head:
        return None
    return entries[prefix.count :], text, head


def parse_entries(api: str, entries: list[Any]) -> tuple[Message, ...]:
    """History entries of ``api`` read on their own, as the whole body's parse reads each."""
    from . import wire

    return wire.module(api).parse({HISTORY[api]: entries}).messages


def render_entries(api: str, messages: tuple[Message, ...], sent: list[Any] | None = None) -> list[Any]:
    """The history entries of ``messages`` as ``api`` writes them, each as the whole body would.

    ``sent`` are the entries the messages were parsed from, one each: when
    every message still holds its entry as its origin (nothing changed it),
    rendering gives those very entries, so they are taken as they are.
    """
    if sent is not None and len(sent) == len(messages):
        for message, entry in zip(messages, sent, strict=True):
            origin = message.origin
            if origin is None or origin[0] != api or origin[1] is not entry:
                break
        else:
            return list(sent)
    from . import wire

    body = wire.render(Request(api, messages))
    entries = body[HISTORY[api]]
    assert isinstance(entries, list)
    return entries
