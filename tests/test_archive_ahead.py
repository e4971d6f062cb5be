"""A ``dir:`` session's directory is made ahead of its first cut, and removed at the end if it
holds nothing.

Making a file was most of a first cut's cost (the directory, the holder,
the record log, the results directory, the original: 0.5-0.7 ms each on the
disk these tests were written on). The store's worker makes them once the
session's first request has returned, while no call waits.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
