"""The embedded durable backend: one SQLite file, shared by threads and processes.

It is for a proxy or a long-lived agent host on one machine: entries survive
restarts (Headroom lost them on restart, and after 30 minutes), yet the file
cannot grow without bound (Claude Code's tool-result files are never cleaned
up). Two limits keep it in check, both over every session:

- a TTL counted from the last access, so an entry a session still recalls
  stays, and one nobody touched for a week goes;
- a size cap that evicts the least recently used entries when exceeded. An
  entry used in the last minute is never evicted: it may be the other half of
  the request being cut right now, whose marker would then name a lost key.
  When only such entries could make room, the write fails, and the cut says
  plainly that the rest could not be kept.

Expired entries are invisible at once and deleted by the next write. WAL mode
lets readers and a writer work at the same time; a busy timeout makes writers
of other processes wait instead of failing.

Reading never depends on writing: on a full disk or a read-only mount every
entry stays recallable. The schema is created only when it is missing, the
access time a read renews is best effort, and a file that cannot be opened
for writing is opened read-only (writes then fail as store errors, so cuts say
the rest could not be kept).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import InputError, StoreError
from .base import DEFAULT_MAX_BYTES, DEFAULT_TTL, Store, namespace

IN_USE_SECONDS = 60.0
"""Entries used this recently are never evicted to make room."""

__all__ = ["SqliteStore", "default_sqlite_path"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    session BLOB NOT NULL,
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    atime REAL NOT NULL,
    data BLOB NOT NULL,
    UNIQUE (session, key)
);
CREATE INDEX IF NOT EXISTS entries_by_atime ON entries (atime);
CREATE INDEX IF NOT EXISTS entries_by_key ON entries (key);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (name, value) VALUES ('total_bytes', 0);
CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries BEGIN
    UPDATE meta SET value = value + new.size WHERE name = 'total_bytes';
END;
CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
    UPDATE meta SET value = value - old.size WHERE name = 'total_bytes';
END;
"""
# The data column comes last: SQLite reads a row's columns in order, and the
# small ones should not sit behind a megabyte of overflow pages.


