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

__all__ = ["Folder", "block_at", "event_index", "parsed_input"]


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
