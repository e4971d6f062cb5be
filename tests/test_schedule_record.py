"""A session started again resumes the compaction schedule from the decisions its store holds.

The proof that resuming is sound is that the fresh session sends the very
bytes of the warm session and of one that decided every point again, on the
longest shared sessions on two APIs, in this process and in another; the
proof that it is worth it is that it decides fewer points (none at all when
every request wrote to the store, as timed requests do). A record of another
policy, of other cold points, a torn one, or one of a history that differs in
an earlier message is never used: the session decides again from the start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from test_readback import Counting, _longest, bodies
from toolbudget import compaction
from toolbudget.compaction import LEVEL_SUMMARY
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.schedulerecord import EVERY, PREFIX, Decided, decode, encode
from toolbudget.session import Session, _SessionArchive
from toolbudget.store._recordlog import RecordLog, frame
from toolbudget.store.dir import DirStore
from toolbudget.store.guard import Deadline


class Decisions:
    """Counts the schedule's decisions (one a request point decided)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        decide = compaction._decide

        def counted(*args: Any, **kwargs: Any) -> bool:
            self.count += 1
            return decide(*args, **kwargs)

        monkeypatch.setattr(compaction, "_decide", counted)


def _manage(
    sid: str, store: DirStore, policy: Policy, body: dict[str, Any], api: str, now: float | None = None
) -> bytes:
    with Session(sid, store=store, policy=policy) as session:
        return orjson.dumps(session.manage(orjson.loads(orjson.dumps(body)), api, now=now).body)


def _scratch(
    sid: str, store: DirStore, policy: Policy, body: dict[str, Any], api: str, decisions: Decisions
) -> tuple[bytes, int]:
    """A cold session on the same store that reads nothing back: its bytes and its decisions."""
    saved = _SessionArchive.read_made
    _SessionArchive.read_made = lambda self, keys: {}  # type: ignore[method-assign]
    try:
        decisions.count = 0
        out = _manage(sid, store, policy, body, api)
        return out, decisions.count
    finally:
        _SessionArchive.read_made = saved  # type: ignore[method-assign]


def _fresh_and_scratch(
    store: DirStore, policy: Policy, body: dict[str, Any], decisions: Decisions
) -> tuple[int, int]:
    """A fresh session's decisions and a from-scratch one's on the same request, whose bytes
    must be the same."""
    decisions.count = 0
    got = _manage("turns", store, policy, body, "anthropic")
    fresh = decisions.count
    scratch, every = _scratch("turns", store, policy, body, "anthropic", decisions)
    assert got == scratch
    return fresh, every


def _warm(
    sid: str, store: DirStore, policy: Policy, requests: list[dict[str, Any]], api: str, timed: bool = False
) -> bytes:
    with Session(sid, store=store, policy=policy) as warm:
        for n, body in enumerate(requests):
            managed = warm.manage(body, api, now=1000.0 + n if timed else None)
    return orjson.dumps(managed.body)


