"""The shared backend: Redis, for several processes or machines behind one proxy.

Every entry is one Redis string ``toolbudget:<session>:<key>`` (the session as
:func:`~toolbudget.store.base.namespace` writes it, so it holds no ``:`` and
no glob character) with a TTL that every put and get renews, so an entry a
session keeps recalling never expires under it. Redis's own ``maxmemory``
policy, not this module, caps the total size.

The ``redis`` package is an extra and is imported only here, when a Redis
store is opened. Timeouts are short: a store that cannot answer in two
seconds costs a recall, not the agent's request. Needs Redis 6.2 or later
(``GETEX``).
"""

from __future__ import annotations

import contextlib
from typing import NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import InputError, StoreConfigError, StoreError
from .base import DEFAULT_TTL, Store, is_key, namespace

__all__ = ["RedisStore", "masked_url"]

PREFIX = "toolbudget"
_INSTALL_HINT = "the redis store needs the redis package: pip install 'toolbudget[redis]'"
_BATCH = 500
_MAX_TTL = 1e12  # seconds; PX must fit in 64 bits


def masked_url(url: str) -> str:
    """``url`` with its password hidden, fit for logs and messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not a URL urllib reads (an unclosed IPv6 bracket): what comes before the last "@" after
        # the scheme may still hold a password.
        scheme, sep, rest = url.partition("://")
        userinfo, at, hostport = rest.rpartition("@")
        if not sep or not at or ":" not in userinfo:
            return url
        return f"{scheme}{sep}{userinfo.partition(':')[0]}:***@{hostport}"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hostport}"))


class RedisStore(Store):
    """``redis://[[user]:password@]host[:port][/db][?ttl=SECONDS]``, or ``rediss://`` for TLS.

    ``ttl`` (seconds) wins over the URL's ``?ttl=``; other query options go to
    the redis client (``socket_timeout``, ``ssl_cert_reqs``...). ``timeout``
    bounds connecting and every command.
    """

    def __init__(self, url: str, *, ttl: float | None = None, timeout: float = 2.0) -> None:
        super().__init__()
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as error:
            raise StoreConfigError(_INSTALL_HINT) from error
        try:
            parts = urlsplit(url)
        except ValueError as error:  # an unclosed IPv6 bracket
            raise InputError(f"bad redis URL {masked_url(url)}: {error}") from error
        if parts.scheme not in ("redis", "rediss"):
            raise InputError(f"not a redis URL (redis://host:port/db): {masked_url(url)}")
        query = parse_qsl(parts.query, keep_blank_values=True)
        url_ttl = [value for name, value in query if name == "ttl"]
        if ttl is None and url_ttl:
            ttl = _parse_ttl(url_ttl[-1], url)
        self.ttl = DEFAULT_TTL if ttl is None else float(ttl)
        if not 0.001 <= self.ttl <= _MAX_TTL:
            raise InputError(f"the redis store's ttl must be a positive number of seconds, not {ttl!r}")
        client_url = urlunsplit(parts._replace(query=urlencode([(n, v) for n, v in query if n != "ttl"])))
        self.url = masked_url(url)
        self._ttl_ms = round(self.ttl * 1000)
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        try:
            client = redis.Redis.from_url(
                client_url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # One quick retry replaces a pooled connection the server has
                # closed; more would only make a dead server slower to report.
                retry=Retry(NoBackoff(), 1),
            )
        except (ValueError, TypeError) as error:
            raise InputError(f"bad redis URL {self.url}: {error}") from error
        # The client connects lazily: a Redis that is down at start-up costs
        # recalls until it is back, not the start of the proxy.
        self._client: redis.Redis = client

    # -- the backend ---------------------------------------------------------

    def _put(self, session: str, key: str, data: bytes) -> None:
        name = self._name(session, key)
        try:
            with self._client.pipeline(transaction=False) as pipe:
                pipe.set(name, data, px=self._ttl_ms, nx=True)
                pipe.pexpire(name, self._ttl_ms)  # an existing entry was just used again
                pipe.execute()
        except self._errors as error:
            self._fail(f"keep {key}", error)

    def _get(self, session: str, key: str) -> bytes | None:
        try:
            value = self._client.getex(self._name(session, key), px=self._ttl_ms)
        except self._errors as error:
            self._fail(f"read {key}", error)
        if value is None or isinstance(value, bytes):
            return value
        raise StoreError(f"unexpected reply from {self.url}: {type(value).__name__}")

    def _put_many(self, session: str, items: dict[str, bytes], check: list[str]) -> set[str]:
        """The writes and the look afterwards in one pipeline: one round trip."""
        keys = [*items, *check]
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for key, data in items.items():
                    pipe.set(self._name(session, key), data, px=self._ttl_ms, nx=True)
                # After every write: an entry evicted to make room for a later one shows here.
                for key in keys:
                    pipe.pexpire(self._name(session, key), self._ttl_ms)
                found = pipe.execute()[len(items) :]
        except self._errors as error:
            self._fail(f"keep {len(items)} entries", error)
        return {key for key, held in zip(keys, found, strict=True) if not held}

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        # PEXPIRE both renews an entry and says whether it exists: one round trip for all.
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.pexpire(self._name(session, key), self._ttl_ms)
                found = pipe.execute()
        except self._errors as error:
            self._fail(f"check {len(keys)} entries", error)
        return {key for key, held in zip(keys, found, strict=True) if not held}

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        # PEXPIRE renews an entry and says whether it exists, STRLEN its length: one round trip.
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    name = self._name(session, key)
                    pipe.pexpire(name, self._ttl_ms)
                    pipe.strlen(name)
                replies = pipe.execute()
        except self._errors as error:
            self._fail(f"check {len(keys)} entries", error)
        return {
            key: int(size) for key, held, size in zip(keys, replies[::2], replies[1::2], strict=True) if held
        }

    def _discard(self, session: str, keys: list[str]) -> None:
        try:
            self._client.delete(*(self._name(session, key) for key in keys))
        except self._errors as error:
            self._fail(f"remove {len(keys)} torn entries", error)

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        # GETEX reads and renews each entry; the pipeline makes them one round trip.
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.getex(self._name(session, key), px=self._ttl_ms)
                values = pipe.execute()
        except self._errors as error:
            self._fail(f"read {len(keys)} entries", error)
        found: dict[str, bytes] = {}
        for key, value in zip(keys, values, strict=True):
            if isinstance(value, bytes):
                found[key] = value
            elif value is not None:
                raise StoreError(f"unexpected reply from {self.url}: {type(value).__name__}")
        return found

    def _find(self, key: str, within: str) -> bytes | None:
        # No namespace holds ":", so the pattern's "*" stays inside the namespace.
        pattern = f"{PREFIX}:{within}*:{key}".encode("ascii")
        try:
            names = sorted(
                name if isinstance(name, bytes) else name.encode()
                for name in self._client.scan_iter(match=pattern, count=_BATCH)
            )
            for name in names:
                value = self._client.getex(name, px=self._ttl_ms)
                if isinstance(value, bytes):
                    return value
        except self._errors as error:
            self._fail(f"find {key}", error)
        return None

    def _keys(self, session: str) -> list[str]:
        start = len(self._head(session))
        return [name[start:].decode("ascii") for name in self._scan(session)]

    def _drop(self, session: str) -> None:
        names = list(self._scan(session))
        try:
            for start in range(0, len(names), _BATCH):
                # UNLINK frees big values in the background instead of blocking the server.
                self._client.unlink(*names[start : start + _BATCH])
        except self._errors as error:
            self._fail("drop the session", error)

    def _close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._client.close()

    # -- Redis -----------------------------------------------------------------

    @staticmethod
    def _head(session: str) -> bytes:
        return f"{PREFIX}:{namespace(session)}:".encode("ascii")

    def _name(self, session: str, key: str) -> bytes:
        return self._head(session) + key.encode("ascii")

    def _scan(self, session: str) -> list[bytes]:
        """The names of the session's entries; SCAN does not block the server as KEYS would."""
        head = self._head(session)
        found: set[bytes] = set()  # SCAN may return a name twice
        try:
            for name in self._client.scan_iter(match=head + b"*", count=_BATCH):
                name = name.encode() if isinstance(name, str) else name
                # Only head + key is an entry: not another program's name under our prefix.
                if name.startswith(head) and is_key(name[len(head) :].decode("ascii", "replace")):
                    found.add(name)
        except self._errors as error:
            self._fail("list the session's keys", error)
        return list(found)

    def _fail(self, doing: str, error: BaseException) -> NoReturn:
        raise StoreError(f"cannot {doing} in {self.url}: {error}") from error


def _parse_ttl(value: str, url: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InputError(f"the ttl in {masked_url(url)} is not a number of seconds: {value!r}") from None
