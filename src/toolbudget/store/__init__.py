"""Archive stores for the originals of cut tool results, opened by URL.

One URL names a store wherever a store is configured (CLI option, proxy
setting, SDK argument), so the four backends are interchangeable:

=============================================  =====================================================
``memory:``                                    this process only; tests and one-shot runs
``dir:PATH?ttl=SECONDS&sync=1`` (see below)     files an agent's read tool can open; the default
``sqlite:PATH?ttl=SECONDS&max_bytes=N``        one durable file on this machine, with TTL and cap
``redis://host:port/db?ttl=SECONDS``           shared by processes and machines (``rediss://``: TLS)
=============================================  =====================================================

``dir:`` alone is ``toolbudget/archives`` in the user's cache directory
(``$XDG_CACHE_HOME`` or ``~/.cache``), private to the user. ``sync=1``
flushes each entry to the disk as it is written (safe against a power loss;
without it, against a killed process only, at a fraction of the cost).

A URL that cannot name a store (no scheme, an unknown one, bad options) is
the caller's mistake and raises :class:`~toolbudget.errors.InputError` (a
``ValueError``); a store that cannot be opened (a path inside a file, a
damaged database, a missing ``redis`` package) raises
:class:`~toolbudget.errors.StoreError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl

from ..errors import InputError
from .base import DEFAULT_MAX_BYTES, DEFAULT_TTL, Store
from .dir import DirStore, default_dir_root
from .memory import MemoryStore
from .redis import RedisStore
from .sqlite import SqliteStore, default_sqlite_path

__all__ = ["DirStore", "MemoryStore", "RedisStore", "SqliteStore", "Store", "open_store", "store_path"]

_SCHEMES = "memory:, dir:PATH, sqlite:PATH or redis://HOST:PORT/DB"


def open_store(url: str | None = None) -> Store:
    """The store ``url`` names; ``None`` is ``dir:``, files in the user's cache directory."""
    if url is None:
        return DirStore()
    if not isinstance(url, str):
        raise InputError(f"a store URL is a string, not {type(url).__name__}")
    scheme, colon, rest = url.partition(":")
    if not colon or not scheme:
        raise InputError(f"not a store URL: {url!r:.200}; use {_SCHEMES}")
    scheme = scheme.lower()
    if scheme == "memory":
        if rest:
            raise InputError(f"the memory store takes no path or options: {url!r:.200}")
        return MemoryStore()
    if scheme == "dir":
        path, _, query = _local_path(url, rest).partition("?")
        sync = _flag(url, query, "sync")
        ttl, _ = _options(url, query, ("ttl", "sync"))
        return DirStore(path or None, ttl=ttl, sync=sync)
    if scheme == "sqlite":
        path, _, query = _local_path(url, rest).partition("?")
        ttl, max_bytes = _options(url, query, ("ttl", "max_bytes"))
        return SqliteStore(path or None, ttl=ttl, max_bytes=max_bytes)
    if scheme in ("redis", "rediss"):
        return RedisStore(url)
    raise InputError(f"unknown store {scheme + ':'!r} in {url!r:.200}; use {_SCHEMES}")


def store_path(url: str | None = None) -> Path | None:
    """Where on this machine the store ``url`` keeps its entries (``None``: not in a local file).

    What a command that only reads asks before it opens a store, since
    opening a directory or SQLite store makes it: recalling from a store that
    was never written to is a mistake in the URL, not a new empty store.
    """
    if url is None:
        return default_dir_root()
    scheme, colon, rest = url.partition(":")
    scheme = scheme.lower()
    if not colon or scheme not in ("dir", "sqlite"):
        return None
    path = _local_path(url, rest).partition("?")[0]
    if not path:
        return default_dir_root() if scheme == "dir" else default_sqlite_path()
    return Path(os.path.abspath(os.path.expanduser(path)))


def _local_path(url: str, rest: str) -> str:
    """The path of ``dir:PATH`` or ``sqlite:PATH``; ``dir:///abs`` is accepted too."""
    if not rest.startswith("//"):
        return rest
    host, slash, path = rest[2:].partition("/")
    if host not in ("", "localhost"):
        raise InputError(f"a local store has no host: {url!r:.200}; write it {url.partition(':')[0]}:/path")
    return slash + path


def _flag(url: str, query: str, name: str) -> bool:
    """A ``name=0`` / ``name=1`` option of ``query``; absent is off."""
    values = [value for key, value in parse_qsl(query, keep_blank_values=True) if key == name]
    if not values:
        return False
    if values[-1] not in ("0", "1"):
        raise InputError(f"option {name} in {url!r:.200} is 0 or 1, not {values[-1]!r}")
    return values[-1] == "1"


def _options(url: str, query: str, known: tuple[str, ...]) -> tuple[float, int]:
    ttl, max_bytes = DEFAULT_TTL, DEFAULT_MAX_BYTES
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in known:
            takes = " and ".join(known)
            raise InputError(
                f"unknown option {name!r} in {url!r:.200}; {url.partition(':')[0]} takes {takes}"
            )
        if name == "sync":
            continue  # a flag, read by _flag
        try:
            if name == "ttl":
                ttl = float(value)
            else:
                max_bytes = int(value)
        except ValueError:
            raise InputError(f"option {name} in {url!r:.200} is not a number: {value!r}") from None
    if not ttl > 0:
        raise InputError(f"the ttl in {url!r:.200} must be a positive number of seconds")
    return ttl, max_bytes