@pytest.mark.shared
@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
def test_a_fresh_session_resumes_the_schedule_and_sends_the_same_bytes(
    real: list[tuple[str, Conversation]], api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = Policy()
    decisions = Decisions(monkeypatch)
    fresh_total = scratch_total = 0
    for n, (name, conversation) in enumerate(_longest(real, 6)):
        store = Counting(tmp_path / f"s{n}")
        sid = f"resume-{n}"
        requests = list(bodies(conversation, api))
        want = _warm(sid, store, policy, requests, api)

        store.calls.clear()
        decisions.count = 0
        got = _manage(sid, store, policy, requests[-1], api)
        fresh, calls = decisions.count, list(store.calls)
        scratch, scratch_decisions = _scratch(sid, store, policy, requests[-1], api, decisions)

        assert got == scratch == want, name
        assert scratch_decisions >= len(requests) - 1, name  # every request point
        assert fresh <= scratch_decisions, name
        # The read-back's one batch, at most one more read (the record where the session last
        # wrote), and the one check of the keys its markers name.
        assert calls.count("get_many") in (1, 2) and "get" not in calls, (name, calls)
        assert calls.count("missing") == 1, (name, calls)
        fresh_total += fresh
        scratch_total += scratch_decisions
    # Untimed, a session writes only when it has something new to keep: the fresh one decides the
    # points after the last of those writes, never the ones before.
    assert fresh_total < scratch_total * 0.6, (fresh_total, scratch_total)


@pytest.mark.shared
@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
def test_a_timed_session_resumes_at_its_last_request_and_its_next(
    real: list[tuple[str, Conversation]], api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every timed request writes (its arrival), so its record goes with every request: a fresh
    session decides nothing for a request managed before, and only the new point of the next."""
    policy = Policy()
    decisions = Decisions(monkeypatch)
    for n, (name, conversation) in enumerate(_longest(real, 3)):
        requests = list(bodies(conversation, api))
        now = 1000.0 + len(requests) - 1
        sid = f"timed-{n}"
        store = Counting(tmp_path / f"s{n}")
        want = _warm(sid, store, policy, requests, api, timed=True)
        decisions.count = 0
        assert _manage(sid, store, policy, requests[-1], api, now=now) == want, name
        assert decisions.count == 0, (name, decisions.count)  # the same request again: nothing

        # The next request: the warm session decided it itself above (``want``); a fresh one on a
        # store that the warm session left one request earlier decides its new point alone.
        shutil.rmtree(tmp_path / f"s{n}")
        store = Counting(tmp_path / f"s{n}")  # the same place: markers name the same paths
        _warm(sid, store, policy, requests[:-1], api, timed=True)
        decisions.count = 0
        assert _manage(sid, store, policy, requests[-1], api, now=now) == want, name
        assert decisions.count == 1, (name, decisions.count)


POLICY = Policy(context_window_tokens=30_000)
"""A window the synthetic session passes: its schedule compacts at watermark events."""


def _turns(count: int, size: int = 8_000) -> list[dict[str, Any]]:
    """An Anthropic session whose large results compact as they age: each request a new body."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the build"}]
    out = []
    for i in range(count):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"c{i}", "name": "Bash", "input": {}}],
            }
        )
        text = f"line {i} of the build log\n" * (size // 26) + f"the end of run {i}\n"
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{i}", "content": text}]}
        )
        out.append({"model": "claude-sonnet-4-5-20250929", "max_tokens": 100, "messages": list(messages)})
    return out


def _records(store: DirStore) -> dict[Path, dict[str, bytes]]:
    """Every session's record log, with what it holds (the schedule's records among the rest)."""
    logs = {}
    for path in Path(store.root).rglob("records"):
        log = RecordLog(str(path))
        logs[path] = log.read(log.held())
    return logs


def _schedule_records(store: DirStore) -> list[bytes]:
    return [
        data
        for held in _records(store).values()
        for data in held.values()
        if data.startswith(PREFIX.encode())
    ]


def _resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[DirStore, list[dict[str, Any]], Decisions]:
    store = DirStore(tmp_path / "s")
    requests = _turns(24)
    _warm("turns", store, POLICY, requests, "anthropic", timed=True)
    assert _schedule_records(store)
    return store, requests, Decisions(monkeypatch)


def test_the_session_resumes_from_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control for the cases below: the same session, untouched, resumes."""
    store, requests, decisions = _resumes(tmp_path, monkeypatch)
    fresh, every = _fresh_and_scratch(store, POLICY, requests[-1], decisions)
    assert fresh == 0 and every == 24


def test_a_long_session_that_writes_nothing_keeps_its_decision_every_few_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session that has written nothing for many requests (nothing new to cut) left no record
    after its last write, and a fresh session decided every point since (1,625 points of the
    2,000-turn benchmark's last request). Every ``EVERY``-th point's decision is now kept between
    requests, so a fresh session decides fewer than ``EVERY`` points, with the same bytes."""
    store = DirStore(tmp_path / "s")
    requests = _turns(70, size=400)  # nothing is cut or compacted: no request writes
    with Session("turns", store=store, policy=POLICY) as warm:
        for body in requests:
            warm.settle(10.0)
            want = orjson.dumps(warm.manage(orjson.loads(orjson.dumps(body)), "anthropic").body)
            assert not warm.last_report or not warm.last_report.keys_written
        warm.settle(10.0)
    assert len(_schedule_records(store)) == 70 // EVERY
    decisions = Decisions(monkeypatch)
    fresh, every = _fresh_and_scratch(store, POLICY, requests[-1], decisions)
    assert every == 70 and fresh < EVERY, (fresh, every)
    assert _manage("turns", store, POLICY, requests[-1], "anthropic") == want


