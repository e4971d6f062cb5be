"""What every dialect's stream folder shares: the :class:`Folder` protocol and small helpers.

A folder is shown each event of one stream, as a dict (the SSE ``data:`` JSON,
or the SDK event's ``model_dump``), and at any time gives the reply as the
API would have sent it without streaming, so a stream cut before its last
event still says what it held and whether it was cut. A folder never mutates
an event it is shown, and every reply it gives is its own copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Appends", "Folder", "block_at", "copied", "event_index", "parsed_input"]


class Folder(Protocol):
    kinds: frozenset[str | None] | None
    """The event ``type`` values it reads (``None`` for an event with no type); ``None``: it reads all.

    Lets a watcher skip, without converting them, the many events an SDK
    helper adds (text snapshots and the like)."""

    unread: frozenset[str]
    """Fields of an SDK helper's events it never reads, left out when an event is converted.

    Such events carry the reply so far (``snapshot``) next to the wire event;
    converting it at every event would cost time quadratic in the reply's
    length."""

    def see(self, event: Mapping[str, Any]) -> None:
        """Fold one event in."""

    def reply(self) -> dict[str, Any] | None:
        """The reply so far, as the API would send it whole; ``None`` before anything of it was seen."""


class Appends:
    """Text appended to fields of the reply being folded, joined only when it is read.

    A stream sends a long answer in many small deltas; appending each to a
    string copies the string each time, which costs time quadratic in the
    answer's length (a second for 800 KB in 40,000 deltas). The pieces of a
    field wait here, in a list, until the reply is read.
    """

    def __init__(self) -> None:
        self._runs: dict[tuple[int, str], tuple[dict[str, Any], str, list[str]]] = {}

    def add(self, target: dict[str, Any], field: str, text: str) -> None:
        """Append ``text`` to ``target[field]`` (a field that is no string yet starts empty)."""
        key = (id(target), field)  # the run holds ``target``, so its id stays its own
        run = self._runs.get(key)
        if run is None:
            current = target.get(field)
            run = self._runs[key] = (target, field, [current if isinstance(current, str) else ""])
        run[2].append(text)

    def value(self, target: dict[str, Any], field: str) -> str:
        """The text of ``target[field]`` so far, written into it."""
        run = self._runs.get((id(target), field))
        if run is not None:
            _settle(run)
        current = target.get(field)
        return current if isinstance(current, str) else ""

    def put(self, target: dict[str, Any], field: str, value: Any) -> None:
        """Set ``target[field]`` outright, dropping the pieces still waiting for it."""
        self._runs.pop((id(target), field), None)
        target[field] = value

    def settle(self) -> None:
        """Write every field's text so far into it, before the reply is copied."""
        for run in self._runs.values():
            _settle(run)


def _settle(run: tuple[dict[str, Any], str, list[str]]) -> None:
    target, field, pieces = run
    if len(pieces) > 1:
        pieces[:] = ["".join(pieces)]
    target[field] = pieces[0]


def event_index(event: Mapping[str, Any], key: str) -> int | None:
    value = event.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def block_at(blocks: list[dict[str, Any]], index: int | None) -> dict[str, Any] | None:
    """The block at ``index`` of a reply being folded, or ``None`` for an index that names none."""
    if index is None or not 0 <= index < len(blocks):
        return None
    return blocks[index]


def parsed_input(text: str) -> Any:
    """A call's streamed argument text as the unstreamed reply holds it.

    Parsed when it is whole JSON (an empty text is ``{}``); otherwise left as
    the text, which no reader takes for runnable arguments.
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def copied(reply: dict[str, Any] | None) -> dict[str, Any] | None:
    return copy.deepcopy(reply) if reply is not None else None
