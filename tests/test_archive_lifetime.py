"""Archives outlive the sessions that point at them, and no marker names a key the store lost.

Store faults are made for real: a redis-server flushed, restarted without
persistence, evicting under ``maxmemory`` and stopped with SIGSTOP; a SQLite
file evicting under its cap, on a read-only mount and on a full disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from redis_server import RedisServer, redis_server_binary, serve_for_test
from toolbudget import StoreConfigError, to_request, wire
from toolbudget.budget import result_text
from toolbudget.errors import NotFoundError
from toolbudget.marker import find_markers
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.session import Session, conversation_id
from toolbudget.store import DirStore, MemoryStore, SqliteStore, Store

POLICY = Policy(result_max_chars=2000, tool_caps={}, compaction="off")


def history(outputs: list[str], task: str = "go", system: str | None = None) -> dict[str, Any]:
    """An anthropic body: a task, then one Bash call and result per output."""
    messages: list[Message] = []
    if system is not None:
        messages.append(Message("system", (Text(system),)))
    messages.append(Message("user", (Text(task),)))
    for n, out in enumerate(outputs):
        messages.append(Message("assistant", (ToolCall(f"toolu_{n}", "Bash", {"command": f"c{n}"}),)))
        messages.append(Message("tool", (ToolResult(f"toolu_{n}", (Text(out),)),)))
    return to_request(Conversation("t", "test", tuple(messages)), "anthropic", model="m")


def outputs(count: int, size: int = 6000, tag: str = "o") -> list[str]:
    return [f"{tag}{n}\n" + (f"{tag}{n} line\n" * (size // 8)) for n in range(count)]


def markers_of(body: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(key, text) of every cut result in an anthropic body."""
    request = wire.parse(body, "anthropic")
    found = []
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, ToolResult):
                text = result_text(part) or ""
                for marker in find_markers(text):
                    found.append((marker.key, text))
    return found


def assert_every_marker_recallable(session: Session, body: dict[str, Any], originals: list[str]) -> None:
    found = markers_of(body)
    assert found
    for key, _ in found:
        assert key is not None
        assert session.original(key) in originals


# -- 1. ids, lifetime, location -------------------------------------------------------------------------


def test_a_derived_id_includes_the_task_on_every_api() -> None:
    for api in ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse"):
        one = to_request(
            Conversation(
                "a",
                "t",
                (Message("system", (Text("You are an agent."),)), Message("user", (Text("fix bug 1"),))),
            ),
            api,
            model="m",
        )
        two = to_request(
            Conversation(
                "b",
                "t",
                (Message("system", (Text("You are an agent."),)), Message("user", (Text("fix bug 2"),))),
            ),
            api,
            model="m",
        )
        ids = {conversation_id(wire.parse(body, api)) for body in (one, two)}
        assert len(ids) == 2, api
        # The same conversation, however long, keeps its id.
        assert conversation_id(wire.parse(one, api)) == conversation_id(wire.parse(one, api))


def test_two_sessions_sharing_a_derived_id_do_not_pull_the_archive_from_each_other(tmp_path: Path) -> None:
    texts = outputs(2)
    body = history(texts)
    url = f"dir:{tmp_path}"
    a, b = Session(store=url, policy=POLICY), Session(store=url, policy=POLICY)
    a.manage(body, api="anthropic")
    managed = b.manage(body, api="anthropic").body
    assert a.id == b.id
    a.close()
    keys = [key for key, _ in markers_of(managed)]
    for key in keys:
        assert "not found" not in b.handle_recall({"key": key})
    b.close()
    # Both closed: the archive still serves the markers the transcript holds.
    with Session(a.id, store=url, policy=POLICY) as later:
        assert_every_marker_recallable(later, managed, texts)


_HOLDER = """
import sys, orjson
from toolbudget import Session, Policy
body = orjson.loads(sys.stdin.buffer.read())
policy = Policy(result_max_chars=2000, tool_caps={}, compaction="off")
with Session("shared", store=sys.argv[1], policy=policy) as session:
    managed = session.manage(body, "anthropic")
    print(orjson.dumps([c.key for c in managed.report.cuts]).decode())
"""


