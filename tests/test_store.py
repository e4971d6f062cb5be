"""The archive stores: one contract suite run against every backend, then what only one backend promises.

The contract tests take the ``store`` fixture, parametrized over memory, dir,
sqlite and a real redis-server, so a backend that drifts from the others fails
the same test the others pass.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redis_server import MISSING_REASON, RedisServer, free_port, redis_server_binary, start_redis_server
from toolbudget import Session
from toolbudget.errors import InputError, StoreError
from toolbudget.marker import MARKER_RE
from toolbudget.store import DirStore, MemoryStore, RedisStore, SqliteStore, Store, open_store
from toolbudget.store.base import DEFAULT_TTL, namespace
from toolbudget.store.dir import PARTS_EVERY, RACY_NS

if TYPE_CHECKING:
    import redis

KEY = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"
THIRD = "00112233445566778899aabbccddeeff"
REPO = Path(__file__).resolve().parents[1]

HOSTILE_SESSIONS = [
    "../x",
    "a/b",
    "..",
    ".",
    "",
    "/etc",
    "C:\\Windows",
    "x" * 10_000,
    "日本語のセッション",
    "emoji-\U0001f600",
    "\x00",
    "a\nb",
    "*",
    "[a-z]*",
    "a:b",
    "toolbudget:s1",
    "S1",
    "s1",
    "s1~0123456789abcdef0123",
    "\ud800",
    " ",
    "-rf",
]

MALFORMED_KEYS = [
    "",
    "short",
    "0123456789abcde",  # 15 chars
    "a" * 65,
    KEY.upper(),
    KEY[:-1] + "G",
    "../../etc/passwd",
    "../../../../../../etc/passwd",
    "a/b",
    KEY + "/..",
    KEY + "\n",
    " " + KEY,
    KEY + ".txt",
    "*",
    "\uff10" * 16,  # fullwidth digits are not [0-9]
    "/" + KEY,
]


def _missing(reason: str) -> None:
    """Skip locally; in CI a missing Redis must fail, or the Redis store would go untested unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the Redis tests")
    pytest.skip(reason)


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_package() -> None:
    try:
        import redis  # noqa: F401
    except ImportError:
        _missing("the redis package is not installed (pip install 'toolbudget[redis]')")


