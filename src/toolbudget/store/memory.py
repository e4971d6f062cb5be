"""The in-memory reference backend.

It is the contract with nothing in the way: the other backends are checked
against the same tests, and tests of the rest of toolbudget use it so they
touch no disk. Entries die with the process, so it suits neither a proxy nor a
CLI whose recalls come from a later run.
"""

from __future__ import annotations

import threading

from .base import Store, namespace

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """``memory:``: a dict behind a lock, per instance."""

    url = "memory:"

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        # The exact session id is the namespace: tuples cannot collide.
        self._entries: dict[tuple[str, str], bytes] = {}

    def checks_inline(self, session: str) -> bool:
        return True  # a dict behind a lock held for microseconds

    def reads_inline(self, session: str) -> bool:
        return True

    def _put(self, session: str, key: str, data: bytes) -> None:
        with self._lock:
            self._entries.setdefault((session, key), data)

    def _get(self, session: str, key: str) -> bytes | None:
        with self._lock:
            return self._entries.get((session, key))

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        entries = self._entries
        with self._lock:
            return {key: entries[(session, key)] for key in keys if (session, key) in entries}

    def _find(self, key: str, within: str) -> bytes | None:
        with self._lock:
            held = sorted(
                owner for (owner, k) in self._entries if k == key and namespace(owner).startswith(within)
            )
            return self._entries[(held[0], key)] if held else None

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        with self._lock:
            return {key for key in keys if (session, key) not in self._entries}

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        entries = self._entries
        with self._lock:
            return {key: len(entries[(session, key)]) for key in keys if (session, key) in entries}

    def _discard(self, session: str, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._entries.pop((session, key), None)

    def _keys(self, session: str) -> list[str]:
        with self._lock:
            return [key for (owner, key) in self._entries if owner == session]

    def _drop(self, session: str) -> None:
        with self._lock:
            for entry in [entry for entry in self._entries if entry[0] == session]:
                del self._entries[entry]

    def _close(self) -> None:
        with self._lock:
            self._entries.clear()
