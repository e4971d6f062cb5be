"""The per-request check of the keys a warm session's markers name, made where the request is.

Every request checks that the store holds every key its markers name. On a
store whose check cannot hang (memory, a directory on a local file system)
that check runs on the caller's thread: the trip to the store's worker thread
and back cost more than the check, on every request. The bytes, the report,
the breaker and the bound stay as they were.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import to_request
from toolbudget.model import Conversation, Message, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.session import Session
from toolbudget.store import DirStore, MemoryStore
from toolbudget.store import guard as guard_module
from toolbudget.store.dir import _filesystem_of

POLICY = Policy(result_max_chars=2000, tool_caps={}, compaction="off", store_timeout=0.5)


def bodies(count: int) -> list[dict[str, Any]]:
    """An agent's requests: a task, then one Bash call and result per request, every third one
    large enough to be cut."""
    messages: list[Message] = [Message("user", (Text("go"),))]
    out = []
    for n in range(count):
        size = 6000 if n % 3 == 0 else 300
        text = f"o{n}\n" + f"o{n} line\n" * (size // 8)
        messages.append(Message("assistant", (ToolCall(f"toolu_{n}", "Bash", {"command": f"c{n}"}),)))
        messages.append(Message("tool", (ToolResult(f"toolu_{n}", (Text(text),)),)))
        body = to_request(Conversation("t", "test", tuple(messages)), "anthropic", model="m")
        out.append(orjson.loads(orjson.dumps(body)))  # each a new body, as a server reads it
    return out


class Trips:
    """Counts the store calls a session makes on the worker thread and on its own."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.worker = 0
        self.here = 0
        self.each: list[tuple[int, int]] = []
        """(worker, here) of each request :func:`run` made."""
        call, here = guard_module.StoreGuard.call, guard_module.StoreGuard.call_here

        def counted_call(guard: Any, *args: Any) -> Any:
            self.worker += 1
            return call(guard, *args)

        def counted_here(guard: Any, *args: Any) -> Any:
            self.here += 1
            return here(guard, *args)

        monkeypatch.setattr(guard_module.StoreGuard, "call", counted_call)
        monkeypatch.setattr(guard_module.StoreGuard, "call_here", counted_here)


def run(
    store: str, requests: list[dict[str, Any]], trips: Trips | None = None
) -> list[tuple[bytes, dict[str, Any]]]:
    """Each request's bytes and report; with ``trips``, each request's trips are noted too."""
    out = []
    with Session("warm", store=store, policy=POLICY) as session:
        for body in requests:
            if trips is not None:
                worker, here = trips.worker, trips.here
            managed = session.manage(body, "anthropic")
            if trips is not None:
                trips.each.append((trips.worker - worker, trips.here - here))
            out.append((orjson.dumps(managed.body), managed.report.as_dict()))
    return out


def test_a_warm_request_checks_its_keys_without_a_trip_to_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = bodies(12)
    store = tmp_path / "s"  # markers name the path: both runs use one, each from empty
    # Through the worker, as before: the store says its check may hang.
    with monkeypatch.context() as patch:
        patch.setattr(DirStore, "checks_inline", lambda self, session: False)
        before = run(f"dir:{store}", requests)
    shutil.rmtree(store)
    trips = Trips(monkeypatch)
    after = run(f"dir:{store}", requests, trips)
    assert after == before  # the same bytes and the same report, request by request
    # A request that cuts writes, on the worker, in one trip (the first also holds the
    # directory in that trip, and looks for records here, since a read cannot hang); one that
    # only appends a small result checks its keys here, without a trip.
    for n, (worker, here) in enumerate(trips.each):
        if n == 0:
            assert (worker, here) == (1, 1), trips.each
        elif n % 3 == 0:
            assert (worker, here) == (1, 0), trips.each
        else:
            assert (worker, here) == (0, 1), trips.each


def test_a_key_lost_between_warm_requests_is_kept_again(tmp_path: Path) -> None:
    requests = bodies(6)
    store = tmp_path / "s"
    with Session("lost", store=f"dir:{store}", policy=POLICY) as session:
        first = session.manage(requests[0], "anthropic").report
        session.manage(requests[1], "anthropic")
        (key,) = [cut.key for cut in first.cuts]
        assert key is not None
        path = session.store.location(session.id, key)
        assert path is not None
        os.unlink(path)  # a clean, or someone's rm
        report = session.manage(requests[2], "anthropic").report
        assert key in report.keys_written
        assert report.store_fallbacks == 0
        assert Path(path).exists()