def test_sixteen_processes_sharing_one_session_leave_every_key_recallable(tmp_path: Path) -> None:
    url = f"dir:{tmp_path}"
    bodies = [history(outputs(13, tag=f"p{n}-")) for n in range(16)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _HOLDER, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in bodies
    ]
    keys: list[str] = []
    for proc, body in zip(procs, bodies, strict=True):
        out, err = proc.communicate(orjson.dumps(body), timeout=120)
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
        keys += orjson.loads(out)
    assert len(keys) == 16 * 13
    with Session("shared", store=url, policy=POLICY) as session:
        assert all(session.original(key) for key in keys)
    assert not DirStore(tmp_path).live_holders("shared")


def test_nobody_holding_an_archive_for_its_ttl_removes_it_but_never_a_live_one(tmp_path: Path) -> None:
    now = [time.time()]
    store = DirStore(tmp_path, ttl=100, clock=lambda: now[0], sweep=False)
    key = "0123456789abcdef0123456789abcdef"
    for session in ("held", "released", "dead", "fresh"):
        store.put(session, key, b"x")
    live = store.hold("held")
    store.release("released", store.hold("released"))
    # A holder whose process is gone (killed -9, never closed) does not keep its archive.
    dead = store.hold("dead")
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=False, capture_output=True, text=True
    )
    host = dead.rsplit("-", 2)[0]
    (tmp_path / "toolbudget-dead" / "holders" / dead).rename(
        tmp_path / "toolbudget-dead" / "holders" / f"{host}-{int(child.stdout)}-deadbeef"
    )
    assert store.sweep() == []  # nothing is past its TTL yet
    # A TTL later; "fresh" was used just now.
    now[0] += 101
    store.renew("fresh", None)
    assert store.sweep() == ["toolbudget-dead", "toolbudget-released"]
    assert store.get("held", key) == b"x"  # its holder is this live process, however old
    assert store.get("fresh", key) == b"x"
    # ``clean`` never removes an archive under a live holder.
    from toolbudget.errors import StoreError

    with pytest.raises(StoreError, match="held by 1 live session"):
        store.drop("held")
    store.release("held", live)
    store.drop("held")
    assert store.get("held", key) is None


