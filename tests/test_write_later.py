"""A session that writes its records after the call (``write_later``), as the proxy's do.

The records no marker names (the request's arrival, the schedule's decision,
the records of previews made) may reach the store while the provider answers.
What must still hold: every original a marker names is in the store when
``manage`` returns; the session's own next call waits for the records first; a
record write that hangs costs the next call no more than the store's bound; the
bytes are those of a session that writes everything in the call, and a session
made again on the store carries on with them; and the proxy answers its client
only once the records are in, since the next request may reach another replica.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy_upstream import upstream
from test_cold_record import SCENARIOS, arrivals, bodies_of, conversation
from toolbudget import Sessions
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import running
from toolbudget.session import Session
from toolbudget.store import DirStore, open_store

RECORD = b"\x00toolbudget: "
CUT_RECORD = b"\x00toolbudget: cut of\x00"


class GatedDir(DirStore):
    """A directory store whose writes of records no marker names wait while its gate is shut,
    and which counts the writes under way."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gate.set()
        self.started = 0
        self.finished = 0
        self.held = 0
        """Writes of records alone that met a shut gate."""

    def put_many(self, session: str, items: dict[str, bytes], check: list[str] | None = None) -> set[str]:
        self.started += 1
        try:
            if not self.gate.is_set() and items and all(unnamed(data) for data in items.values()):
                self.held += 1
                self.gate.wait(30)
            return super().put_many(session, items, check)
        finally:
            self.finished += 1


def unnamed(data: bytes) -> bool:
    """Whether an entry is one of the records no marker names (a cut's record is checked)."""
    return data.startswith(RECORD) and not data.startswith(CUT_RECORD)


def run(
    store: str | DirStore,
    bodies: list[dict[str, Any]],
    times: list[float],
    *,
    later: bool,
    policy: Policy | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """The managed bodies, and how many calls returned with writes still under way."""
    out, deferred = [], 0
    with Session("idle", store=store, policy=policy or Policy(), write_later=later) as session:
        for body, now in zip(bodies, times, strict=True):
            out.append(session.manage(body, "anthropic", now=now).body)
            deferred += session.pending_write is not None
    return out, deferred


@pytest.mark.parametrize(("gaps", "k"), SCENARIOS)
def test_writing_later_gives_the_same_bytes_and_a_session_made_again_carries_on(
    gaps: tuple[int, ...], k: int, tmp_path: Path
) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), gaps)
    url = f"dir:{tmp_path}/d"
    # The dir store's markers name the archived file: every run is on the one directory.
    whole, _ = run(url, bodies, times, later=False)
    with open_store(url) as opened:
        opened.drop("idle")
    later, deferred = run(url, bodies, times, later=True)
    assert later == whole
    assert deferred > 0  # the records did follow the calls
    with open_store(url) as opened:
        opened.drop("idle")
    # Written later by one session, read by the next: the arrivals and cold points it needs are there.
    first, _ = run(url, bodies[:k], times[:k], later=True)
    rest, _ = run(url, bodies[k:], times[k:], later=False)
    assert first + rest == whole


def test_a_call_returns_before_its_records_are_written_and_the_next_call_waits_for_them(
    tmp_path: Path,
) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), (4,))  # the cold request cuts the early results
    store = GatedDir(tmp_path / "d")
    with Session("idle", store=store, policy=Policy(), write_later=True) as session:
        for n, (body, now) in enumerate(zip(bodies, times, strict=True)):
            store.gate.clear()
            started = time.monotonic()
            managed = session.manage(body, "anthropic", now=now)
            assert time.monotonic() - started < 10  # never the 30 s the shut gate holds a write
            later = session.pending_write
            if later is not None and n > 4:
                break  # a request after the cold one whose records follow it
            store.gate.set()  # too early, or one whose records went with its new originals
            if later is not None:
                later.result()
        else:
            raise AssertionError("no request left its records to follow it")
        deadline = time.monotonic() + 5
        while store.held < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.held >= 1  # the records' write reached the shut gate, after the call returned
        assert not later.done()
        # What the markers name is kept already: each original is in the store.
        keys = set(re.findall(r"\b[0-9a-f]{32}\b", orjson.dumps(managed.body).decode()))
        assert keys
        assert all(not store.get("idle", key).startswith(RECORD) for key in keys)
        threading.Timer(0.3, store.gate.set).start()
        started = time.monotonic()
        session.manage(bodies[n + 1], "anthropic", now=times[n + 1])
        assert time.monotonic() - started >= 0.25  # it waited for the write before it
        assert later.done()


def test_a_record_write_that_hangs_costs_the_next_call_only_the_stores_bound(tmp_path: Path) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), ())
    store = GatedDir(tmp_path / "d")
    policy = Policy(store_timeout=0.3)
    try:
        with Session("idle", store=store, policy=policy, write_later=True) as session:
            for body, now in zip(bodies[:-2], times[:-2], strict=True):
                session.manage(body, "anthropic", now=now)
            store.gate.clear()
            session.manage(bodies[-2], "anthropic", now=times[-2])
            started = time.monotonic()
            managed = session.manage(bodies[-1], "anthropic", now=times[-1])
            assert time.monotonic() - started < 3
            assert managed.body["messages"]
    finally:
        store.gate.set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_proxy_answers_only_once_the_records_are_in_the_store(stream: bool, tmp_path: Path) -> None:
    bodies = [{**body, "stream": stream} for body in bodies_of(conversation())]
    store = GatedDir(tmp_path / "d")
    waited = []
    with upstream() as (_, url), Sessions(store=store, policy=Policy(), write_later=True) as pool:
        config = ProxyConfig(upstreams=upstreams_of(url), policy=Policy())
        with running(config, sessions=pool) as proxy:
            for n, body in enumerate(bodies):
                # Every other request's records are held a while: the answer must wait for them.
                if n % 2:
                    store.gate.clear()
                    threading.Timer(0.2, store.gate.set).start()
                started = time.monotonic()
                with httpx.stream(
                    "POST",
                    proxy.url + "/v1/messages",
                    content=orjson.dumps(body),
                    headers={"content-type": "application/json", "x-toolbudget-session": "later"},
                    timeout=60,
                ) as answer:
                    assert answer.status_code == 200
                    chunks = answer.iter_raw()
                    first = next(chunks)
                    # No write under way once the client has its first byte.
                    assert store.finished == store.started
                    waited.append(time.monotonic() - started)
                    rest = b"".join(chunks)
                assert (b"event: message_stop" in first + rest) == stream
    assert store.held > 0
    held = [seconds for n, seconds in enumerate(waited) if n % 2]
    assert min(held) >= 0.15