def test_a_parsed_request_keeps_its_16th_decision_too(tmp_path: Path) -> None:
    """``manage_request`` (a request already parsed) keeps the 16th point's record as ``manage``
    does: a cold session of either kind reads it back."""
    from toolbudget import wire

    store = DirStore(tmp_path / "s")
    with Session("turns", store=store, policy=POLICY) as session:
        for body in _turns(EVERY, size=400):
            session.settle(10.0)
            session.manage_request(wire.parse(orjson.loads(orjson.dumps(body)), "anthropic"))
        session.settle(10.0)
    assert len(_schedule_records(store)) == 1


def test_no_record_reaches_a_store_after_its_session_closes(tmp_path: Path) -> None:
    """The record kept at a 16th point is written by the store's worker after the request; on a
    store without holders (a ``sqlite:`` store given as an object) the close did not wait for it,
    and it landed after ``close`` returned, nearly every time when closed at once."""
    from toolbudget.store.sqlite import SqliteStore

    late = 0
    for trial in range(5):
        path = tmp_path / f"s{trial}.sqlite"
        store = SqliteStore(str(path))
        session = Session("turns", store=store, policy=POLICY)
        for body in _turns(EVERY, size=400):  # nothing is cut: only the 16th point's record is written
            session.settle(10.0)
            session.manage(orjson.loads(orjson.dumps(body)), "anthropic")
        time.sleep(0)  # the worker begins the record's write
        session.close()
        at_close = sorted(store.keys("turns"))
        time.sleep(0.2)
        late += sorted(store.keys("turns")) != at_close
        store.close()
    assert late == 0


def _busy() -> bool:
    time.sleep(0.2)
    return False


@pytest.mark.parametrize("kind", ["dir", "sqlite"])
def test_a_session_closed_right_after_its_16th_request_keeps_its_record(tmp_path: Path, kind: str) -> None:
    """The store's worker writes the 16th point's record between requests; a close that comes
    before it does (the worker busy with other idle work, or not yet woken) lost the record, and a
    session met cold decided every point again. The close writes it, in the trip that ends the
    session, before it returns; and nothing reaches the store after that."""
    from toolbudget.store.sqlite import SqliteStore

    for trial in range(3):
        store: Any = (
            DirStore(tmp_path / f"d{trial}") if kind == "dir" else SqliteStore(str(tmp_path / f"{trial}.db"))
        )
        session = Session("turns", store=store, policy=POLICY)
        bodies = _turns(EVERY, size=400)  # nothing is cut: only the 16th point's record is written
        for body in bodies[:-1]:
            session.manage(orjson.loads(orjson.dumps(body)), "anthropic")
        session.settle(10.0)
        guard = session._guard_of(session.store)
        guard.call(Deadline(10.0), lambda: None)  # its worker, if the store had none yet
        guard.when_idle(_busy)  # the worker is busy when the record comes
        session.manage(orjson.loads(orjson.dumps(bodies[-1])), "anthropic")
        session.close()
        held = store.get_many("turns", sorted(store.keys("turns")))
        assert sum(data.startswith(PREFIX.encode()) for data in held.values()) == 1
        time.sleep(0.3)
        assert store.get_many("turns", sorted(store.keys("turns"))) == held
        store.close()


def test_a_session_collected_on_its_stores_worker_ends_at_once(tmp_path: Path) -> None:
    """A session dropped without ``close`` is ended when it is collected, and a garbage collection
    may run on its store's worker (set off by the worker's own work): the end then waited on itself
    for the store's bound, opened the breaker and left the holder live. It ends there at once now,
    with its record written and its directory let go of."""
    import gc

    store = DirStore(tmp_path / "s")
    session = Session("turns", store=store, policy=Policy(store_timeout=2.0))
    for body in _turns(EVERY, size=6_000):  # cuts: the directory is held; the 16th record pending
        session.manage(orjson.loads(orjson.dumps(body)), "anthropic")
    session.settle(10.0)
    assert store.live_holders("turns")
    guard = session._guard_of(session.store)
    lease = session._lease
    late = "k" + "1" * 31

    def write() -> None:
        store.put_many("turns", {late: b"kept at the end"})

    lease.records.append(write)  # a record the worker has not reached
    took: list[float] = []

    def collect() -> bool:
        began = time.monotonic()
        gc.collect()
        took.append(time.monotonic() - began)
        return False

    was = gc.isenabled()
    gc.disable()  # collected below, on the worker, and nowhere else
    try:
        del session
        guard.when_idle(collect)
        assert guard.settle(10.0)
    finally:
        if was:
            gc.enable()
    assert lease.ended
    assert took and took[0] < 1.0, took
    assert not guard.open
    assert not store.live_holders("turns")
    assert store.get_many("turns", [late]) == {late: b"kept at the end"}


