"""Spare files the directory store makes while idle, and the worker that runs idle work."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from toolbudget.errors import StoreError
from toolbudget.store.dir import SPARES, DirStore
from toolbudget.store.guard import Deadline, StoreGuard

KEY = "k" + "0" * 31


def _key(n: int) -> str:
    return f"k{n:031d}"


def _results(store: DirStore, session: str) -> Path:
    return Path(store.workspace(session)) / "tool-results"


def _idle_until_done(store: DirStore) -> int:
    steps = 0
    while store.idle():
        steps += 1
        assert steps < 1000
    return steps


def _parts(results: Path) -> list[str]:
    return sorted(name for name in os.listdir(results) if name.endswith(".part"))


def _with_spares(root: Path) -> DirStore:
    """A store that wrote one entry of session ``s`` and made its spares."""
    store = DirStore(root, sweep=False)
    store.put_many("s", {_key(0): b"x"})
    _idle_until_done(store)
    return store


def test_idle_work_keeps_spares_ready_and_a_write_takes_one(tmp_path: Path) -> None:
    store = DirStore(tmp_path, sweep=False)
    assert not store.idle()  # nothing written yet: nothing to keep ready
    store.put_many("s", {_key(0): b"first"})
    results = _results(store, "s")
    assert _parts(results) == []  # no spare was made while the write waited
    assert _idle_until_done(store) == SPARES
    spares = _parts(results)
    assert len(spares) == SPARES
    for name in spares:
        info = os.lstat(results / name)
        assert stat.S_ISREG(info.st_mode) and info.st_size == 0
        assert stat.S_IMODE(info.st_mode) == 0o600

    store.put_many("s", {_key(1): b"second entry"})
    assert store.get("s", _key(1)) == b"second entry"
    entry = os.lstat(results / f"{_key(1)}.txt")
    assert stat.S_IMODE(entry.st_mode) == 0o600
    used = [name for name in spares if name not in _parts(results) or os.lstat(results / name).st_size]
    assert len(used) == 1  # the newest spare, now a second name of the entry until idle
    assert os.path.samefile(results / used[0], results / f"{_key(1)}.txt")
    _idle_until_done(store)
    assert len(_parts(results)) == SPARES  # its name removed, and one more spare made
    assert all(os.lstat(results / name).st_size == 0 for name in _parts(results))
    assert store.keys("s") == [_key(0), _key(1)]


def test_a_spare_that_is_no_longer_an_empty_file_of_its_own_is_not_written_into(tmp_path: Path) -> None:
    store = _with_spares(tmp_path)
    results = _results(store, "s")
    spares = sorted(store._spares[str(results)])
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"")
    # Taken newest first: each one spoilt in a different way, then one left as it should be.
    os.unlink(spares[-1])
    os.symlink(target, spares[-1])  # a symlink in its place
    Path(spares[-2]).write_bytes(b"someone's")  # written to
    os.unlink(spares[-3])  # removed (a sweep of another process)
    os.link(spares[-4], tmp_path / "second-name")  # another name for it
    for n in range(1, 5):
        store.put_many("s", {_key(n): f"entry {n}".encode()})
        assert store.get("s", _key(n)) == f"entry {n}".encode()
    assert target.read_bytes() == b""
    assert Path(spares[-2]).read_bytes() == b"someone's"
    assert (tmp_path / "second-name").read_bytes() == b""


def test_a_write_over_an_existing_entry_keeps_it_and_over_a_stranger_replaces_it(tmp_path: Path) -> None:
    store = DirStore(tmp_path, sweep=False)
    store.put_many("s", {_key(0): b"kept"})
    _idle_until_done(store)
    results = _results(store, "s")
    store.put_many("s", {_key(0): b"kept"})  # the same key again: the first file stands
    assert (results / f"{_key(0)}.txt").read_bytes() == b"kept"
    place = results / f"{_key(1)}.txt"
    place.symlink_to(tmp_path / "nowhere")
    store.put_many("s", {_key(1): b"mine"})
    assert not place.is_symlink() and place.read_bytes() == b"mine"
    _idle_until_done(store)
    assert all(os.lstat(results / name).st_size == 0 for name in _parts(results))


def test_release_removes_the_sessions_spares_and_close_touches_no_file(tmp_path: Path) -> None:
    store = DirStore(tmp_path, sweep=False)
    holder = store.hold("s")
    store.put_many("s", {_key(0): b"x"})
    _idle_until_done(store)
    store.put_many("s", {_key(1): b"y"})  # leaves one used name for the idle work
    results = _results(store, "s")
    assert _parts(results)
    store.release("s", holder)
    assert _parts(results) == []
    assert store.get("s", _key(1)) == b"y"

    other = DirStore(tmp_path / "other", sweep=False)
    other.put_many("t", {_key(0): b"x"})
    _idle_until_done(other)
    kept = _results(other, "t")
    before = _parts(kept)
    other.close()  # on the caller's thread, where the mount may hang: nothing removed
    assert _parts(kept) == before
    assert not other.idle()


def test_spares_left_behind_are_stale_temp_files_to_a_later_sweep(tmp_path: Path) -> None:
    store = _with_spares(tmp_path)
    results = _results(store, "s")
    assert _parts(results)
    store.close()  # a process that ends without releasing
    old = time.time() - 7200
    for name in _parts(results):
        os.utime(results / name, (old, old))
    again = DirStore(tmp_path, sweep=False)
    assert again.keys("s") == [_key(0)]  # a listing removes stale temp files
    assert _parts(results) == []


def test_the_worker_runs_idle_work_only_between_calls() -> None:
    guard = StoreGuard("test:")
    deadline = Deadline(10.0)
    order: list[str] = []
    gate = threading.Event()
    left = [3]

    def step() -> bool:
        order.append("idle")
        left[0] -= 1
        return left[0] > 0

    guard.when_idle(step)  # no worker yet: nothing to run it on, and nothing made
    assert order == []
    guard.call(deadline, order.append, "call 1")
    guard.when_idle(step)
    for _ in range(200):
        if left[0] == 0:
            break
        time.sleep(0.01)
    assert order == ["call 1", "idle", "idle", "idle"]
    assert guard.call(deadline, lambda: "answered") == "answered"

    # A call that comes while idle work is left waits for one step at most, not for all.
    left[0] = 1000
    order.clear()

    def slow_step() -> bool:
        order.append("idle")
        gate.wait(0.05)
        return True

    guard.when_idle(slow_step)
    time.sleep(0.02)
    started = time.monotonic()
    guard.call(deadline, order.append, "call 2")
    assert time.monotonic() - started < 0.5
    assert "call 2" in order
    guard.close()


def test_settle_never_answers_while_idle_work_handed_over_is_pending() -> None:
    """The worker found its idle list empty and was about to say it had settled when a step was
    handed over: ``settled`` was cleared, then set by the worker, with the step still pending, and
    ``settle`` returned at once. Found by pausing the worker between the two (as a busy machine
    may)."""
    guard = StoreGuard("test:")
    guard.call(Deadline(10.0), lambda: None)
    worker = guard._worker
    assert worker is not None
    assert guard.settle(5.0)
    inside = threading.Event()

    class Paused(threading.Event):
        def set(self) -> None:
            inside.set()
            time.sleep(0.15)  # the worker is paused between finding the list empty and saying so
            super().set()

    paused = Paused()
    worker.settled = paused
    guard.when_idle(lambda: False)  # a quick step: the worker then finds the list empty
    assert inside.wait(5.0)
    ran = threading.Event()

    def slow() -> bool:
        time.sleep(0.3)
        ran.set()
        return False

    guard.when_idle(slow)  # handed over while the worker is paused
    assert guard.settle(5.0)
    assert ran.is_set()
    guard.close()


def test_idle_work_that_fails_is_dropped_and_a_skipped_store_gets_none() -> None:
    clock = [0.0]
    guard = StoreGuard("test:", cool_down=5.0, clock=lambda: clock[0])
    deadline = Deadline(10.0)
    calls: list[str] = []

    def broken() -> bool:
        calls.append("broken")
        raise OSError("disk gone")

    guard.call(deadline, calls.append, "call")
    guard.when_idle(broken)
    for _ in range(100):
        if "broken" in calls:
            break
        time.sleep(0.01)
    assert guard.call(deadline, lambda: 7) == 7  # the worker goes on after the failed step
    assert calls.count("broken") == 1

    gate = threading.Event()
    with pytest.raises(StoreError):
        guard.call(Deadline(0.05), gate.wait, 5.0)  # misses its bound: the store is skipped

    def noted() -> bool:
        calls.append("while skipped")
        return False

    guard.when_idle(noted)
    gate.set()
    time.sleep(0.1)
    assert "while skipped" not in calls
    guard.close()


def test_a_fifo_in_a_spares_place_does_not_hold_the_write(tmp_path: Path) -> None:
    store = _with_spares(tmp_path)
    newest = store._spares[str(_results(store, "s"))][-1]
    os.unlink(newest)
    os.mkfifo(newest)
    done = threading.Event()

    def write() -> None:
        store.put_many("s", {_key(1): b"entry"})
        done.set()

    threading.Thread(target=write, daemon=True).start()
    assert done.wait(5.0), "a write waited on a FIFO left in a spare's place"
    assert store.get("s", _key(1)) == b"entry"


def test_a_spare_removed_as_stale_between_its_open_and_its_link_is_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolbudget.store import dir as dir_module

    store = _with_spares(tmp_path)
    opened = dir_module._open_spare

    def swept_after_open(path: str) -> int | None:
        fd = opened(path)
        os.unlink(path)  # another process's sweep took it for a stale temp file
        return fd

    monkeypatch.setattr(dir_module, "_open_spare", swept_after_open)
    assert store.put_many("s", {_key(1): b"entry"}) == set()
    assert store.get("s", _key(1)) == b"entry"


def test_a_spare_whose_mode_was_opened_up_gives_a_private_entry(tmp_path: Path) -> None:
    store = _with_spares(tmp_path)
    for path in store._spares[str(_results(store, "s"))]:
        os.chmod(path, 0o644)
    store.put_many("s", {_key(1): b"secret"})
    entry = _results(store, "s") / f"{_key(1)}.txt"
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o600


def test_a_put_of_a_held_entry_makes_no_file_and_takes_no_spare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirStore(tmp_path, sweep=False)
    store.put_many("s", {_key(0): b"held"})
    _idle_until_done(store)
    spares = list(store._spares[str(_results(store, "s"))])
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str, *args: object, **kwargs: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting_open)
    assert store.put_many("s", {_key(0): b"held"}) == set()
    assert opened == []
    assert store._spares[str(_results(store, "s"))] == spares


def test_a_forked_child_does_not_write_into_its_parents_spares(tmp_path: Path) -> None:
    store = _with_spares(tmp_path)
    results = _results(store, "s")
    spares = list(store._spares[str(results)])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one write, then report which file it went to
        try:
            store.put_many("s", {_key(1): b"child"})
            inode = os.lstat(results / f"{_key(1)}.txt").st_ino
            os.write(write, str(inode).encode())
        finally:
            os._exit(0)
    os.close(write)
    child_inode = int(os.read(read, 100) or b"0")
    os.close(read)
    os.waitpid(pid, 0)
    assert child_inode
    assert all(os.lstat(path).st_ino != child_inode for path in spares)
    assert all(os.lstat(path).st_size == 0 for path in spares)
    assert store._spares[str(results)] == spares  # the parent's own, untouched


def test_idle_work_of_several_threads_keeps_no_more_than_the_spares_wanted(tmp_path: Path) -> None:
    store = DirStore(tmp_path, sweep=False)
    store.put_many("s", {_key(0): b"x"})
    threads = [threading.Thread(target=_idle_until_done, args=(store,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(_parts(_results(store, "s"))) == SPARES


def test_settle_waits_for_the_idle_work_left_to_the_worker() -> None:
    guard = StoreGuard("test:")
    assert guard.settle(0.0)  # no worker yet: nothing left
    guard.call(Deadline(10.0), lambda: None)
    gate = threading.Event()
    steps = [0]

    def step() -> bool:
        gate.wait(5.0)
        steps[0] += 1
        return steps[0] < 3

    guard.when_idle(step)
    assert not guard.settle(0.05)  # held at the gate
    gate.set()
    assert guard.settle(5.0)
    assert steps[0] == 3
    guard.close()