@pytest.fixture(scope="session")
def redis_server(redis_package: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if redis_server_binary() is None:
        _missing(MISSING_REASON)
    server = start_redis_server(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def raw_redis(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A plain client on a server emptied for this test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


@dataclass
class Backend:
    name: str
    url: str
    tmp: Path

    def open(self) -> Store:
        return open_store(self.url)

    def inside(self, path: Path) -> bool:
        """Whether ``path`` is a file this backend may have written."""
        if self.name == "dir":
            return path.is_relative_to(self.tmp / "store")
        if self.name == "sqlite":
            return path.name.startswith("store.sqlite")
        return False


def _backend(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Backend:
    if name == "memory":
        return Backend(name, "memory:", tmp_path)
    if name == "dir":
        return Backend(name, f"dir:{tmp_path / 'store'}", tmp_path)
    if name == "sqlite":
        return Backend(name, f"sqlite:{tmp_path / 'store.sqlite'}", tmp_path)
    request.getfixturevalue("raw_redis")
    server: RedisServer = request.getfixturevalue("redis_server")
    return Backend(name, server.url, tmp_path)


@pytest.fixture(params=["memory", "dir", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _backend(request, request.param, tmp_path)


@pytest.fixture(params=["dir", "sqlite", "redis"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _backend(request, request.param, tmp_path)


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    with backend.open() as opened:
        yield opened


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- the contract, for every backend -------------------------------------------------------------------

PAYLOADS = {
    "empty": b"",
    "nul": b"\x00\x00a\x00",
    "not-utf8": b"\xff\xfe\x80\xc3(\xa0\xa1",
    "all-bytes": bytes(range(256)) * 4,
    "text": "naïve ☃ text\r\nwith lines\n".encode() * 100,
    "5mb": os.urandom(5 * 1024 * 1024),
}


def test_missing_with_sizes_takes_an_entry_of_another_length_for_torn(store: Store) -> None:
    whole = b"the whole original\n" * 50
    store.put("s1", KEY, whole[:7])  # what a power loss may leave under the key
    assert store.missing("s1", [KEY]) == set()  # existence alone says it is there
    assert store.missing("s1", [KEY], {KEY: len(whole)}) == {KEY}
    # Reported missing, it is kept again whole by the put that follows.
    assert store.put_many("s1", {KEY: whole}) == set()
    assert store.get("s1", KEY) == whole
    assert store.missing("s1", [KEY], {KEY: len(whole)}) == set()
    # A key without a size there is only checked for existence.
    assert store.missing("s1", [KEY, OTHER], {}) == {OTHER}


def test_a_backend_of_ones_own_that_cannot_tell_sizes_checks_existence_only() -> None:
    class Minimal(Store):
        url = "minimal:"

        def __init__(self) -> None:
            super().__init__()
            self.entries: dict[tuple[str, str], bytes] = {}

        def _put(self, session: str, key: str, data: bytes) -> None:
            self.entries.setdefault((session, key), data)

        def _get(self, session: str, key: str) -> bytes | None:
            return self.entries.get((session, key))

        def _find(self, key: str, within: str) -> bytes | None:
            return None

        def _keys(self, session: str) -> list[str]:
            return [k for s, k in self.entries if s == session]

        def _drop(self, session: str) -> None:
            self.entries.clear()

    store = Minimal()
    store.put("s1", KEY, b"short")
    assert store.missing("s1", [KEY, OTHER], {KEY: 500, OTHER: 3}) == {OTHER}


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_round_trip_is_byte_for_byte(store: Store, payload: bytes) -> None:
    store.put("s1", KEY, payload)
    assert store.get("s1", KEY) == payload
    assert store.keys("s1") == [KEY]


def test_bytes_like_data_is_accepted_and_other_data_refused(store: Store) -> None:
    store.put("s1", KEY, bytearray(b"from a bytearray"))
    store.put("s1", OTHER, memoryview(b"from a memoryview"))
    assert store.get("s1", KEY) == b"from a bytearray"
    assert store.get("s1", OTHER) == b"from a memoryview"
    with pytest.raises(TypeError):
        store.put("s1", "1" * 32, "text is not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.get(42, KEY)  # type: ignore[arg-type]


def test_put_is_idempotent_and_never_replaces(store: Store) -> None:
    store.put("s1", KEY, b"first")
    store.put("s1", KEY, b"first")
    assert store.get("s1", KEY) == b"first"
    store.put("s1", KEY, b"second")
    assert store.get("s1", KEY) == b"first"
    assert store.keys("s1") == [KEY]


def test_unknown_key_is_none(store: Store) -> None:
    assert store.get("s1", KEY) is None
    store.put("s1", KEY, b"x")
    assert store.get("s1", OTHER) is None
    assert store.path("s1", OTHER) is None


def test_get_many_reads_what_is_held_in_one_call(store: Store) -> None:
    third = "a" * 32
    store.put_many("s1", {KEY: b"one", OTHER: b""})
    store.put("s2", third, b"elsewhere")
    found = store.get_many("s1", [OTHER, third, KEY, "../x", KEY])
    assert found == {KEY: b"one", OTHER: b""}
    assert store.get_many("s1", []) == {} and store.get_many("nobody", [KEY]) == {}
    assert store.get_many("s2", [third, KEY]) == {third: b"elsewhere"}


def test_another_session_cannot_read_an_entry(store: Store) -> None:
    store.put("s1", KEY, b"secret of s1")
    assert store.get("s2", KEY) is None
    assert store.path("s2", KEY) is None
    assert store.keys("s2") == []


def test_find_answers_a_key_without_its_session_within_a_prefix_only(store: Store) -> None:
    tenant_a, tenant_b = "0123456789abcdef-", "fedcba9876543210-"
    store.put(tenant_a + "chat", KEY, b"kept by a")
    store.put(tenant_b + "Chat With Spaces/and slashes", OTHER, b"kept by b")  # a hashed namespace
    assert store.find(KEY) == b"kept by a"
    assert store.find(KEY, tenant_a) == b"kept by a"
    assert store.find(KEY, tenant_b) is None  # another tenant's key is not found
    assert store.find(OTHER, tenant_b) == b"kept by b"  # the slug keeps the tenant's prefix
    assert store.find(OTHER, tenant_a) is None
    assert store.find("1" * 32) is None
    assert store.find("../" + KEY) is None  # a bad key is answered, never looked up
    with pytest.raises(ValueError):
        store.find(KEY, "../")


@pytest.mark.parametrize("key", MALFORMED_KEYS)
def test_malformed_and_path_like_keys(store: Store, key: str) -> None:
    assert store.get("s1", key) is None
    assert store.path("s1", key) is None
    with pytest.raises(ValueError):
        store.put("s1", key, b"x")
    assert store.keys("s1") == []


def test_non_string_keys_are_malformed(store: Store) -> None:
    assert store.get("s1", None) is None  # type: ignore[arg-type]
    assert store.get("s1", KEY.encode()) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.put("s1", None, b"x")  # type: ignore[arg-type]


def test_keys_are_sorted_and_drop_removes_one_session(store: Store) -> None:
    keys = ["c" * 16, "a" * 16, "b" * 64, "0" * 20]
    for key in keys:
        store.put("s1", key, key.encode())
    store.put("s2", KEY, b"s2")
    assert store.keys("s1") == sorted(keys)
    store.drop("s1")
    assert store.keys("s1") == []
    assert all(store.get("s1", key) is None for key in keys)
    assert store.get("s2", KEY) == b"s2"
    store.drop("s1")  # nothing left to drop
    store.drop("never-seen")
    store.put("s1", KEY, b"again")  # a dropped session starts afresh
    assert store.get("s1", KEY) == b"again"


def test_hostile_session_ids_stay_inside_and_apart(store: Store, backend: Backend) -> None:
    for index, session in enumerate(HOSTILE_SESSIONS):
        store.put(session, KEY, f"entry {index}".encode())
    for index, session in enumerate(HOSTILE_SESSIONS):
        assert store.get(session, KEY) == f"entry {index}".encode(), session[:40]
        assert store.keys(session) == [KEY]
    written = [path for path in backend.tmp.rglob("*") if path.is_file()]
    assert all(backend.inside(path) for path in written), written
    if isinstance(store, DirStore):
        sessions = [path for path in store.root.iterdir() if not path.name.startswith(".")]
        assert len(sessions) == len(HOSTILE_SESSIONS)
        assert all(path.name.startswith("toolbudget-") and path.is_dir() for path in sessions)
    store.drop("../x")
    store.drop("..")
    assert store.get("../x", KEY) is None
    assert store.get("x", KEY) is None
    assert store.get("s1", KEY) == f"entry {HOSTILE_SESSIONS.index('s1')}".encode()
    assert store.get("a/b", KEY) == f"entry {HOSTILE_SESSIONS.index('a/b')}".encode()


def test_concurrent_puts_from_threads(store: Store) -> None:
    def work(worker: int) -> None:
        for index in range(12):
            key = f"{worker:02d}{index:030d}"
            store.put(f"s{worker % 3}", key, key.encode() * 100)
            store.put("shared", KEY, b"the same bytes from every thread")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(work, range(8)))
    for worker in range(8):
        for index in range(12):
            key = f"{worker:02d}{index:030d}"
            assert store.get(f"s{worker % 3}", key) == key.encode() * 100
    assert sum(len(store.keys(f"s{n}")) for n in range(3)) == 96
    assert store.get("shared", KEY) == b"the same bytes from every thread"


def test_a_closed_store_raises_store_error(backend: Backend) -> None:
    with backend.open() as store:
        store.put("s1", KEY, b"x")
    for call in (
        lambda: store.put("s1", OTHER, b"x"),
        lambda: store.get("s1", KEY),
        lambda: store.get_many("s1", [KEY]),
        lambda: store.keys("s1"),
        lambda: store.drop("s1"),
    ):
        with pytest.raises(StoreError, match="closed"):
            call()
    store.close()  # twice is fine


def test_path_only_for_file_backed_stores(store: Store) -> None:
    store.put("s1", KEY, b"x")
    path = store.path("s1", KEY)
    assert store.file_backed == isinstance(store, DirStore)
    if store.file_backed:
        assert path is not None
        assert Path(path).read_bytes() == b"x"
    else:
        assert path is None


def test_reopening_finds_the_entries(durable: Backend) -> None:
    with durable.open() as first:
        first.put("s1", KEY, b"kept across restarts")
        first.put("../x", OTHER, b"hostile too")
        url = first.url
    with durable.open() as second:
        assert second.get("s1", KEY) == b"kept across restarts"
        assert second.get("../x", OTHER) == b"hostile too"
        assert second.keys("s1") == [KEY]
    with open_store(url) as third:  # the url a store reports opens the same store
        assert third.get("s1", KEY) == b"kept across restarts"


def test_two_instances_share_entries_at_once(durable: Backend) -> None:
    with durable.open() as one, durable.open() as two:
        one.put("s1", KEY, b"written by one")
        assert two.get("s1", KEY) == b"written by one"
        two.put("s1", KEY, b"two loses")
        assert one.get("s1", KEY) == b"written by one"


# -- session namespaces ----------------------------------------------------------------------------------

_NAMESPACE = r"[a-z0-9._~-]{1,64}"


@given(st.text(max_size=300))
def test_namespace_is_safe_and_deterministic(session: str) -> None:
    name = namespace(session)
    assert re.fullmatch(_NAMESPACE, name)
    assert name == namespace(session)
    assert name not in (".", "..")


@given(st.text(max_size=80), st.text(max_size=80))
def test_namespace_never_merges_two_ids(first: str, second: str) -> None:
    if first != second:
        assert namespace(first) != namespace(second)


def test_namespace_keeps_safe_ids_readable_and_hashes_the_rest() -> None:
    assert namespace("s1") == "s1"
    assert namespace("0b1c2d3e-uuid-like.session_1") == "0b1c2d3e-uuid-like.session_1"
    assert namespace("S1") != namespace("s1")
    assert namespace("S1").startswith("s1~")
    assert namespace("../x").startswith("x~")
    assert namespace("").startswith("session~")
    hashed = namespace("a/b")
    assert namespace(hashed) != hashed  # an id shaped like a hashed name is hashed again
    names = {namespace(session) for session in HOSTILE_SESSIONS}
    assert len(names) == len(HOSTILE_SESSIONS)
    with pytest.raises(TypeError):
        namespace(b"s1")  # type: ignore[arg-type]


# -- open_store ----------------------------------------------------------------------------------------


def test_open_store_default_is_the_users_private_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for url in (None, "dir:"):
        with open_store(url) as store:
            assert isinstance(store, DirStore)
            assert store.root == tmp_path / "cache" / "toolbudget" / "archives"
            assert _mode(store.root) == 0o700
            session = f"test-{uuid.uuid4().hex}"
            try:
                store.put(session, KEY, b"x")
                assert store.get(session, KEY) == b"x"
            finally:
                store.drop(session)
            assert not (store.root / f"toolbudget-{session}").exists()


def test_open_store_schemes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_store("memory:"), MemoryStore)
    assert isinstance(open_store("MEMORY:"), MemoryStore)
    with open_store(f"dir://{tmp_path}/a") as store:
        assert isinstance(store, DirStore)
        assert store.root == tmp_path / "a"
    with open_store(f"sqlite:{tmp_path}/db.sqlite?ttl=3600&max_bytes=1000000") as sqlite_store:
        assert isinstance(sqlite_store, SqliteStore)
        assert (sqlite_store.ttl, sqlite_store.max_bytes) == (3600, 1_000_000)
        assert sqlite_store.url == f"sqlite:{tmp_path}/db.sqlite?ttl=3600&max_bytes=1000000"
    with open_store(f"sqlite://{tmp_path}/db2.sqlite") as sqlite_store:  # sqlite:///abs/path
        assert isinstance(sqlite_store, SqliteStore)
        assert sqlite_store.url == f"sqlite:{tmp_path}/db2.sqlite"
        assert (sqlite_store.ttl, sqlite_store.max_bytes) == (DEFAULT_TTL, 1 << 30)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with open_store("sqlite:") as sqlite_store:
        assert isinstance(sqlite_store, SqliteStore)
        assert sqlite_store.file == tmp_path / "cache" / "toolbudget" / "archive.sqlite"
        assert sqlite_store.file.exists()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "nonsense",
        ":memory:",
        "ftp://example/x",
        "C:\\Users\\me\\store",
        "memory:extra",
        "dir://host/path",
        "dir:/tmp/x?max_bytes=5",
        "dir:/tmp/x?ttl=0",
        "sqlite:/tmp/x.sqlite?ttl=soon",
        "sqlite:/tmp/x.sqlite?ttl=-1",
        "sqlite:/tmp/x.sqlite?max_bytes=0",
        "sqlite:/tmp/x.sqlite?max_bytes=1.5",
        "sqlite:/tmp/x.sqlite?max-bytes=10",
        "dir:/tmp/x?sync=yes",
        "sqlite:/tmp/x.sqlite?sync=1",
    ],
)
def test_open_store_rejects_bad_urls_with_input_error(url: str) -> None:
    with pytest.raises(InputError) as caught:
        open_store(url)
    assert isinstance(caught.value, ValueError)


def test_open_store_without_the_redis_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(StoreError, match=r"pip install 'toolbudget\[redis\]'"):
        open_store("redis://127.0.0.1:6379/0")


# -- dir -------------------------------------------------------------------------------------------------


def _mode(path: Path | str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_dir_layout_and_private_modes_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        store = DirStore(tmp_path / "root")
        store.put("s1", KEY, b"original")
        store.put("s1", OTHER, b"other")
    finally:
        os.umask(old)
    session_dir = tmp_path / "root" / "toolbudget-s1"
    file = session_dir / "tool-results" / f"{KEY}.txt"
    assert store.path("s1", KEY) == str(file)
    assert file.read_bytes() == b"original"
    assert _mode(tmp_path / "root") == 0o700
    assert _mode(session_dir) == 0o700
    assert _mode(session_dir / "tool-results") == 0o700
    assert _mode(file) == 0o600
    assert sorted(os.listdir(session_dir / "tool-results")) == sorted([f"{KEY}.txt", f"{OTHER}.txt"])
    assert store.url == f"dir:{tmp_path / 'root'}"


def test_dir_workspace_is_the_session_dir(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    workspace = store.workspace("s1")
    assert workspace == tmp_path / "toolbudget-s1"
    assert workspace.is_dir()
    assert _mode(workspace) == 0o700
    assert store.keys("s1") == []
    store.put("s1", KEY, b"x")
    assert Path(store.path("s1", KEY) or "").parent.parent == workspace
    hostile = store.workspace("../../etc")
    assert hostile.parent == tmp_path
    store.drop("s1")
    assert not workspace.exists()


@pytest.mark.parametrize("count", [3, 40])
def test_dir_check_of_many_keys_sees_removals_replacements_and_strangers(tmp_path: Path, count: int) -> None:
    # Past a few keys the check lists the directory once and remembers each file's length by inode.
    store = DirStore(tmp_path)
    keys = [f"{n:032x}" for n in range(count)]
    whole = {key: f"original {key}\n".encode() * 20 for key in keys}
    sizes = {key: len(data) for key, data in whole.items()}
    assert store.missing("s1", keys, sizes) == set(keys)
    assert store.put_many("s1", whole) == set()
    assert store.missing("s1", keys, sizes) == set()
    results = tmp_path / "toolbudget-s1" / "tool-results"
    gone, torn, odd = keys[0], keys[1], keys[2]
    (results / f"{gone}.txt").unlink()  # a clean, an eviction
    # Another file under the name (what a crash of another writer could leave): its length is looked at.
    (results / f"{torn}.txt").unlink()
    (results / f"{torn}.txt").write_bytes(whole[torn][:5])
    (results / f"{odd}.txt").unlink()
    (results / f"{odd}.txt").mkdir()  # not a regular file
    assert store.missing("s1", keys, sizes) == {gone, torn, odd}
    assert not (results / f"{torn}.txt").exists()  # the check removed the torn one
    assert store.missing("s1", keys) == {gone, torn, odd}
    (results / f"{odd}.txt").rmdir()
    assert store.put_many("s1", {key: whole[key] for key in (gone, torn, odd)}) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert all(store.get("s1", key) == whole[key] for key in keys)
    # A fresh store instance (a new process) finds a torn entry by its length alone.
    (results / f"{keys[-1]}.txt").write_bytes(b"torn")
    assert DirStore(tmp_path).missing("s1", keys, sizes) == {keys[-1]}


def _filled(tmp_path: Path, count: int = 12) -> tuple[DirStore, list[str], dict[str, int], Path]:
    store = DirStore(tmp_path)
    keys = [f"{n:032x}" for n in range(count)]
    whole = {key: f"original {key}\n".encode() * 20 for key in keys}
    assert store.put_many("s1", whole) == set()
    return (
        store,
        keys,
        {key: len(data) for key, data in whole.items()},
        tmp_path / "toolbudget-s1" / "tool-results",
    )


def _age(directory: Path, ns: int) -> int:
    """Set ``directory``'s modification time ``ns`` nanoseconds back from now; returns it."""
    when = time.time_ns() - ns
    os.utime(directory, ns=(when, when))
    return when


@pytest.mark.parametrize("count", [3, 40])
def test_dir_check_trusts_a_quiet_directory_and_sees_every_change_to_it(tmp_path: Path, count: int) -> None:
    store, keys, sizes, results = _filled(tmp_path, count)
    _age(results, 5_000_000_001)  # quiet for five seconds: its time vouches for what it holds
    assert store.missing("s1", keys[:2], sizes) == set()
    assert store.missing("s1", keys, sizes) == set()  # the keys not asked about before are found
    (results / f"{keys[0]}.txt").unlink()  # moves the directory's time on
    assert store.missing("s1", keys, sizes) == {keys[0]}
    # A key not found before is looked at, even in a directory that did not change.
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == {keys[0]}
    new = f"{999:032x}"
    assert store.missing("s1", [*keys, new], {**sizes, new: 5}) == {keys[0], new}


def test_dir_check_trusts_no_time_of_a_network_file_system(tmp_path: Path) -> None:
    # A network file system's client may show another host's removal late: every check looks.
    store, keys, sizes, results = _filled(tmp_path)
    store.local = False
    when = _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == set()
    (results / f"{keys[4]}.txt").unlink()
    os.utime(results, ns=(when, when))  # the time as a stale attribute cache would show it
    assert store.missing("s1", keys, sizes) == {keys[4]}


@pytest.mark.parametrize("ago_ns", [1_000_000, 1_000_000_000])
def test_dir_check_does_not_trust_a_time_too_recent_to_tell_changes_apart(
    tmp_path: Path, ago_ns: int
) -> None:
    # A removal within the same clock tick leaves the directory's time as it was. A time read
    # less than a tick old (1 ms), or one in whole seconds read less than two seconds old (a file
    # system that keeps seconds), cannot vouch: the next check looks again.
    store, keys, sizes, results = _filled(tmp_path)
    store.fine = False  # times kept to the clock tick, as before Linux 6.13 or on other file systems
    when = _age(results, ago_ns)
    if ago_ns >= 1_000_000_000:
        when -= when % 1_000_000_000
        os.utime(results, ns=(when, when))
    assert store.missing("s1", keys, sizes) == set()
    (results / f"{keys[3]}.txt").unlink()
    os.utime(results, ns=(when, when))  # what a change in the same tick would leave
    assert store.missing("s1", keys, sizes) == {keys[3]}


def test_dir_check_judges_a_time_by_when_it_was_read_not_after_the_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The directory changed 1 ms before the check read its time. An entry the look found is
    # removed right after it, in the same clock tick (a coarse clock leaves the time as it
    # was), and the checking thread is then held up past RACY_NS (another thread, a busy
    # machine). The time was too recent to vouch when read: the next check must look again.
    store, keys, sizes, results = _filled(tmp_path, 3)
    store.fine = False  # times kept to the clock tick
    when = _age(results, 1_000_000)
    look = store._look

    def look_then_lose_one(where: str, wanted: list[str]) -> dict[str, int | None]:
        held = look(where, wanted)
        (results / f"{keys[1]}.txt").unlink()
        os.utime(results, ns=(when, when))
        time.sleep(2 * RACY_NS / 1e9)
        return held

    monkeypatch.setattr(store, "_look", look_then_lose_one)
    assert store.missing("s1", keys, sizes) == set()  # all three were there when looked at
    monkeypatch.undo()
    assert store.missing("s1", keys, sizes) == {keys[1]}


def _counting_sizes(store: DirStore, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    looked: list[list[str]] = []
    sizes_of = store._sizes

    def counted(session: str, keys: list[str]) -> dict[str, int | None]:
        looked.append(list(keys))
        return sizes_of(session, keys)

    monkeypatch.setattr(store, "_sizes", counted)
    return looked


def test_dir_check_of_the_same_keys_in_an_unchanged_archive_is_two_stats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, keys, sizes, results = _filled(tmp_path)
    store.put_many("s1", {OTHER: b"\x00toolbudget: a record"})
    keys.append(OTHER)
    looked = _counting_sizes(store, monkeypatch)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert store.missing("s1", list(keys), sizes) == set()
    assert len(looked) == 1  # the first check looked; the next two found nothing changed
    assert store.missing("s1", keys[:3], sizes) == set()  # some of them: each was vouched for
    assert len(looked) == 1
    # An original removed, a record appended: each looks again, and sees.
    (results / f"{keys[5]}.txt").unlink()
    assert store.missing("s1", keys[:3], sizes) == set()
    assert store.missing("s1", keys, sizes) == {keys[5]}
    assert store.missing("s1", keys, sizes) == {keys[5]}  # a check that found one missing vouches for nothing
    assert len(looked) == 4
    store.put_many("s1", {keys[5]: b"back"})
    assert store.missing("s1", keys[:6], None) == set()
    other = DirStore(tmp_path)
    other.put_many("s1", {"ab" * 16: b"\x00toolbudget: another process's record"})
    assert store.missing("s1", keys[:6], None) == set()
    assert len(looked) == 6


def test_dir_check_vouches_only_for_the_keys_and_sizes_it_was_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a check looks at, in an unchanged archive, is exactly what no earlier check vouched
    for: a key it did not find, or found at another size (or at none)."""
    store, keys, sizes, results = _filled(tmp_path)
    looked = _counting_sizes(store, monkeypatch)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == set()
    assert looked == [keys]
    assert store.missing("s1", list(keys), dict(sizes)) == set()  # equal, not the same objects
    assert store.missing("s1", keys[::-1], sizes) == set()  # another order: each was vouched for
    assert store.missing("s1", keys, None) == set()  # found at their sizes: held, whatever size
    assert looked == [keys]
    asked = list(keys)
    assert store.missing("s1", asked, sizes) == set()
    asked.append(f"{777:032x}")  # the caller's own list, changed in place: not what was vouched for
    assert store.missing("s1", asked, sizes) == {asked[-1]}
    assert looked == [keys, [asked[-1]]]  # the new key alone
    # The same keys at another length (what a torn entry would be): that one looked at, and missing.
    assert store.missing("s1", keys, sizes) == set()
    assert looked[-1] == keys  # the missing key dropped the vouching: all looked at again
    assert store.missing("s1", keys, {**sizes, keys[2]: sizes[keys[2]] + 1}) == {keys[2]}
    assert looked[-1] == [keys[2]]
    # Found without sizes, then asked with them: every size is looked at.
    (results / f"{keys[2]}.txt").write_bytes(f"original {keys[2]}\n".encode() * 20)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, None) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert looked[-2:] == [keys, keys]


def test_dir_check_of_keys_added_to_those_vouched_for_looks_at_the_new_ones_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that cuts names the last request's keys and its new ones: only those are looked
    at while the archive is unchanged, and a change to it has every key looked at again."""
    store, keys, sizes, results = _filled(tmp_path)
    looked = _counting_sizes(store, monkeypatch)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys[:8], sizes) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert looked == [keys[:8], keys[8:]]
    new = f"{999:032x}"
    assert store.missing("s1", [*keys, new], {**sizes, new: 5}) == {new}
    assert looked[-1] == [new]
    (results / f"{keys[0]}.txt").unlink()  # the archive changes: nothing is vouched for
    assert store.missing("s1", keys, sizes) == {keys[0]}
    assert looked[-1] == keys


def test_dir_check_vouches_for_no_record_the_store_forgot_since(tmp_path: Path) -> None:
    """Forgetting a torn record changes neither the log's inode nor its length: a check made
    after it (another thread's check forgot it) looks again, and finds the record gone."""
    store, keys, _sizes, results = _filled(tmp_path, 3)
    store.put_many("s1", {OTHER: b"\x00toolbudget: a record"})
    asked = [*keys, OTHER]
    _age(results, 5_000_000_001)
    assert store.missing("s1", asked, None) == set()
    store._discard("s1", [OTHER])
    assert store.missing("s1", asked, None) == {OTHER}
    assert store.missing("s1", keys, None) == set()


def test_dir_check_tells_a_size_given_as_none_from_no_size(tmp_path: Path) -> None:
    """A key vouched for without a size, asked about again with ``None`` for one, is looked at,
    as the check of every other store looks at it (and finds it torn)."""
    store, keys, _sizes, results = _filled(tmp_path, 3)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, {}) == set()
    assert store.missing("s1", keys, cast(dict[str, int], {keys[0]: None})) == {keys[0]}


def test_dir_check_of_a_closed_store_fails_even_when_nothing_changed(tmp_path: Path) -> None:
    store, keys, sizes, results = _filled(tmp_path, 3)
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == set()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.missing("s1", keys, sizes)


def test_dir_check_where_times_keep_to_the_tick_vouches_only_with_an_old_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, keys, sizes, results = _filled(tmp_path, 3)
    store.fine = False
    looked = _counting_sizes(store, monkeypatch)
    _age(results, 1_000_000)  # changed a millisecond ago: a change in the same tick would not show
    assert store.missing("s1", keys, sizes) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert len(looked) == 2
    _age(results, 5_000_000_001)
    assert store.missing("s1", keys, sizes) == set()
    assert store.missing("s1", keys, sizes) == set()
    assert len(looked) == 3


def test_the_file_systems_here_keep_fine_grained_times_or_say_they_do_not(tmp_path: Path) -> None:
    # The probe renames a file back and forth in the root and reads its time after each. On this
    # kernel and disk the answer is either; it must match what two changes in a row show.
    store = DirStore(tmp_path)
    first = tmp_path / "a"
    first.write_bytes(b"")
    os.stat(tmp_path)
    first.rename(tmp_path / "b")
    was = os.stat(tmp_path).st_mtime_ns
    (tmp_path / "b").rename(first)
    now = os.stat(tmp_path).st_mtime_ns
    if store.fine:
        assert 0 < now - was < 1_000_000
    assert not list(tmp_path.glob(".toolbudget-probe-*"))


@pytest.mark.parametrize("stranger", ["symlink", "dangling", "directory"])
def test_dir_a_key_whose_place_holds_no_file_is_kept_or_fails(tmp_path: Path, stranger: str) -> None:
    # Something other than a regular file in a key's place (a link a deduplicating tool made,
    # a directory) holds no entry: the check says missing, and the write that keeps it again
    # must then really keep it, or fail, never report it kept.
    store, keys, sizes, results = _filled(tmp_path, 3)
    place = results / f"{keys[0]}.txt"
    whole = place.read_bytes()
    place.unlink()
    if stranger == "symlink":
        (tmp_path / "copy.txt").write_bytes(whole)
        place.symlink_to(tmp_path / "copy.txt")
    elif stranger == "dangling":
        place.symlink_to(tmp_path / "nowhere.txt")
    else:
        place.mkdir()
    assert store.missing("s1", keys, sizes) == {keys[0]}
    if stranger == "directory":
        with pytest.raises(StoreError, match="Is a directory"):
            store.put_many("s1", {keys[0]: whole})
        assert store.missing("s1", keys, sizes) == {keys[0]}
    else:
        assert store.put_many("s1", {keys[0]: whole}) == set()
        assert store.missing("s1", keys, sizes) == set()
        assert store.get("s1", keys[0]) == whole
        assert not place.is_symlink()


def test_dir_keys_ignore_temp_files_and_strangers(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    store.put("s1", KEY, b"x")
    results = tmp_path / "toolbudget-s1" / "tool-results"
    (results / ".abc.part").write_bytes(b"half written")
    (results / "NOTAKEY.txt").write_bytes(b"")
    (results / f"{OTHER}.json").write_bytes(b"")
    assert store.keys("s1") == [KEY]


@pytest.mark.parametrize("trigger", ["put", "keys"])
def test_dir_stale_temp_files_are_removed_and_live_ones_kept(tmp_path: Path, trigger: str) -> None:
    now = [time.time()]
    store = DirStore(tmp_path, clock=lambda: now[0])
    store.put("s1", KEY, b"x")
    results = tmp_path / "toolbudget-s1" / "tool-results"
    old = time.time() - 2 * 3600  # the documented safe age is an hour
    stale = results / ".killed-writer.part"
    stale.write_bytes(b"half written long ago")
    os.utime(stale, (old, old))
    live = results / ".live-writer.part"
    live.write_bytes(b"being written now")
    # Old files that are not temp files of ours are not touched, whatever their age.
    stranger = results / "notes.part"
    stranger.write_bytes(b"")
    os.utime(stranger, (old, old))
    os.utime(results / f"{KEY}.txt", (old, old))
    if trigger == "put":
        # A write lists the directory only now and then: every write's listing made each one
        # cost a read of every entry the session holds.
        store.put("s1", OTHER, b"y")
        assert stale.exists()
        now[0] += PARTS_EVERY
        store.put("s1", THIRD, b"z")
    else:
        assert store.keys("s1") == [KEY]
    left = sorted(os.listdir(results))
    assert ".killed-writer.part" not in left
    assert {".live-writer.part", "notes.part", f"{KEY}.txt"} <= set(left)
    assert store.get("s1", KEY) == b"x"


def test_dir_a_temp_file_that_cannot_be_removed_does_not_fail_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [time.time()]
    store = DirStore(tmp_path, clock=lambda: now[0])
    store.put("s1", KEY, b"x")
    stale = tmp_path / "toolbudget-s1" / "tool-results" / ".stuck.part"
    stale.write_bytes(b"")
    os.utime(stale, (0, 0))
    now[0] += PARTS_EVERY  # the next write looks for stale temp files again
    real_unlink = os.unlink
    tried: list[str] = []

    def refuse(path: str, *args: Any, **kwargs: Any) -> None:
        if str(path).endswith(".stuck.part"):
            tried.append(str(path))
            raise PermissionError(errno.EACCES, "Permission denied")
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    store.put("s1", OTHER, b"y")
    assert tried  # the write did try to remove it
    assert store.keys("s1") == [KEY, OTHER]
    assert stale.exists()


def test_dir_an_existing_file_is_left_as_is(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    store.put("s1", KEY, b"first")
    file = Path(store.path("s1", KEY) or "")
    before = os.stat(file)
    store.put("s1", KEY, b"second")
    after = os.stat(file)
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert file.read_bytes() == b"first"


def test_dir_a_racing_writer_of_the_same_key_keeps_the_first_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirStore(tmp_path)
    store.put("s1", KEY, b"first")
    # Both writers saw no file and both wrote a temp file: the link of the second must fail.
    monkeypatch.setattr(os.path, "lexists", lambda path: False)
    store.put("s1", KEY, b"second")
    monkeypatch.undo()
    assert store.get("s1", KEY) == b"first"
    assert os.listdir(tmp_path / "toolbudget-s1" / "tool-results") == [f"{KEY}.txt"]


def test_dir_without_hard_links_still_publishes_whole_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: str, target: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    store = DirStore(tmp_path)
    store.put("s1", KEY, b"published by rename")
    assert store.get("s1", KEY) == b"published by rename"
    assert os.listdir(tmp_path / "toolbudget-s1" / "tool-results") == [f"{KEY}.txt"]
    assert _mode(tmp_path / "toolbudget-s1" / "tool-results" / f"{KEY}.txt") == 0o600


def test_dir_refuses_a_symlink_planted_as_a_session_dir(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tool-results").mkdir(parents=True)
    (elsewhere / "tool-results" / f"{KEY}.txt").write_bytes(b"planted")
    root = tmp_path / "root"
    root.mkdir()
    (root / "toolbudget-s1").symlink_to(elsewhere)
    store = DirStore(root)
    with pytest.raises(StoreError, match="not a directory"):
        store.put("s1", OTHER, b"x")
    with pytest.raises(StoreError):
        store.get("s1", KEY)
    with pytest.raises(StoreError):
        store.drop("s1")
    assert sorted(os.listdir(elsewhere / "tool-results")) == [f"{KEY}.txt"]


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown to another user needs root")
def test_dir_refuses_a_session_dir_of_another_user(tmp_path: Path) -> None:
    planted = tmp_path / "toolbudget-s1"
    (planted / "tool-results").mkdir(parents=True)
    os.chown(planted, 65534, 65534)
    store = DirStore(tmp_path)
    with pytest.raises(StoreError, match="another user"):
        store.put("s1", KEY, b"x")
    with pytest.raises(StoreError, match="another user"):
        store.get("s1", KEY)
    assert os.listdir(planted / "tool-results") == []


def test_dir_root_that_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("not a directory")
    with pytest.raises(StoreError):
        open_store(f"dir:{file}")
    with pytest.raises(StoreError):
        open_store(f"dir:{file}/below")
    root = tmp_path / "root"
    store = DirStore(root)
    store.put("s1", KEY, b"x")
    # The root is replaced by a file while the store is open.
    os.rename(root, tmp_path / "moved")
    root.write_text("now a file")
    with pytest.raises(StoreError):
        store.put("s1", OTHER, b"x")
    with pytest.raises(StoreError):
        store.get("s1", KEY)
    with pytest.raises(StoreError):
        store.keys("s1")


@pytest.mark.parametrize("sync", [False, True])
def test_dir_disk_full_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync: bool
) -> None:
    store = DirStore(tmp_path, sync=sync)
    store.put("s1", KEY, b"before")

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    # Where the disk runs out: the write itself, or (flushing) the flush.
    monkeypatch.setattr(os, "fsync" if sync else "write", full)
    with pytest.raises(StoreError, match="No space left"):
        store.put("s1", OTHER, b"x" * 1000)
    monkeypatch.undo()
    assert store.get("s1", OTHER) is None
    assert os.listdir(tmp_path / "toolbudget-s1" / "tool-results") == [f"{KEY}.txt"]
    store.put("s1", OTHER, b"after")
    assert store.get("s1", OTHER) == b"after"


@pytest.mark.parametrize(
    ("url", "flushes"), [("dir:{}", 0), ("dir:{}?sync=1", 2), ("dir:{}?sync=0&ttl=60", 0)]
)
def test_dir_flushes_to_the_disk_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, flushes: int
) -> None:
    # A flush costs more than the request that writes it; a kill -9 is survived without it.
    synced: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    with open_store(url.format(tmp_path)) as store:
        assert isinstance(store, DirStore) and store.sync == bool(flushes)
        assert ("sync=1" in store.url) == bool(flushes)
        store.put_many("s1", {KEY: b"one", OTHER: b"two"})
        assert store.get_many("s1", [KEY, OTHER]) == {KEY: b"one", OTHER: b"two"}
    assert len(synced) == flushes


def test_dir_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    payload = os.urandom(2 * 1024 * 1024)
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            data = store.get("s1", KEY)
            if data is not None:
                seen.append(len(data))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        store.put("s1", KEY, payload)
        time.sleep(0.01)
    finally:
        done.set()
        reader.join()
    assert set(seen) <= {len(payload)}


# -- sqlite ----------------------------------------------------------------------------------------------


def test_sqlite_ttl_expires_and_every_access_refreshes(tmp_path: Path) -> None:
    clock = Clock()
    start = clock.now
    store = SqliteStore(tmp_path / "db.sqlite", ttl=100, clock=clock)
    store.put("s1", KEY, b"x")
    clock.now = start + 90
    assert store.get("s1", KEY) == b"x"  # refreshed at +90
    clock.now = start + 180
    assert store.get("s1", KEY) == b"x"  # 90 s after the last access
    clock.now = start + 270
    store.put("s1", KEY, b"x")  # a put counts as an access too
    clock.now = start + 360
    assert store.keys("s1") == [KEY]  # listing is no access
    clock.now = start + 371
    assert store.keys("s1") == []
    assert store.get("s1", KEY) is None
    assert _rows(tmp_path / "db.sqlite") == 1  # invisible, not yet deleted
    store.put("s1", OTHER, b"y")
    assert _rows(tmp_path / "db.sqlite") == 1  # the next write purged it
    store.put("s1", KEY, b"new bytes")  # an expired entry is absent: a put stores afresh
    assert store.get("s1", KEY) == b"new bytes"
    store.close()


def _rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        (count,) = conn.execute("SELECT count(*) FROM entries").fetchone()
    conn.close()
    assert isinstance(count, int)
    return count


def test_sqlite_evicts_least_recently_used_over_the_cap(tmp_path: Path) -> None:
    clock = Clock()
    store = SqliteStore(tmp_path / "db.sqlite", max_bytes=300, clock=clock)
    keys = {name: name * 16 for name in "abcde"}
    clock.now += 100
    store.put("s1", keys["a"], b"a" * 100)
    clock.now += 100
    store.put("s2", keys["b"], b"b" * 100)
    clock.now += 100
    store.put("s1", keys["c"], b"c" * 100)
    clock.now += 100
    assert store.get("s1", keys["a"]) == b"a" * 100  # a is now the most recent
    clock.now += 100
    store.put("s2", keys["d"], b"d" * 100)  # 400 > 300: the oldest access, b, goes
    assert store.keys("s2") == [keys["d"]]
    assert store.keys("s1") == [keys["a"], keys["c"]]
    clock.now += 100
    store.put("s3", keys["e"], b"e" * 200)  # 500 > 300: c, then a
    assert store.keys("s1") == []
    assert store.keys("s2") == [keys["d"]]
    assert store.keys("s3") == [keys["e"]]
    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("SELECT value FROM meta WHERE name = 'total_bytes'").fetchone() == (300,)
    conn.close()
    with pytest.raises(StoreError, match="over the store's cap"):
        store.put("s1", KEY, b"x" * 301)
    assert store.get("s1", KEY) is None
    store.close()


def test_sqlite_never_evicts_an_entry_in_use(tmp_path: Path) -> None:
    """The first cut of a request is not evicted for the second: the second is refused instead."""
    clock = Clock()
    store = SqliteStore(tmp_path / "db.sqlite", max_bytes=300, clock=clock)
    store.put("s1", "a" * 16, b"a" * 200)
    clock.now += 10
    with pytest.raises(StoreError, match="in use"):
        store.put("s1", "b" * 16, b"b" * 200)
    assert store.get("s1", "a" * 16) == b"a" * 200
    assert store.get("s1", "b" * 16) is None
    clock.now += 100  # a was read at +10; now it is old enough to make room
    store.put("s1", "b" * 16, b"b" * 200)
    assert store.keys("s1") == ["b" * 16]
    store.close()


def test_a_full_sqlite_store_falls_back_instead_of_losing_a_cut(tmp_path: Path) -> None:
    texts = ["".join(f"{name} line {i}\n" for i in range(3_000)) for name in "xy"]
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "a"}},
                    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": texts[0]},
                    {"type": "tool_result", "tool_use_id": "t2", "content": texts[1]},
                ],
            },
        ],
    }
    with Session("full", store=f"sqlite:{tmp_path}/db.sqlite?max_bytes=45000") as session:
        managed = session.manage(body, "anthropic")
        assert managed.report.results_cut == 2
        assert managed.report.store_fallbacks == 1
        for result in managed.body["messages"][2]["content"]:
            marker = MARKER_RE.search(result["content"])
            assert marker is not None
            if marker.group("key"):
                assert session.original(marker.group("key")) in texts
            else:
                assert "could not be kept" in result["content"]


@pytest.mark.parametrize("umask", [0o000, 0o277])
def test_sqlite_is_wal_and_private(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        store = SqliteStore(tmp_path / "sub" / "db.sqlite")
        store.put("s1", KEY, b"x")
    finally:
        os.umask(old)
    with sqlite3.connect(tmp_path / "sub" / "db.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    assert _mode(tmp_path / "sub" / "db.sqlite") == 0o600
    assert _mode(tmp_path / "sub") == 0o700
    store.close()


_WRITER = """
import sys, time
from pathlib import Path
from toolbudget.store import SqliteStore

path, who, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SqliteStore(path)
Path(path + ".ready-" + who).touch()
while not Path(path + ".go").exists():
    time.sleep(0.005)
for index in range(count):
    key = f"{who}{index:031d}"
    store.put("shared", key, key.encode() * 50)
    assert store.get("shared", key) == key.encode() * 50
store.close()
"""


def test_sqlite_two_processes_write_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    count = 150
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), who, str(count)], env=env)
        for who in ("a", "b")
    ]
    try:
        deadline = time.monotonic() + 15
        while not all(Path(f"{path}.ready-{who}").exists() for who in "ab"):
            assert time.monotonic() < deadline, "the writers did not start"
            assert all(writer.poll() is None for writer in writers), "a writer died at start"
            time.sleep(0.01)
        Path(f"{path}.go").touch()
        assert [writer.wait(timeout=30) for writer in writers] == [0, 0]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
    with SqliteStore(path) as store:
        keys = store.keys("shared")
        assert len(keys) == 2 * count
        assert all(store.get("shared", key) == key.encode() * 50 for key in keys)


