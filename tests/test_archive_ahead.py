"""A ``dir:`` session's directory is made ahead of its first cut, and removed at the end if it
holds nothing; what a cut leaves for later is done between requests.

Making a file was most of a first cut's cost (the directory, the holder,
the record log, the results directory, the original: 0.5-0.7 ms each on the
disk these tests were written on). The store's worker makes them once the
session's first request has returned, while no call waits. After a cut it
makes spares again and checks the request's keys again, so that the next
request's check is two ``stat`` calls, all asked for as the request returns.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from test_archive_lifetime import history
from toolbudget.policy import Policy
from toolbudget.session import Session
from toolbudget.store.dir import SPARES, DirStore

POLICY = Policy(result_max_chars=2000, tool_caps={}, compaction="off")


def _spares(results: Path) -> dict[int, str]:
    """The spare files in ``results``, by inode."""
    return {os.lstat(results / name).st_ino: name for name in os.listdir(results) if name.endswith(".part")}


def test_the_first_request_readies_the_directory_and_the_first_cut_writes_into_a_spare(
    tmp_path: Path,
) -> None:
    with Session("ahead", store=f"dir:{tmp_path}", policy=POLICY) as session:
        session.manage(history(["short"]), "anthropic")  # nothing to cut
        assert session.last_report is not None and not session.last_report.cuts
        assert session.settle(10.0)
        directory = tmp_path / "toolbudget-ahead"
        assert DirStore(tmp_path, sweep=False).live_holders("ahead")  # held before any cut
        assert (directory / "records").stat().st_size == 0
        spares = _spares(directory / "tool-results")
        assert len(spares) == SPARES

        managed = session.manage(history(["short", "big\n" * 2000]), "anthropic")
        (key,) = managed.report.keys_written
        original = os.lstat(directory / "tool-results" / f"{key}.txt")
        assert original.st_ino in spares  # written into a file made ahead, not a new one
        assert session.original(key) == "big\n" * 2000
    assert (directory / "tool-results" / f"{key}.txt").exists()  # an archive that holds a cut stays


def test_an_archive_that_holds_nothing_is_removed_when_its_last_holder_ends(tmp_path: Path) -> None:
    body = history(["short"])
    first = Session("empty", store=f"dir:{tmp_path}", policy=POLICY)
    second = Session("empty", store=f"dir:{tmp_path}", policy=POLICY)
    try:
        for session in (first, second):
            session.manage(body, "anthropic")
            assert session.settle(10.0)
        directory = tmp_path / "toolbudget-empty"
        assert len(DirStore(tmp_path, sweep=False).live_holders("empty")) == 2
        first.close()
        assert directory.is_dir()  # the other session still holds it
        assert len(DirStore(tmp_path, sweep=False).live_holders("empty")) == 1
    finally:
        first.close()
        second.close()
    assert not directory.exists()


def test_release_keeps_an_archive_with_a_record_a_write_under_way_or_a_file_of_someone_else(
    tmp_path: Path,
) -> None:
    store = DirStore(tmp_path, sweep=False)
    for session, leave in (("logged", "records"), ("writing", "tool-results/k.part"), ("notes", "notes.txt")):
        holder = store.hold(session)
        store.ready(session)
        directory = tmp_path / f"toolbudget-{session}"
        (directory / leave).write_bytes(b"x")
        store.release(session, holder)
        assert (directory / leave).read_bytes() == b"x"
        assert not store.live_holders(session)


def test_a_session_dropped_unclosed_leaves_no_empty_archive(tmp_path: Path) -> None:
    # The idle step keeps no reference to its session: one dropped unclosed is collected, and its
    # lease lets go of the holder (and the empty archive) as before.
    session = Session("dropped", store=f"dir:{tmp_path}", policy=POLICY)
    session.manage(history(["short"]), "anthropic")
    assert session.settle(10.0)
    assert DirStore(tmp_path, sweep=False).live_holders("dropped")
    del session
    gc.collect()
    assert not (tmp_path / "toolbudget-dropped").exists()


def test_a_process_that_exits_without_closing_leaves_no_empty_archive(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_archive_lifetime import history
        from toolbudget import Session
        session = Session("exits", store={f"dir:{tmp_path}"!r})
        session.manage(history(["short"]), "anthropic")
        assert session.settle(10.0)
        from toolbudget.store.dir import DirStore
        assert DirStore({str(tmp_path)!r}, sweep=False).live_holders("exits")
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert not (tmp_path / "toolbudget-exits").exists()


def test_after_a_cut_the_worker_checks_the_keys_again_so_the_next_request_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cut changes the results directory, so the check after it cannot take the directory's
    # time for what it found before. The worker checks again between requests (after making
    # its spares, which change the directory too), and the next request's check is two stats.
    looked: list[int] = []
    sizes_of = DirStore._sizes

    def counted(self: DirStore, session: str, keys: list[str]) -> dict[str, int | None]:
        looked.append(threading.get_ident())
        return sizes_of(self, session, keys)

    monkeypatch.setattr(DirStore, "_sizes", counted)
    with Session("again", store=f"dir:{tmp_path}", policy=POLICY) as session:
        first = session.manage(history(["big\n" * 2000]), "anthropic")
        assert first.report.keys_written
        assert session.settle(10.0)
        looked.clear()
        later = session.manage(history(["big\n" * 2000, "short"]), "anthropic")
        assert later.report.cuts and not later.report.keys_written
        assert threading.get_ident() not in looked  # the request looked at no key
        # The vouching still sees a change: a removed original is written again.
        (key,) = first.report.keys_written
        (tmp_path / "toolbudget-again" / "tool-results" / f"{key}.txt").unlink()
        again = session.manage(history(["big\n" * 2000, "short", "short"]), "anthropic")
        assert again.report.keys_written == (key,)
        assert session.original(key) == "big\n" * 2000


def test_the_check_again_waits_for_a_time_that_vouches_where_times_keep_to_the_tick(tmp_path: Path) -> None:
    store = DirStore(tmp_path, sweep=False)
    store.fine = False
    key = "ab" * 16
    assert store.put_many("s", {key: b"original"}) == set()
    step = store.recheck("s", [key], {key: 8})
    assert step() is True  # the directory changed just now: not yet
    deadline = time.monotonic() + 5
    while step() and time.monotonic() < deadline:
        pass
    assert "s" in store._checked  # checked once the time was old enough to vouch
    store.close()
    assert store.recheck("s", [key], None)() is False  # a closed store does nothing


def test_the_idle_work_a_cut_leaves_is_handed_to_the_worker_as_the_request_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run while the request goes on, the spares and the check again took the interpreter's lock
    # from it between their system calls.
    from toolbudget.store.guard import StoreGuard

    asked: list[bool] = []  # whether a request was under way when idle work was asked for
    when_idle = StoreGuard.when_idle
    session = Session("later", store=f"dir:{tmp_path}", policy=POLICY)

    def noted(self: StoreGuard, step: Any) -> None:
        asked.append(getattr(session._local, "deadline", None) is not None)
        when_idle(self, step)

    monkeypatch.setattr(StoreGuard, "when_idle", noted)
    with session:
        session.manage(history(["short"]), "anthropic")
        assert session.settle(10.0)
        asked.clear()
        managed = session.manage(history(["short", "big\n" * 2000]), "anthropic")
        assert managed.report.keys_written
        assert asked and not any(asked)  # spares and the check again, asked for after the request
        assert session.settle(10.0)
        spares = _spares(tmp_path / "toolbudget-later" / "tool-results")
        assert len(spares) == SPARES
