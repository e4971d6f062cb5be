"""When a session's requests arrived, and which found the cache cold: kept with its archive.

A schedule told when requests arrive (``Session.manage(..., now=)``) decides
something the history alone cannot give: a request after a gap longer than
the cache's TTL finds the cache cold, and everything eligible is compacted
there (:mod:`toolbudget.compaction`). For the same history to give the same
bytes after a restart, in another process and on another replica, that
decision is written to the session's store beside its archive, and a session
that did not see the previous request itself reads it back before it
decides: one read, of a few small entries.

Store entries are never replaced (a second ``put`` of a key is a no-op), so
the record is a set of small immutable entries, each under a key of the
session's own key space (a keyed hash of what the entry names, like every
archive key, so no other session can name them):

- one **arrival** per request point: when the request holding that many
  messages arrived (wall-clock seconds). The first writer wins: the same
  request sent again, here or to another replica, is not a new arrival.
  A session reads the arrival of the previous point to know the gap.
- one **cold** entry per cold point, whose presence is the whole record.
  Two replicas that decide differently at one point (a request retried on
  both, one of them after the TTL) both leave it cold: the set only grows,
  a union, so every session reading the record after both writes agrees,
  and a decision once read is never taken back.

Points are message counts. A client resends a conversation's earlier
messages unchanged, so a point names the same prefix on every request of one
conversation: that is what makes the union safe. Two conversations that
share one session id (derived from the same system prompt and task) share
its record too; each may then see the other's cold points, which only
compacts more at those points, the same way in every process.

Cold entries are named again (renewed) by every timed request, so they live
as long as the archive does; an old arrival is only read while it is the
last one, and may expire. A session never told arrival times neither reads
nor writes the record: its schedule stays a function of the history.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .errors import StoreError

__all__ = ["Recorded", "StoreRecord"]

_log = logging.getLogger("toolbudget")

_ARRIVAL = "\x00toolbudget: arrival\x00"
_COLD = "\x00toolbudget: cold\x00"


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the record says of a request, read before the schedule decides it."""

    cold: frozenset[int]
    """Every cold point recorded among the request's points."""
    previous: float | None
    """When the previous request point arrived, if it was recorded."""
    decided: bool
    """This very request point arrived before (a retry): it is no new arrival."""


NOTHING = Recorded(frozenset(), None, False)


class StoreRecord:
    """The record of one session in its store.

    ``key_for`` is the session's keyed hash (:meth:`Archive.key_for`);
    ``read`` fetches entries in one round trip (the session's bounded
    ``Store.get_many``), raising :class:`StoreError` when the store fails.
    """

    def __init__(
        self, key_for: Callable[[str], str], read: Callable[[list[str]], Mapping[str, bytes]]
    ) -> None:
        self._key_for = key_for
        self._read = read

    def read(self, points: Sequence[int]) -> Recorded:
        """The cold points among ``points`` (a request's, oldest first) and its last two arrivals.

        A store that fails reads as an empty record: the request is decided
        from what this session knows, as without a store.
        """
        if not points:
            return NOTHING
        here = points[-1]
        before = points[-2] if len(points) > 1 else None
        arrival_keys = {self._arrival_key(p): p for p in (before, here) if p is not None}
        cold_keys = {self._cold_key(p): p for p in points}
        try:
            found = self._read([*arrival_keys, *cold_keys])
        except StoreError as exc:
            _log.warning("toolbudget: the record of idle gaps could not be read: %s", exc)
            return NOTHING
        arrivals = {p: _arrival_of(found.get(key), p) for key, p in arrival_keys.items()}
        cold = frozenset(p for key, p in cold_keys.items() if found.get(key) == _cold_text(p))
        previous = arrivals.get(before) if before is not None else None
        return Recorded(cold, previous, arrivals.get(here) is not None)

    def entries(self, point: int, arrival: float, cold: Iterable[int]) -> dict[str, bytes]:
        """What one timed request writes: its arrival, and every cold point known (renewed)."""
        items = {self._arrival_key(point): _arrival_text(point, arrival)}
        for p in sorted(cold):
            items[self._cold_key(p)] = _cold_text(p)
        return items

    def _arrival_key(self, point: int) -> str:
        return self._key_for(f"{_ARRIVAL}{point}")

    def _cold_key(self, point: int) -> str:
        return self._key_for(f"{_COLD}{point}")


def _arrival_text(point: int, arrival: float) -> bytes:
    # repr of a float reads back as the same float: the gap is the same in every process.
    return f"{_ARRIVAL}{point} {float(arrival)!r}".encode()


def _cold_text(point: int) -> bytes:
    return f"{_COLD}{point}".encode()


def _arrival_of(data: bytes | None, point: int) -> float | None:
    """The arrival an entry holds, or ``None`` when it is absent or not whole (a torn write)."""
    head = f"{_ARRIVAL}{point} ".encode()
    if data is None or not data.startswith(head):
        return None
    try:
        value = float(data[len(head) :].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if math.isfinite(value) else None
