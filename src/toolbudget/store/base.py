"""The archive store interface every backend honours.

A cut keeps the full original of a tool result in a store, under a key the
model later recalls with ``<<tb:KEY>>``. A recall that finds nothing is the
worst outcome a peer shows (Headroom's dead hashes after expiry or restart),
so the contract is narrow and the same for every backend, and one test suite
checks it against all of them.
"""

from __future__ import annotations

import hashlib
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Self

from ..errors import StoreError
from ..marker import KEY_RE

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_TTL", "Store", "check_key", "is_key", "namespace"]

DEFAULT_TTL = 7 * 24 * 3600.0
"""Seconds an entry outlives its last access in the expiring backends: a week
covers an agent session resumed the next day, or after a weekend."""

DEFAULT_MAX_BYTES = 1 << 30
"""Size cap of the SQLite store: large enough for thousands of big outputs,
small enough that a forgotten archive never fills a disk."""

_KEY = re.compile(KEY_RE)
_SAFE_SESSION = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SAFE_PREFIX = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}|")
_UNSAFE_RUN = re.compile(r"[^a-z0-9]+")


def is_key(key: object) -> bool:
    """Whether ``key`` is a recall key; anything else never reaches a backend."""
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def check_key(key: object) -> str:
    """``key`` when it is a recall key; :class:`ValueError` otherwise."""
    if not is_key(key):
        raise ValueError(f"not a store key (16-64 chars of [a-z0-9]): {key!r:.80}")
    assert isinstance(key, str)
    return key


def namespace(session: str) -> str:
    """A name for ``session`` that is safe in a file name, a Redis key and a glob.

    Session ids come from users, so they may hold ``/``, ``..``, ``:``, glob
    characters, NUL, any Unicode (lone surrogates too) or be very long. An id
    that is already safe (lowercase ASCII letters, digits, ``.``, ``_``, ``-``,
    starting with a letter or digit, at most 64 chars) is its own name, which
    keeps paths readable. Any other id becomes a readable slug, ``~`` and a hash
    of its exact text. Safe names never hold ``~`` and hashed ones always do, so
    the two kinds cannot meet; uppercase is hashed so that ``S1`` and ``s1``
    stay apart on case-insensitive file systems. The name is a pure function of
    the id, so the same session finds its entries again after a restart.
    """
    if not isinstance(session, str):
        raise TypeError(f"a session id is a str, not {type(session).__name__}")
    if _SAFE_SESSION.fullmatch(session):
        return session
    # 80 bits: a second preimage (reaching someone else's entries) is out of reach.
    digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    slug = _UNSAFE_RUN.sub("-", session.lower()).strip("-")[:40].rstrip("-")
    return f"{slug or 'session'}~{digest}"