def test_a_record_of_another_policy_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, requests, decisions = _resumes(tmp_path, monkeypatch)
    other = Policy(context_window_tokens=30_000, microcompact_summarize_turns=3)
    fresh, every = _fresh_and_scratch(store, other, requests[-1], decisions)
    assert fresh == every == 24


def test_a_record_of_other_cold_points_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm session saw an idle gap (a cold point); a fresh one told no times knows none."""
    store = DirStore(tmp_path / "s")
    requests = _turns(24)
    with Session("turns", store=store, policy=POLICY) as warm:
        for n, body in enumerate(requests):
            warm.manage(body, "anthropic", now=1000.0 + n + (4000.0 if n >= 12 else 0.0))
        assert warm._schedule.cold_points
    decisions = Decisions(monkeypatch)
    fresh, every = _fresh_and_scratch(store, POLICY, requests[-1], decisions)
    assert fresh == every == 24


def test_a_torn_record_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, requests, decisions = _resumes(tmp_path, monkeypatch)
    # Each schedule record short by five bytes, under a frame that checks out: the store serves
    # it, and the record itself must be refused.
    for path, held in _records(store).items():
        path.write_bytes(
            b"".join(
                frame(key, data[:-5] if data.startswith(PREFIX.encode()) else data)
                for key, data in held.items()
            )
        )
    fresh, every = _fresh_and_scratch(store, POLICY, requests[-1], decisions)
    assert fresh == every == 24


def test_a_history_that_differs_in_an_earlier_message_is_decided_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, requests, decisions = _resumes(tmp_path, monkeypatch)
    body = orjson.loads(orjson.dumps(requests[-1]))
    body["messages"][6]["content"][0]["content"] += "one more line\n"
    decisions.count = 0
    got = _manage("turns", store, POLICY, body, "anthropic")
    fresh = decisions.count
    scratch, every = _scratch("turns", store, POLICY, body, "anthropic", decisions)
    assert got == scratch
    assert fresh == every == 24


def test_the_record_compacts_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scenario is one where the schedule has decided something to resume: results summarised."""
    store, _, _ = _resumes(tmp_path, monkeypatch)
    found = [decode(data, 49) for data in _schedule_records(store)]
    last = next(d for d in found if d is not None)
    assert LEVEL_SUMMARY in last.levels and last.events


def test_a_record_reads_back_only_whole_and_for_its_point() -> None:
    decided = Decided(49, "ab" * 16, (2, 2, 1, 0, 0), 0, 1234.5, 2345.25, (3, 7))
    data = encode(decided)
    assert data.startswith(PREFIX.encode())
    assert decode(data, 49) == decided
    assert decode(data, 47) is None
    for cut in (1, 10, len(data) // 2, len(data) - 1):
        assert decode(data[:cut], 49) is None
    assert decode(data.replace(b"\n3,7\n", b"\n3,8\n"), 49) is None


_SCRIPT = """
import sys, orjson
from toolbudget.session import Session
data = orjson.loads(sys.stdin.buffer.read())
with Session(data["sid"], store=data["store"]) as session:
    out = session.manage(data["body"], data["api"]).body
sys.stdout.buffer.write(orjson.dumps(out))
"""


@pytest.mark.shared
def test_another_process_resumes_and_sends_the_same_bytes(
    real: list[tuple[str, Conversation]], tmp_path: Path
) -> None:
    for n, (name, conversation) in enumerate(_longest(real, 2)):
        for api in ("anthropic", "openai-chat"):
            store = DirStore(tmp_path / f"s{n}{api}")
            requests = list(bodies(conversation, api))
            want = _warm(f"proc-{n}", store, Policy(), requests, api)
            done = subprocess.run(
                [sys.executable, "-c", _SCRIPT],
                input=orjson.dumps(
                    {"sid": f"proc-{n}", "store": f"dir:{store.root}", "body": requests[-1], "api": api}
                ),
                capture_output=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": "11"},
                timeout=300,
            )
            assert orjson.dumps(orjson.loads(done.stdout)) == want, (name, api)


def test_a_record_is_one_of_the_sessions_own_records_not_an_original() -> None:
    """``stats`` and recall skip what begins with the session's own prefix: the record does."""
    from toolbudget.mcpserver import _OWN

    assert encode(Decided(3, "", (), 0, 0.0, 0.0, ())).startswith(_OWN)