def default_sqlite_path() -> Path:
    """Where ``sqlite:`` with no path keeps its file: the user's cache dir."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "toolbudget" / "archive.sqlite"


def _session_id(session: str) -> bytes:
    # The exact id, as bytes: no two ids meet, and lone surrogates are no error.
    return session.encode("utf-8", "surrogatepass")


class SqliteStore(Store):
    """``sqlite:PATH?ttl=SECONDS&max_bytes=N``.

    ``clock`` replaces :func:`time.time` so tests can move time; ``timeout``
    is how long a write waits for another process's lock before it fails.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
    ) -> None:
        super().__init__()
        if not ttl > 0:
            raise InputError(f"the sqlite store's ttl must be a positive number of seconds, not {ttl!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise InputError(f"the sqlite store's max_bytes must be a positive integer, not {max_bytes!r}")
        raw = default_sqlite_path() if path is None or os.fspath(path) == "" else os.fspath(path)
        self.file = Path(os.path.abspath(os.path.expanduser(raw)))
        self.ttl = float(ttl)
        self.max_bytes = max_bytes
        self._clock = clock
        self._timeout = timeout
        options = []
        if self.ttl != DEFAULT_TTL:
            options.append(f"ttl={self.ttl:g}")
        if self.max_bytes != DEFAULT_MAX_BYTES:
            options.append(f"max_bytes={self.max_bytes}")
        self.url = f"sqlite:{self.file}" + ("?" + "&".join(options) if options else "")
        # One connection per process, used by one thread at a time.
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self.read_only = False
        """Opened without write access (a read-only mount, a full disk): entries are only read."""
        with self._lock:
            self._conn = self._connect()

    # -- the backend ---------------------------------------------------------

    def _put(self, session: str, key: str, data: bytes) -> None:
        if self.read_only:
            raise StoreError(f"cannot keep {key}: {self.file} is open read-only (no write access)")
        size = len(data)
        if size > self.max_bytes:
            raise StoreError(f"an entry of {size} bytes is over the store's cap of {self.max_bytes} bytes")
        with self._transaction("keep " + key) as conn:
            now = self._clock()
            # Purging first means a conflict below can only be with a live entry.
            conn.execute("DELETE FROM entries WHERE atime < ?", (now - self.ttl,))
            conn.execute(
                "INSERT INTO entries (session, key, size, atime, data) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (session, key) DO UPDATE SET atime = excluded.atime",
                (_session_id(session), key, size, now, data),
            )
            (total,) = conn.execute("SELECT value FROM meta WHERE name = 'total_bytes'").fetchone()
            if total > self.max_bytes:
                self._evict(conn, total - self.max_bytes, now - IN_USE_SECONDS)

    def _get(self, session: str, key: str) -> bytes | None:
        now = self._clock()
        with self._transaction("read " + key, write=False) as conn:
            row = conn.execute(
                "SELECT id, data FROM entries WHERE session = ? AND key = ? AND atime >= ?",
                (_session_id(session), key, now - self.ttl),
            ).fetchone()
        if row is None:
            return None
        self._touch([row[0]], now)
        data: bytes = row[1]
        return data

    def _find(self, key: str, within: str) -> bytes | None:
        now = self._clock()
        with self._transaction("find " + key, write=False) as conn:
            rows = conn.execute(
                "SELECT id, session, data FROM entries WHERE key = ? AND atime >= ? ORDER BY session",
                (key, now - self.ttl),
            ).fetchall()
        for row_id, session, data in rows:
            if namespace(session.decode("utf-8", "surrogatepass")).startswith(within):
                self._touch([row_id], now)
                found: bytes = data
                return found
        return None

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        now = self._clock()
        found: dict[str, int] = {}
        with self._transaction("check entries", write=False) as conn:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, id FROM entries WHERE session = ? AND atime >= ? AND key IN ({marks})",
                    (_session_id(session), now - self.ttl, *chunk),
                ).fetchall()
                found.update(rows)
        self._touch(list(found.values()), now)
        return {key for key in keys if key not in found}

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        now = self._clock()
        found: dict[str, tuple[int, int]] = {}
        with self._transaction("check entries", write=False) as conn:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT key, id, length(data) FROM entries"
                    f" WHERE session = ? AND atime >= ? AND key IN ({marks})",
                    (_session_id(session), now - self.ttl, *chunk),
                ).fetchall()
                found.update((key, (row_id, size)) for key, row_id, size in rows)
        self._touch([row_id for row_id, _ in found.values()], now)
        return {key: size for key, (_, size) in found.items()}

    def _discard(self, session: str, keys: list[str]) -> None:
        if self.read_only:
            raise StoreError(f"cannot remove a torn entry: {self.file} is open read-only (no write access)")
        with self._transaction(f"remove {len(keys)} torn entries") as conn:
            conn.executemany(
                "DELETE FROM entries WHERE session = ? AND key = ?",
                [(_session_id(session), key) for key in keys],
            )

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        now = self._clock()
        found: dict[str, bytes] = {}
        ids: list[int] = []
        with self._transaction(f"read {len(keys)} entries", write=False) as conn:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    "SELECT key, id, data FROM entries"
                    f" WHERE session = ? AND atime >= ? AND key IN ({marks})",
                    (_session_id(session), now - self.ttl, *chunk),
                ).fetchall()
                for key, row_id, data in rows:
                    found[key] = data
                    ids.append(row_id)
        self._touch(ids, now)
        return found

    def _touch(self, ids: list[int], now: float) -> None:
        """Renew the access time of entries, when the file can be written; reads never depend on it."""
        if not ids or self.read_only:
            return
        with contextlib.suppress(StoreError), self._transaction("renew entries") as conn:
            conn.executemany("UPDATE entries SET atime = ? WHERE id = ?", [(now, i) for i in ids])

    def _keys(self, session: str) -> list[str]:
        with self._transaction("list the keys", write=False) as conn:
            rows = conn.execute(
                "SELECT key FROM entries WHERE session = ? AND atime >= ?",
                (_session_id(session), self._clock() - self.ttl),
            ).fetchall()
        return [key for (key,) in rows]

    def _drop(self, session: str) -> None:
        with self._transaction("drop the session") as conn:
            conn.execute("DELETE FROM entries WHERE session = ?", (_session_id(session),))

    def _close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    # -- SQLite ----------------------------------------------------------------

    def _evict(self, conn: sqlite3.Connection, excess: int, in_use_since: float) -> None:
        """Delete the least recently used entries, of any session, until ``excess`` bytes are freed.

        Entries used since ``in_use_since`` are spared; if the rest cannot free
        enough, the write is refused (the transaction rolls back).
        """
        victims: list[tuple[int]] = []
        rows = conn.execute(
            "SELECT id, size FROM entries WHERE atime < ? ORDER BY atime, id", (in_use_since,)
        )
        for rowid, size in rows:
            victims.append((rowid,))
            excess -= size
            if excess <= 0:
                break
        if excess > 0:
            raise StoreError(f"the store {self.url} is full of entries in use (cap {self.max_bytes} bytes)")
        conn.executemany("DELETE FROM entries WHERE id = ?", victims)

    @contextlib.contextmanager
    def _transaction(self, doing: str, *, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock, with every failure turned into :class:`StoreError`.

        Writes take the write lock up front (``BEGIN IMMEDIATE``): a read that
        later upgrades can fail with "database is locked" without waiting.
        """
        with self._lock:
            if self._conn is None:
                raise StoreError(f"the store {self.url} is closed")
            if self._pid != os.getpid():
                # A connection must not cross a fork; the parent keeps using its own.
                self._pid = os.getpid()
                self._conn = self._connect()
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as error:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise StoreError(f"cannot {doing} in {self.file}: {error}") from error

    def _connect(self) -> sqlite3.Connection:
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return self._connect_rw()
            except StoreError as error:
                if _busy(error) and time.monotonic() < deadline:
                    # Another process is creating the file or its schema right now: SQLite
                    # answers some of those races at once instead of waiting, so wait here.
                    time.sleep(0.01)
                    continue
                if _busy(error):
                    raise
                # No write access (a read-only mount, a full disk, a file we may only read): what
                # the file holds can still be recalled.
                conn = self._connect_ro()
                if conn is None:
                    raise
                self.read_only = True
                return conn

    def _connect_rw(self) -> sqlite3.Connection:
        try:
            try:
                self.file.parent.mkdir(mode=0o700, parents=True)
            except FileExistsError:
                pass
            else:
                os.chmod(self.file.parent, 0o700)  # mkdir honours the umask
            # Tool outputs can hold secrets: the file is private whatever the
            # umask, and SQLite gives its -wal and -shm files the same mode.
            try:
                fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                try:
                    if hasattr(os, "fchmod"):
                        os.fchmod(fd, 0o600)
                finally:
                    os.close(fd)
        except OSError as error:
            why = error.strerror or error
            raise StoreError(f"cannot create the store file {self.file}: {why}") from error
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                self.file, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            self._check_version(version, conn)
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            # In WAL mode NORMAL loses at most the last commits on power loss, never the file.
            conn.execute("PRAGMA synchronous = NORMAL")
            if version < _SCHEMA_VERSION:
                # Only a new (or older) file needs the schema: opening a current one writes nothing.
                conn.execute("BEGIN IMMEDIATE")
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                self._check_version(version, conn)
                for statement in _statements(_SCHEMA):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                conn.execute("COMMIT")
        except sqlite3.Error as error:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            raise StoreError(f"cannot open the store database {self.file}: {error}") from error
        return conn

    def _connect_ro(self) -> sqlite3.Connection | None:
        """A read-only connection to an existing store file, or ``None`` when there is none to read."""
        if not self.file.is_file():
            return None
        for options in ("mode=ro", "mode=ro&immutable=1"):
            conn: sqlite3.Connection | None = None
            try:
                conn = sqlite3.connect(
                    f"{self.file.as_uri()}?{options}",
                    uri=True,
                    timeout=self._timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
                (version,) = conn.execute("PRAGMA user_version").fetchone()
                self._check_version(version, conn)
                conn.execute("SELECT count(*) FROM entries").fetchone()
                return conn
            except (sqlite3.Error, StoreError):
                if conn is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
        return None

    def _check_version(self, version: int, conn: sqlite3.Connection) -> None:
        if version > _SCHEMA_VERSION:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                conn.close()
            raise StoreError(
                f"{self.file} was written by a newer toolbudget (schema {version}); upgrade toolbudget"
            )


def _busy(error: StoreError) -> bool:
    """Whether ``error`` is another connection holding a lock, which passes, not a lack of access."""
    cause = error.__cause__
    return isinstance(cause, sqlite3.OperationalError) and any(
        word in str(cause) for word in ("locked", "busy")
    )


def _statements(script: str) -> Iterator[str]:
    """The statements of ``script``; ``executescript`` would commit our transaction."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement.strip()
            statement = ""