class Store(ABC):
    """Where the originals of cut tool results are kept, by session and key.

    The contract, the same for every backend:

    - ``put(session, key, data)`` keeps ``data`` byte for byte. An entry is
      never replaced: keys are content hashes, so a second ``put`` of the same
      key is a no-op that only counts as an access. :class:`ValueError` when
      ``key`` is not a recall key (16-64 chars of ``[a-z0-9]``).
    - ``get(session, key)`` returns the bytes, or ``None`` when the entry is
      absent, expired, belongs to another session, or the key is malformed or
      path-like. A bad key is answered, not raised, because it comes from the
      model's recall call; it never reaches the backend, so nothing outside the
      store is ever read.
    - ``path(session, key)`` is a file an agent's own read tool can open, for
      file-backed stores (``file_backed``) when the entry exists; else ``None``.
    - ``find(key, within="")`` is ``get`` for a caller that holds a key but not
      the session that wrote it (the MCP server): the bytes of ``key`` in any
      session whose namespace name (see :func:`namespace`) begins with
      ``within``, or ``None``. A session's keys are hashes keyed by its id, so
      a key names one entry in the whole store. ``within`` is a safe prefix
      (such as a tenant's ``<tenant>-``), ``""`` for the whole store.
    - ``keys(session)`` lists the session's live keys, sorted; listing is not an
      access. ``drop(session)`` removes everything of a session.
    - ``missing(session, keys)`` says which of ``keys`` the store does not hold,
      in one round trip, and counts as an access of those it holds (their TTL
      starts again): a request checks every key its markers name before it goes
      out. With ``sizes`` (the byte length each key's entry must have), an entry
      held at another length is torn (a power loss left it empty or short, and
      ``get`` verified against its key reads it as missing): it is removed and
      reported missing, so that the ``put`` that follows keeps it whole again.
      ``put_many`` keeps several entries, in one round trip where it can.
    - ``get_many(session, keys)`` is ``get`` of several keys in one round trip:
      a dict of those the store holds (each accessed), absent ones left out.
      A session started again reads back what it worked out before this way.
    - A session id is any string: each backend maps it to its own namespace,
      which it cannot leave and no other id shares.
    - Any failure of the backend (disk full, read-only, database locked or
      damaged, Redis down) raises :class:`~toolbudget.errors.StoreError`, never a
      raw ``OSError`` or driver exception, so a caller can write "the rest could
      not be kept" instead of crashing. A closed store raises it too.
    - Every method is safe to call from several threads.

    ``url`` names the store for messages and logs (a password in it is masked).
    A store is a context manager that closes it.
    """

    url: str
    file_backed: bool = False

    def __init__(self) -> None:
        self._closed = False
        self._close_lock = threading.Lock()

    # The public methods check what every backend must check, once, here.

    def put(self, session: str, key: str, data: bytes | bytearray | memoryview) -> None:
        """Keep ``data`` under ``key``; a no-op if the entry exists."""
        key = check_key(key)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"store data is bytes, not {type(data).__name__}")
        self._check_session(session)
        self._check_open()
        self._put(session, key, bytes(data))

    def get(self, session: str, key: str) -> bytes | None:
        """The bytes kept under ``key``, or ``None``."""
        self._check_session(session)
        if not is_key(key):
            return None
        self._check_open()
        return self._get(session, key)

    def find(self, key: str, within: str = "") -> bytes | None:
        """The bytes kept under ``key`` by any session whose namespace begins with ``within``."""
        if not isinstance(within, str) or not _SAFE_PREFIX.fullmatch(within):
            raise ValueError(f"a namespace prefix is up to 64 of [a-z0-9._-], not {within!r:.80}")
        if not is_key(key):
            return None
        self._check_open()
        return self._find(key, within)

    def path(self, session: str, key: str) -> str | None:
        """A readable file holding the entry, for file-backed stores."""
        self._check_session(session)
        if not self.file_backed or not is_key(key):
            return None
        self._check_open()
        return self._path(session, key)

    def put_many(self, session: str, items: dict[str, bytes], check: list[str] | None = None) -> set[str]:
        """Keep every ``key: data`` of ``items``; returns the keys not held afterwards.

        Entries that exist are only accessed. The keys of ``check`` are
        looked at after the writes, in the same round trip where the backend
        can: a store that evicts (Redis under ``maxmemory``) may drop an old
        entry to make room for a new one. :class:`StoreError` when the store
        failed as a whole (then none can be counted on).
        """
        for key, data in items.items():
            check_key(key)
            if not isinstance(data, bytes):
                raise TypeError(f"store data is bytes, not {type(data).__name__}")
        self._check_session(session)
        self._check_open()
        rest = [key for key in dict.fromkeys(check or []) if is_key(key) and key not in items]
        return self._put_many(session, items, rest)

    def get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        """The bytes of each of ``keys`` the store holds, in one round trip; absent keys are left out."""
        return self._batch(session, keys, self._get_many)

    def _batch(
        self, session: str, keys: list[str], read: Callable[[str, list[str]], dict[str, bytes]]
    ) -> dict[str, bytes]:
        """``read`` of the well-formed ``keys``, each once, after the checks every read makes."""
        self._check_session(session)
        wanted = [key for key in dict.fromkeys(keys) if is_key(key)]
        self._check_open()
        return read(session, wanted) if wanted else {}

    def missing(self, session: str, keys: list[str], sizes: Mapping[str, int] | None = None) -> set[str]:
        """Which of ``keys`` the store does not hold; the ones it holds are accessed.

        With ``sizes``, an entry of another byte length than its size there is
        removed and counted as missing (see the class's contract).
        """
        self._check_session(session)
        wanted: list[str] = []
        bad: set[str] = set()  # never a backend's: missing
        for key in dict.fromkeys(keys):
            if is_key(key):
                wanted.append(key)
            else:
                bad.add(key)
        self._check_open()
        if not wanted:
            absent: set[str] = set()
        elif sizes is None:
            absent = self._missing(session, wanted)
        else:
            held = self._sizes(session, wanted)
            torn = sorted(
                key for key, size in held.items() if size is not None and sizes.get(key, size) != size
            )
            if torn:
                self._discard(session, torn)
            absent = {key for key in wanted if key not in held}
            absent.update(torn)
        if bad:
            absent |= bad
        return absent

    def reads_inline(self, session: str) -> bool:
        """Whether :meth:`peek_many` may run on the caller's own thread (see :meth:`checks_inline`).

        A session started again reads back what the one before it kept (its
        previews, its schedule's decisions) in one or two batches; on a store
        that cannot hang, the trips to the worker and back cost that request
        more than the reads. ``False`` by default.
        """
        return False

    def peek_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        """:meth:`get_many`, writing nothing where the backend would note the use (a read made on
        the caller's thread, :meth:`reads_inline`)."""
        return self._batch(session, keys, self._peek_many)

    def checks_inline(self, session: str) -> bool:
        """Whether :meth:`missing` of ``session``'s keys may run on the caller's own thread now.

        A session runs every store call on a worker thread it waits for only
        as long as the request has left (see :mod:`toolbudget.store.guard`),
        which costs each request a trip there and back: several times the
        JSON round trip of a small request. A backend says ``True`` only when
        the check cannot wait on anything that may hang (no network, no lock
        another process holds, no mount that may stop answering) and writes
        nothing; then the per-request check of the keys the markers name is
        made where the request is. ``False`` by default.
        """
        return False

    def idle(self) -> bool:
        """Do one step of work a write left for a moment when no call waits; returns whether more
        is left. The store's worker calls it between calls (see
        :class:`~toolbudget.store.guard.StoreGuard`). Nothing by default."""
        return False

    def location(self, session: str, key: str) -> str | None:
        """Where a file-backed store keeps (or will keep) ``key``, without looking; else ``None``."""
        return None

    def keys(self, session: str) -> list[str]:
        """The session's live keys, sorted."""
        self._check_session(session)
        self._check_open()
        return sorted(self._keys(session))

    def drop(self, session: str) -> None:
        """Remove every entry of the session; nothing to remove is not an error."""
        self._check_session(session)
        self._check_open()
        self._drop(session)

    def close(self) -> None:
        """Release the backend; later calls raise :class:`StoreError`. Idempotent."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.url} is closed")

    @staticmethod
    def _check_session(session: object) -> None:
        if not isinstance(session, str):
            raise TypeError(f"a session id is a str, not {type(session).__name__}")

    # What a backend implements; keys are valid and the store is open.

    @abstractmethod
    def _put(self, session: str, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _get(self, session: str, key: str) -> bytes | None: ...

    def _path(self, session: str, key: str) -> str | None:
        return None

    def _put_many(self, session: str, items: dict[str, bytes], check: list[str]) -> set[str]:
        """The writes, then a look at ``check``; a backend with pipelines does both in one trip."""
        failed = self._put_each(session, items) if items else set()
        return failed | (self._missing(session, check) if check else set())

    def _put_each(self, session: str, items: dict[str, bytes]) -> set[str]:
        """Write each entry; the keys that failed, or :class:`StoreError` when all of them did."""
        failed: dict[str, StoreError] = {}
        for key, data in items.items():
            try:
                self._put(session, key, data)
            except StoreError as error:
                failed[key] = error
        if failed and len(failed) == len(items):
            raise next(iter(failed.values()))
        return set(failed)

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        return {key for key in keys if self._get(session, key) is None}

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        """The byte length of each of ``keys`` held, accessed as ``_missing`` does; in one trip.

        ``None`` where the backend cannot tell it without reading the entry: such an entry is
        only checked for existence (a backend of one's own that implements nothing more).
        """
        absent = self._missing(session, keys)
        return {key: None for key in keys if key not in absent}

    def _discard(self, session: str, keys: list[str]) -> None:
        """Remove the (torn) entries of ``keys``; one already gone is not an error."""
        raise StoreError(f"the store {self.url} cannot remove a torn entry")

    def _peek_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        """``_get_many`` by default; a backend whose reads note their use leaves that out here."""
        return self._get_many(session, keys)

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        """Each key's ``_get``; a backend with pipelines or ``IN`` queries does it in one trip."""
        found: dict[str, bytes] = {}
        for key in keys:
            data = self._get(session, key)
            if data is not None:
                found[key] = data
        return found

    @abstractmethod
    def _find(self, key: str, within: str) -> bytes | None: ...

    @abstractmethod
    def _keys(self, session: str) -> list[str]: ...

    @abstractmethod
    def _drop(self, session: str) -> None: ...

    def _close(self) -> None:
        return None