@pytest.mark.skipif(
    not hasattr(os, "fork") or not os.path.exists("/proc/self/stat"), reason="needs fork and /proc"
)
def test_a_forked_process_holds_in_its_own_name(tmp_path: Path) -> None:
    """A holder names the process that made it, read once per process: a child forked after its
    parent held must not hold in the parent's name (the parent's exit would make it look dead)."""
    from toolbudget.store.dir import _start_of

    own = _start_of(os.getpid())
    assert own is not None
    store = DirStore(tmp_path, sweep=False)
    parent = store.hold("before")
    assert f"-{os.getpid()}-{own}-" in parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: hold, say in what name, and leave without running the test's teardown
        try:
            os.write(write, DirStore(tmp_path, sweep=False).hold("after").encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        name = pipe.read().decode()
    os.waitpid(pid, 0)
    assert f"-{pid}-" in name and f"-{os.getpid()}-" not in name
    start = name.rsplit("-", 1)[0].split("-", 2)[2]
    assert start.split(".")[0] == own.split(".")[0]  # the same boot
    assert start != own  # the child's own start, not its parent's


def test_a_session_holds_its_archive_from_its_first_key_and_never_before(tmp_path: Path) -> None:
    small, big = history(["ok\n"] * 3), history(["ok\n"] * 3 + outputs(1))
    with Session("late", store=f"dir:{tmp_path}", policy=POLICY) as session:
        assert session.manage(small, "anthropic").report.cuts == ()
        assert not (tmp_path / "toolbudget-late").exists()  # nothing cut, nothing made on disk
        managed = session.manage(big, "anthropic")
        (key,) = [key for key, _ in markers_of(managed.body)]
        assert key is not None
        held = list((tmp_path / "toolbudget-late" / "holders").iterdir())
        assert len(held) == 1
        assert DirStore(tmp_path, sweep=False).live_holders("late") == [held[0].name]
    # A session started again that only names keys already kept holds them too.
    with Session("late", store=f"dir:{tmp_path}", policy=POLICY) as again:
        again.manage(big, "anthropic")
        assert len(list((tmp_path / "toolbudget-late" / "holders").iterdir())) == 1
        store = DirStore(tmp_path, ttl=0.001, sweep=False)
        time.sleep(0.01)
        assert store.sweep() == []  # past its TTL, but held
    assert not list((tmp_path / "toolbudget-late" / "holders").iterdir())


def test_a_session_started_again_holds_in_the_same_trip_as_its_first_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first hold rides with the request's one trip to the store's worker (it cost a trip of its
    own), and is held and let go as any hold."""
    from toolbudget.store.guard import StoreGuard

    big = history(outputs(2))
    with Session("trips", store=f"dir:{tmp_path}", policy=POLICY) as first:
        want = orjson.dumps(first.manage(big, "anthropic").body)
    calls: list[str] = []
    call = StoreGuard.call

    def counted(self: StoreGuard, deadline: Any, fn: Any, *args: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return call(self, deadline, fn, *args)

    monkeypatch.setattr(StoreGuard, "call", counted)
    holders = tmp_path / "toolbudget-trips" / "holders"
    store = DirStore(tmp_path)  # opened here: its opening is a trip of its own
    with Session("trips", store=store, policy=POLICY) as again:
        assert orjson.dumps(again.manage(orjson.loads(orjson.dumps(big)), "anthropic").body) == want
        assert calls == ["_held_check_and_keep"], calls
        (held,) = holders.iterdir()
        assert DirStore(tmp_path, sweep=False).live_holders("trips") == [held.name]
        calls.clear()
        # A managed body managed again reads each cut back to its original, here, not on the worker.
        assert orjson.dumps(again.manage(orjson.loads(want), "anthropic").body) == want
        assert "_held_check_and_keep" not in calls and "get" not in calls, calls
        assert len(list(holders.iterdir())) == 1
    store.close()
    assert not list(holders.iterdir())


def test_close_never_raises_out_of_the_with_block(tmp_path: Path) -> None:
    body = history(outputs(1))
    with Session("gone-root", store=f"dir:{tmp_path / 'root'}", policy=POLICY) as session:
        session.manage(body, "anthropic")
        # The store's worker makes spare files there once a request has written (not a race to test).
        assert session._guard is not None and session._guard.settle(10.0)
        shutil.rmtree(tmp_path / "root")  # someone removed the whole archive under it
    assert session._closed


def test_the_default_archive_is_private_to_the_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with Session(policy=POLICY) as session:
        managed = session.manage(history(outputs(1)), "anthropic")
        ((_, text),) = markers_of(managed.body)
        path = find_markers(text)[0].path
    assert path is not None and path.startswith(str(tmp_path / "cache" / "toolbudget" / "archives"))
    root = tmp_path / "cache" / "toolbudget" / "archives"
    assert root.stat().st_mode & 0o777 == 0o700
    assert Path(path).stat().st_mode & 0o777 == 0o600
    assert not str(path).startswith("/tmp/toolbudget-")


# -- 2. a marker never promises a key the store no longer holds --------------------------------------------


class Counting(MemoryStore):
    """A memory store that counts what each request asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        self.calls.append("missing")
        return super()._missing(session, keys)

    def _sizes(self, session: str, keys: list[str]) -> dict[str, int | None]:
        self.calls.append("missing")  # the check, with each entry's length
        return super()._sizes(session, keys)

    def _put(self, session: str, key: str, data: bytes) -> None:
        self.calls.append("put")
        super()._put(session, key, data)

    def _get(self, session: str, key: str) -> bytes | None:
        self.calls.append("get")
        return super()._get(session, key)


def test_each_request_checks_its_keys_in_one_call_and_keeps_again_what_was_lost() -> None:
    # Each cut keeps four entries in the request's one batch: the original, the record that its
    # text was sent as a cut, the record of what it was a cut of (its tool, for ``stats``), and the
    # record of its preview by its inputs (read back by a session started again). Only the first
    # three are named again by later requests.
    store = Counting()
    texts = outputs(6)
    with Session("check", store=store, policy=POLICY) as session:
        session.manage(history(texts[:3]), "anthropic")
        assert store.calls == ["missing"] + ["put"] * 12
        store.calls.clear()
        store.drop("check")  # lost behind the session's back
        managed = session.manage(history(texts[:4]), "anthropic")
        assert store.calls.count("missing") == 1 and "get" not in store.calls
        # The three entries of every cut kept again, and the new cut's preview record.
        assert store.calls.count("put") == 13 and len(managed.report.keys_written) == 4
        assert_every_marker_recallable(session, managed.body, texts)
        store.calls.clear()
        session.manage(history(texts[:5]), "anthropic")
        # One check, the new entries, and a look at the rest after the writes (a store may evict).
        assert store.calls == ["missing", "put", "put", "put", "put", "missing"]


def test_an_entry_torn_short_is_kept_again_by_the_next_request(tmp_path: Path) -> None:
    # A power loss can leave a file empty or short under its name (the dir store does not flush
    # each write); read back, it is checked against its key and reads as missing, so the check
    # before the next request must take it for missing too and keep it again.
    texts = outputs(3)
    with Session("torn", store=f"dir:{tmp_path}", policy=POLICY) as session:
        first = session.manage(history(texts[:2]), "anthropic")
        key = first.report.cuts[0].key
        assert key is not None
        file = Path(session.store.path(session.id, key) or "")
        file.write_bytes(file.read_bytes()[:100])
        with pytest.raises(NotFoundError):
            session.original(key)
        managed = session.manage(history(texts), "anthropic")
        assert managed.report.store_fallbacks == 0 and key in managed.report.keys_written
        assert_every_marker_recallable(session, managed.body, texts)
        assert session.original(key) == texts[0]


def test_a_lost_key_that_cannot_be_kept_again_is_marked_lost() -> None:
    class Refusing(MemoryStore):
        refuse = False

        def _put(self, session: str, key: str, data: bytes) -> None:
            if self.refuse:
                from toolbudget.errors import StoreError

                raise StoreError("full")
            super()._put(session, key, data)

    store = Refusing()
    texts = outputs(3)
    with Session("lossy", store=store, policy=POLICY) as session:
        session.manage(history(texts[:2]), "anthropic")
        store.drop("lossy")
        store.refuse = True
        managed = session.manage(history(texts), "anthropic")
    found = markers_of(managed.body)
    assert len(found) == 3 and all(key is None for key, _ in found)
    assert managed.report.store_fallbacks == 3


def _managed_keys_survive(session: Session, texts: list[str], fault: Any) -> None:
    session.manage(history(texts[:3]), "anthropic")
    fault()
    managed = session.manage(history(texts[:4]), "anthropic")
    assert managed.report.store_fallbacks == 0
    assert_every_marker_recallable(session, managed.body, texts)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from serve_for_test(tmp_path / "redis")


def _client(server: RedisServer) -> Any:
    import redis as redis_py

    return redis_py.Redis.from_url(server.url)


def test_redis_flush_and_eviction_are_kept_again(redis: RedisServer) -> None:
    texts = outputs(6, size=20_000)
    client = _client(redis)
    with Session("flushed", store=redis.url, policy=POLICY) as session:
        _managed_keys_survive(session, texts, client.flushdb)
    # Under an evicting policy Redis drops entries at any later command, so presence holds as of
    # the check; what was evicted is kept again by the next request.
    client.config_set("maxmemory-policy", "allkeys-lru")
    with Session("evicted", store=redis.url, policy=POLICY) as session:
        session.manage(history(texts[:3]), "anthropic")
        client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) + 30_000))
        for n in range(3, 7):
            session.manage(history(texts[:n]), "anthropic")
        client.config_set("maxmemory", "0")
        managed = session.manage(history(texts), "anthropic")
        assert managed.report.store_fallbacks == 0
        assert_every_marker_recallable(session, managed.body, texts)
    # Under noeviction a full Redis refuses writes: those cuts say so, and every key named is there.
    client.flushdb()
    client.config_set("maxmemory-policy", "noeviction")
    with Session("full", store=redis.url, policy=POLICY) as session:
        session.manage(history(texts[:2]), "anthropic")
        client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) + 30_000))
        managed = session.manage(history(texts), "anthropic")
        found = markers_of(managed.body)
        assert any(key is None for key, _ in found) and any(key is not None for key, _ in found)
        for key, _ in found:
            assert key is None or client.exists(f"toolbudget:full:{key}"), key
    client.config_set("maxmemory", "0")
    client.close()