def slow_check(monkeypatch: pytest.MonkeyPatch, store: type[DirStore] | type[MemoryStore]) -> None:
    """Every key check of ``store`` takes 0.6 s, past the requests' 0.5 s bound."""
    missing = store.missing

    def slow(self: Any, *args: Any) -> Any:
        time.sleep(0.6)
        return missing(self, *args)

    monkeypatch.setattr(store, "missing", slow)


def test_a_check_made_here_that_overruns_the_bound_opens_the_breaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = bodies(6)
    with Session("slow", store=f"dir:{tmp_path / 's'}", policy=POLICY) as session:
        session.manage(requests[0], "anthropic")
        slow_check(monkeypatch, DirStore)
        session.manage(requests[1], "anthropic")
        guard = session._guard
        assert guard is not None and guard.open
        # The next request skips the store: nothing is promised, and it costs no wait.
        start = time.monotonic()
        managed = session.manage(requests[2], "anthropic")
        assert time.monotonic() - start < 0.5
        assert managed.report.store_fallbacks > 0 or not any(c.key for c in managed.report.cuts)


def test_a_memory_store_is_never_taken_for_one_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pause of the process during a memory store's check (a garbage collection of a large heap,
    a busy machine) is no store hanging: nothing is skipped, every cut is kept."""
    requests = bodies(7)
    with Session("paused", store="memory:", policy=POLICY) as session:
        session.manage(requests[0], "anthropic")
        slow_check(monkeypatch, MemoryStore)
        for body in requests[1:]:
            report = session.manage(body, "anthropic").report
            assert report.store_fallbacks == 0
            assert all(cut.key for cut in report.cuts)
        guard = session._guard
        assert guard is None or not guard.open


def test_the_used_stamp_is_written_at_most_once_a_minute_by_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    store = DirStore(tmp_path, clock=lambda: now[0], sweep=False)
    key = "a" * 32
    store.put("s", key, b"entry")
    stamps: list[str] = []
    utime = os.utime

    def counted(path: Any, *args: Any, **kwargs: Any) -> None:
        stamps.append(str(path))
        utime(path, *args, **kwargs)

    monkeypatch.setattr(os, "utime", counted)
    assert store.missing("s", [key], {key: 5}) == set()
    assert stamps and stamps[-1].endswith("used")  # the first check stamps the directory
    first = len(stamps)
    for _ in range(10):
        assert store.missing("s", [key], {key: 5}) == set()
        now[0] += 5
    assert len(stamps) == first  # the next ones, within the minute, do not
    assert store.checks_inline("s") == store.local
    now[0] += 11
    assert not store.checks_inline("s")  # a stamp is due: a write, made on the worker
    assert store.missing("s", [key]) == set()
    assert len(stamps) == first + 1
    assert store.checks_inline("s") == store.local


MOUNTS = r"""22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /mnt/remote rw,relatime shared:9 - nfs4 server:/export rw
31 30 0:26 / /mnt/remote/cache rw - tmpfs tmpfs rw
32 22 0:27 / /mnt/my\040disk rw - fuse.sshfs host: rw
33 22 0:28 / /mnt/remote rw - xfs /dev/vdb rw
"""


def test_a_directory_is_local_by_the_file_system_it_is_on() -> None:
    assert _filesystem_of("/home/u/.cache", MOUNTS) == "ext4"
    assert _filesystem_of("/mnt/my disk/archives", MOUNTS) == "fuse.sshfs"
    assert _filesystem_of("/mnt/remote/cache/x", MOUNTS) == "tmpfs"
    assert _filesystem_of("/mnt/remotely", MOUNTS) == "ext4"  # not under /mnt/remote
    assert _filesystem_of("/mnt/remote/x", MOUNTS) == "xfs"  # the later mount is on top
    assert _filesystem_of("/x", "") is None


def test_a_store_on_a_file_system_that_may_hang_checks_on_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolbudget.store import dir as dir_module

    monkeypatch.setattr(dir_module, "_filesystem_of", lambda path, mountinfo=None: "fuse.sshfs")
    store = DirStore(tmp_path, sweep=False)
    assert not store.local and not store.checks_inline("s")
    trips = Trips(monkeypatch)
    requests = bodies(4)
    with Session("remote", store=store, policy=POLICY) as session:
        for body in requests:
            session.manage(body, "anthropic")
    assert trips.here == 0 and trips.worker >= 3