def test_sqlite_failures_are_store_errors(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("a regular file")
    with pytest.raises(StoreError):
        open_store(f"sqlite:{file}/db.sqlite")
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database, " * 200)
    with pytest.raises(StoreError, match="not a database"):
        SqliteStore(garbage)
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="newer toolbudget"):
        SqliteStore(newer)
    with pytest.raises(InputError):
        SqliteStore(tmp_path / "x.sqlite", ttl=0)


def test_sqlite_disk_full_is_a_store_error_and_the_store_goes_on(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    store.put("s1", KEY, b"small")
    assert store._conn is not None
    (pages,) = store._conn.execute("PRAGMA page_count").fetchone()
    store._conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # as if the disk were full
    with pytest.raises(StoreError, match="full"):
        store.put("s1", OTHER, os.urandom(1024 * 1024))
    assert store.get("s1", OTHER) is None
    assert store.get("s1", KEY) == b"small"
    store.put("s1", "1" * 16, b"still writable")
    store.close()


# -- redis -----------------------------------------------------------------------------------------------


def test_redis_names_and_ttl_refreshed_on_access(redis_server: RedisServer, raw_redis: redis.Redis) -> None:
    week_ms = int(DEFAULT_TTL * 1000)
    with open_store(redis_server.url) as store:
        store.put("s1", KEY, b"x")
        name = f"toolbudget:s1:{KEY}"
        assert raw_redis.get(name) == b"x"
        assert week_ms - 10_000 < raw_redis.pttl(name) <= week_ms
        raw_redis.pexpire(name, 10_000)
        assert store.get("s1", KEY) == b"x"
        assert raw_redis.pttl(name) > week_ms - 10_000  # the read renewed it
        raw_redis.pexpire(name, 10_000)
        store.put("s1", KEY, b"ignored")
        assert raw_redis.pttl(name) > week_ms - 10_000  # so did the second put
        assert raw_redis.get(name) == b"x"
        store.put("a:b", KEY, b"y")
        assert raw_redis.exists(f"toolbudget:{namespace('a:b')}:{KEY}") == 1


def test_redis_ttl_from_the_url_and_expiry(redis_server: RedisServer, raw_redis: redis.Redis) -> None:
    with open_store(redis_server.url + "?ttl=100") as store:
        assert isinstance(store, RedisStore)
        assert store.ttl == 100
        store.put("s1", KEY, b"x")
        assert 95 <= raw_redis.ttl(f"toolbudget:s1:{KEY}") <= 100
    with RedisStore(redis_server.url, ttl=0.05) as short:
        short.put("s1", OTHER, b"x")
        time.sleep(0.12)
        assert short.get("s1", OTHER) is None
        assert short.keys("s1") == [KEY]


def test_redis_keys_and_drop_leave_other_names_alone(
    redis_server: RedisServer, raw_redis: redis.Redis
) -> None:
    raw_redis.set("toolbudget:s1:NOT-A-KEY", b"x")
    raw_redis.set(f"toolbudget:s1:x:{KEY}", b"x")
    raw_redis.set(f"other-app:{KEY}", b"x")
    with open_store(redis_server.url) as store:
        store.put("s1", KEY, b"mine")
        assert store.keys("s1") == [KEY]
        for index in range(1200):  # more than one SCAN batch and one UNLINK batch
            store.put("big", f"{index:016d}", b"")
        assert len(store.keys("big")) == 1200
        store.drop("big")
        store.drop("s1")
        assert store.keys("big") == []
    assert sorted(raw_redis.keys("*")) == sorted(
        [b"toolbudget:s1:NOT-A-KEY", f"toolbudget:s1:x:{KEY}".encode(), f"other-app:{KEY}".encode()]
    )


def test_redis_down_is_a_store_error(redis_package: None) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    start = time.monotonic()
    with open_store(url) as store:  # connects lazily: opening a store with Redis down works
        calls: list[Callable[[], object]] = [
            lambda: store.put("s1", KEY, b"x"),
            lambda: store.get("s1", KEY),
            lambda: store.keys("s1"),
            lambda: store.drop("s1"),
        ]
        for call in calls:
            with pytest.raises(StoreError, match=r"127\.0\.0\.1"):
                call()
    assert time.monotonic() - start < 5


def test_redis_timeout_is_a_store_error(redis_package: None) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with RedisStore(f"redis://127.0.0.1:{port}/0", timeout=0.2) as store:
            start = time.monotonic()
            with pytest.raises(StoreError):
                store.get("s1", KEY)
            assert time.monotonic() - start < 3


def test_redis_url_password_is_masked(redis_package: None) -> None:
    with RedisStore("redis://user:s3cret@127.0.0.1:1/2?ttl=60") as store:
        assert "s3cret" not in store.url
        assert "s3cret" not in repr(store)
        assert store.url == "redis://user:***@127.0.0.1:1/2?ttl=60"
    with pytest.raises(InputError):
        RedisStore("redis://127.0.0.1:6379/0?ttl=soon")
    for bad in ("ttl=0", "ttl=inf", "ttl=nan"):
        with pytest.raises(InputError):
            RedisStore(f"redis://127.0.0.1:6379/0?{bad}")
    with pytest.raises(InputError) as caught:
        RedisStore("redis://:s3cret@127.0.0.1:notaport/0")
    assert "s3cret" not in str(caught.value)
    # A URL urllib cannot read at all (an unclosed IPv6 bracket) is bad input too, not a ValueError,
    # and its password stays hidden; a session made with it says so in the same words.
    for url in ("redis://[::1", "redis://user:s3cret@[::1/0"):
        with pytest.raises(InputError, match="bad redis URL") as caught:
            RedisStore(url)
        assert "s3cret" not in str(caught.value)
        with pytest.raises(InputError, match="bad redis URL") as caught:
            Session("s1", store=url)
        assert "s3cret" not in str(caught.value)


_OPENER = """
import sys, time
from pathlib import Path
from toolbudget.store import SqliteStore
Path(sys.argv[2]).touch()
while not Path(sys.argv[3]).exists():
    time.sleep(0.001)
print(SqliteStore(sys.argv[1]).read_only)
"""


def test_processes_opening_a_new_sqlite_file_at_once_all_may_write(tmp_path: Path) -> None:
    # A lock held by another process creating the schema is not a lack of write access.
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for attempt in range(10):
        path, go = tmp_path / f"db{attempt}.sqlite", tmp_path / f"go{attempt}"
        ready = [tmp_path / f"ready{attempt}-{n}" for n in range(4)]
        openers = [
            subprocess.Popen(
                [sys.executable, "-c", _OPENER, str(path), str(flag), str(go)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for flag in ready
        ]
        deadline = time.monotonic() + 30
        while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
            time.sleep(0.005)
        go.touch()  # all at once
        answers = [opener.communicate(timeout=60)[0].strip() for opener in openers]
        assert answers == ["False"] * 4, answers
