"""The dir store's record log: a session's own records appended to one file, read back whole or not at all."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from toolbudget import Session
from toolbudget.policy import Policy
from toolbudget.store import DirStore, _recordlog
from toolbudget.store._recordlog import MARK, RecordLog, frame

KEY = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"
THIRD = "00112233445566778899aabbccddeeff"


def _record(text: str) -> bytes:
    return MARK + text.encode()


def _results(store: DirStore, session: str) -> list[str]:
    return sorted(os.listdir(store.workspace(session) / "tool-results"))


def test_records_go_to_the_log_and_originals_to_files(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    items = {KEY: b"an original", OTHER: _record("cut of x"), THIRD: _record("y")}
    assert store.put_many("s1", items) == set()
    assert _results(store, "s1") == [f"{KEY}.txt"]
    assert (store.workspace("s1") / "records").exists()
    assert store.get("s1", OTHER) == _record("cut of x")
    assert store.get_many("s1", [KEY, OTHER, THIRD]) == {
        KEY: b"an original",
        OTHER: _record("cut of x"),
        THIRD: _record("y"),
    }
    assert store.missing("s1", [KEY, OTHER, THIRD, "ab" * 16]) == {"ab" * 16}
    assert sorted(store.keys("s1")) == sorted([KEY, OTHER, THIRD])
    assert store.path("s1", OTHER) is None  # no file an agent could be pointed at
    # Another process (a store with nothing remembered) reads the same.
    again = DirStore(tmp_path)
    assert again.get_many("s1", [OTHER, THIRD]) == {OTHER: _record("cut of x"), THIRD: _record("y")}
    assert again.missing("s1", [OTHER], {OTHER: len(_record("cut of x"))}) == set()


def test_a_read_of_many_keys_finds_each_where_it_is(tmp_path: Path) -> None:
    """Past a few keys missing from the log, the files are found by one listing: the originals, a
    record kept as a file (it holds the frame byte), and nothing for the keys never written."""
    store = DirStore(tmp_path)
    originals = {f"{i:032x}": b"original %d" % i for i in range(6)}
    logged = {f"{i:032x}": _record(f"record {i}") for i in range(10, 16)}
    as_file = {"ab" * 16: _record("a frame byte \x1e inside")}
    assert store.put_many("s1", {**originals, **logged, **as_file}) == set()
    absent = [f"{i:032x}" for i in range(20, 32)]
    asked = [*absent, *originals, *logged, *as_file]
    for reader in (store, DirStore(tmp_path)):  # this process, and one with nothing remembered
        assert reader.get_many("s1", asked) == {**originals, **logged, **as_file}
        assert reader.get_many("s1", absent) == {}
        assert reader.get_many("s1", [*absent, KEY]) == {}


def test_a_record_held_already_is_not_appended_again(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    store.put_many("s1", {OTHER: _record("once")})
    log = store.workspace("s1") / "records"
    size = log.stat().st_size
    store.put_many("s1", {OTHER: _record("once")})
    DirStore(tmp_path).put_many("s1", {OTHER: _record("once")})
    assert log.stat().st_size == size


def test_a_cutting_request_makes_one_file_per_original(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    log = "\n".join(f"line {n}: " + "x" * 60 for n in range(400))
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": log}]},
        ],
    }
    with Session("one", store=store, policy=Policy()) as session:
        report = session.manage(body, "anthropic").report
    assert len(report.cuts) == 1
    # The original alone is a file; what the cut was of, the text it went out as and the
    # preview's record are in the log.
    assert _results(store, "one") == [f"{report.cuts[0].key}.txt"]
    assert len(store.keys("one")) > 1


def test_a_torn_frame_hides_neither_itself_as_an_entry_nor_the_frames_after_it(tmp_path: Path) -> None:
    path = tmp_path / "records"
    whole = frame(KEY, _record("first"))
    torn = frame(OTHER, _record("second, torn by a kill"))
    path.write_bytes(whole + torn[: len(torn) - 5] + frame(THIRD, _record("third")))
    log = RecordLog(str(path))
    assert log.read([KEY, OTHER, THIRD]) == {KEY: _record("first"), THIRD: _record("third")}


def test_a_frame_that_fails_its_check_is_not_an_entry(tmp_path: Path) -> None:
    path = tmp_path / "records"
    changed = bytearray(frame(OTHER, _record("changed after it was framed")))
    changed[-1] ^= 1
    path.write_bytes(frame(KEY, _record("first")) + bytes(changed))
    assert RecordLog(str(path)).lengths([KEY, OTHER]) == {KEY: len(_record("first"))}


def test_a_frame_still_being_written_shows_once_whole(tmp_path: Path) -> None:
    path = tmp_path / "records"
    data = frame(KEY, _record("written in two parts"))
    path.write_bytes(data[:10])
    log = RecordLog(str(path))
    assert log.held() == []
    with path.open("ab") as file:
        file.write(data[10:])
    assert log.read([KEY]) == {KEY: _record("written in two parts")}


def test_the_first_frame_of_a_key_stands(tmp_path: Path) -> None:
    path = tmp_path / "records"
    path.write_bytes(frame(KEY, _record("first")) + frame(KEY, _record("second, from a racing writer")))
    assert RecordLog(str(path)).read([KEY]) == {KEY: _record("first")}


def test_a_log_replaced_or_removed_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "records"
    path.write_bytes(frame(KEY, _record("old")))
    log = RecordLog(str(path))
    assert log.held() == [KEY]
    path.unlink()
    assert log.held() == []
    replacement = tmp_path / "new"
    replacement.write_bytes(frame(OTHER, _record("new")))
    replacement.rename(path)
    assert log.read([KEY, OTHER]) == {OTHER: _record("new")}


def _append_many(root: str, worker: int) -> None:
    store = DirStore(root, sweep=False)
    for n in range(40):
        key = f"{worker:02x}{n:030x}"
        store.put_many("shared", {key: _record(f"worker {worker} record {n} " + "z" * (n * 97))})


def _keyed() -> list[tuple[str, int, int]]:
    return [(f"{w:02x}{n:030x}", w, n) for w in range(4) for n in range(40)]


def test_appends_of_several_processes_never_tear_one_another(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), w)) for w in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    store = DirStore(tmp_path)
    want = {key: _record(f"worker {w} record {n} " + "z" * (n * 97)) for key, w, n in _keyed()}
    assert store.get_many("shared", [key for key, _, _ in _keyed()]) == want


def test_on_a_network_file_system_records_stay_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DirStore(tmp_path)
    store.local = False  # as on NFS, where appends of two hosts may interleave
    store.put_many("s1", {OTHER: _record("a record")})
    assert _results(store, "s1") == [f"{OTHER}.txt"]
    assert not (store.workspace("s1") / "records").exists()
    assert store.get("s1", OTHER) == _record("a record")


def test_the_mark_is_how_every_record_begins() -> None:
    from toolbudget.budget import CUT_PREFIX, FORM_PREFIX
    from toolbudget.coldrecord import _ARRIVAL, _COLD
    from toolbudget.readback import MADE_PREFIX
    from toolbudget.schedulerecord import PREFIX

    for prefix in (CUT_PREFIX, FORM_PREFIX, MADE_PREFIX, PREFIX, _ARRIVAL, _COLD):
        assert prefix.encode().startswith(_recordlog.MARK)


def test_a_frame_quoted_inside_a_record_is_never_read_as_one(tmp_path: Path) -> None:
    # A record may quote anything a tool printed, a records file included. Torn, its frame is
    # skipped and reading resumes at the next frame start: that must never be one inside it.
    store = DirStore(tmp_path)
    quoted = _record("quoting: ") + frame(OTHER, _record("NOT WHAT WAS PUT")) + b" and more text"
    store.put_many("s1", {KEY: quoted})
    log = store.workspace("s1") / "records"
    if log.exists():
        with log.open("r+b") as file:
            file.truncate(log.stat().st_size - 5)  # a kill in the middle of its append
    assert store.put_many("s1", {OTHER: _record("the real one")}) == set()
    assert DirStore(tmp_path).get("s1", OTHER) == _record("the real one")
    assert store.get("s1", KEY) in (quoted, None)


def test_a_log_made_again_after_a_clean_is_never_read_at_the_old_offsets(tmp_path: Path) -> None:
    # Another process removes the session (``toolbudget clean --session``) and a new run keeps
    # other records: the file system may give the new log the old one's inode number.
    store = DirStore(tmp_path)
    store.put_many("s1", {KEY: _record("from the first run")})
    assert store.get("s1", KEY) == _record("from the first run")
    other = DirStore(tmp_path)
    other.drop("s1")
    other.put_many("s1", {OTHER: _record("from the second run, and longer than the first")})
    assert store.missing("s1", [KEY]) == {KEY}
    assert store.get("s1", OTHER) == _record("from the second run, and longer than the first")
    assert store.put_many("s1", {KEY: _record("kept again")}) == set()
    assert DirStore(tmp_path).get("s1", KEY) == _record("kept again")