def test_a_redis_restart_without_persistence_is_kept_again(redis: RedisServer, tmp_path: Path) -> None:
    texts = outputs(5, size=20_000)
    port = redis.port
    with Session("restarted", store=redis.url, policy=POLICY) as session:
        session.manage(history(texts[:3]), "anthropic")
        redis.stop()
        # The same port again, empty.
        binary = redis_server_binary()
        assert binary is not None
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 10
            from redis_server import ping

            while not ping(port) and time.monotonic() < deadline:
                time.sleep(0.05)
            managed = session.manage(history(texts[:4]), "anthropic")
            assert managed.report.store_fallbacks == 0
            assert_every_marker_recallable(session, managed.body, texts)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_sqlite_eviction_and_deletion_are_kept_again(tmp_path: Path) -> None:
    texts = outputs(6, size=20_000)
    url = f"sqlite:{tmp_path / 'a.sqlite'}"
    with Session("deleted", store=url, policy=POLICY) as session:
        assert isinstance(session.store, SqliteStore)
        _managed_keys_survive(session, texts, lambda: session.store.drop("deleted"))


def test_a_missing_store_driver_is_a_configuration_error(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["redis"] = None
        from toolbudget import Session, StoreConfigError
        try:
            Session("s", store="redis://127.0.0.1:1/0")
        except StoreConfigError as exc:
            print("refused:", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert "refused:" in out.stdout and "pip install 'toolbudget[redis]'" in out.stdout, out.stderr
    assert issubclass(StoreConfigError, Exception)


# -- 3. a hung store does not hang the agent -------------------------------------------------------------


def test_a_stopped_redis_costs_at_most_the_store_timeout_then_is_skipped(redis: RedisServer) -> None:
    texts = outputs(12, size=8000)
    policy = Policy(result_max_chars=2000, tool_caps={}, compaction="off", store_timeout=0.5)
    with Session("stopped", store=redis.url, policy=policy) as session:
        session.manage(history(texts[:2]), "anthropic")
        os.kill(redis.process.pid, signal.SIGSTOP)
        try:
            spent = []
            for n in range(3, 11):
                start = time.monotonic()
                managed = session.manage(history(texts[:n]), "anthropic")
                spent.append(time.monotonic() - start)
                # Nothing could be checked: no marker promises a key.
                assert all(key is None for key, _ in markers_of(managed.body))
        finally:
            os.kill(redis.process.pid, signal.SIGCONT)
        # The first request waited its bound (with slack for a loaded machine); the rest skipped.
        assert spent[0] < 0.5 + 1.5, spent
        assert sum(spent[1:]) < 1.5, spent
        # Back: after the cool-down, a request checks and keeps again.
        guard = session._guard
        assert guard is not None
        guard._open_until = 0.0  # the cool-down, skipped; the stuck call must still return first
        deadline = time.monotonic() + 15
        while guard.open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not guard.open
        managed = session.manage(history(texts), "anthropic")
        assert managed.report.store_fallbacks == 0
        assert_every_marker_recallable(session, managed.body, texts)


class _SlowWrites(DirStore):
    """A directory store whose writes take 0.5 s, longer than the tests' bound; ``done`` is set
    as each write ends."""

    def __init__(self, root: Path, done: threading.Event) -> None:
        super().__init__(root)
        self.done = done

    def _put_many(self, session: str, items: dict[str, bytes], check: list[str]) -> set[str]:
        time.sleep(0.5)
        try:
            return super()._put_many(session, items, check)
        finally:
            self.done.set()


def test_a_session_closed_while_its_store_is_skipped_lets_go_of_its_holder(tmp_path: Path) -> None:
    """A close while the session's breaker is open (a call missed its bound moments before) was
    refused at once, and its release was never made: the holder counted as live for as long as the
    process ran, so no sweep could remove the archive. The release is handed to the worker without
    waiting now, and made as soon as the store answers; the close still returns at once."""
    import dataclasses

    done = threading.Event()
    store = _SlowWrites(tmp_path, done)
    policy = dataclasses.replace(POLICY, store_timeout=0.1)
    session = Session("skipped", store=store, policy=policy)
    session.manage(history(outputs(2)), "anthropic")  # the trip is given up after 0.1 s
    assert done.wait(5)
    guard = session._guard
    assert guard is not None and guard.open  # within the cool-down
    began = time.monotonic()
    session.close()
    assert time.monotonic() - began < 0.5
    deadline = time.monotonic() + 5
    while store.live_holders("skipped") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.live_holders("skipped") == []
    store.close()


# -- 4. SQLite: readable when not writable -----------------------------------------------------------------

_READER = """
import sys
from toolbudget.store import SqliteStore
store = SqliteStore(sys.argv[1])
keys = sys.argv[2].split(",")
got = sum(store.get("s", k) == ("entry " + k).encode() for k in keys)
try:
    store.put("s", "f" * 32, b"new")
    wrote = "wrote"
except Exception as exc:
    wrote = type(exc).__name__
print(got, store.read_only, wrote)
"""


def _mountable() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to mount a read-only or full file system")
    probe = subprocess.run(["unshare", "-m", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.decode().strip()}")


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_sqlite_serves_every_entry_without_write_access(tmp_path: Path, fault: str) -> None:
    _mountable()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    keys = [f"{n:032x}" for n in range(10)]
    fill = (
        "dd if=/dev/zero of=$M/filler bs=64k 2>/dev/null || true; sync"
        if fault == "full"
        else "mount -o remount,ro $M"
    )
    script = f"""
set -e
M={mnt}
mount -t tmpfs -o size=4m tmpfs $M
{sys.executable} -c '
import sys
from toolbudget.store import SqliteStore
s = SqliteStore(sys.argv[1])
for k in sys.argv[2].split(","):
    s.put("s", k, ("entry " + k).encode())
s.close()
' $M/a.sqlite {",".join(keys)}
{fill}
{sys.executable} -c '{_READER}' $M/a.sqlite {",".join(keys)}
{sys.executable} -c '{_READER}' $M/a.sqlite {",".join(keys)}
"""
    out = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    for line in lines[:2]:
        got, _, wrote = line.split()
        assert got == "10", out.stdout  # every existing entry, from a fresh process each time
        assert wrote == "StoreError", out.stdout


def test_stores_hold_what_a_session_checks(tmp_path: Path) -> None:
    # Every backend answers ``missing`` the same way.
    for store in (MemoryStore(), DirStore(tmp_path / "d", sweep=False), SqliteStore(tmp_path / "s.sqlite")):
        assert isinstance(store, Store)
        key, other = "a" * 32, "b" * 32
        store.put("s", key, b"x")
        assert store.missing("s", [key, other]) == {other}
        assert store.missing("t", [key]) == {key}
        assert store.put_many("s", {other: b"y"}) == set()
        assert store.missing("s", [key, other]) == set()
        store.close()


def test_a_first_hold_whose_check_fails_is_still_released_at_close(tmp_path: Path) -> None:
    """The first hold rides with the request's check and writes: when that check fails (a record
    log that cannot be read), the holder it made is still the session's, let go at ``close()``, and
    the next request makes no second one."""
    directory = tmp_path / "toolbudget-unreadable"
    directory.mkdir(mode=0o700)
    (directory / "records").mkdir(mode=0o700)  # reading the log fails: so does every check
    store = DirStore(tmp_path)
    with Session("unreadable", store=store, policy=POLICY) as session:
        session.manage(history(outputs(2)), "anthropic")
        session.manage(history(outputs(3)), "anthropic")
        assert len(list((directory / "holders").iterdir())) == 1
    assert store.live_holders("unreadable") == []
    store.close()


def test_a_first_hold_whose_trip_outlived_the_request_is_still_released_at_close(tmp_path: Path) -> None:
    """A first request whose one trip to the worker (hold, check, writes) takes longer than the
    store's bound goes on without it; the holder the worker makes after that is still the session's,
    and ``close()`` lets it go."""
    import dataclasses
    import threading

    from toolbudget.store import guard

    done = threading.Event()
    store = _SlowWrites(tmp_path, done)
    policy = dataclasses.replace(POLICY, store_timeout=0.1)
    with Session("slow", store=store, policy=policy) as session:
        session.manage(history(outputs(2)), "anthropic")  # the trip is given up after 0.1 s
        assert done.wait(5)
        time.sleep(guard.COOL_DOWN + 0.2)  # the guard lets calls through again, for the release
    assert store.live_holders("slow") == []
    store.close()
