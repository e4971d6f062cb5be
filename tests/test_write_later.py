"""A session that leaves its records for later (``write_later``), as the proxy's do.

The records no marker names (the request's arrival, the schedule's decision,
the records of previews made, the session's records of its own cuts) may
reach the store while the provider answers.
What must still hold: every original a marker names is in the store when
``manage`` returns; the session's own next call writes the records first; the
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
        self.log: list[list[bytes]] = []
        """The entries of each write, in order."""

    def put_many(self, session: str, items: dict[str, bytes], check: list[str] | None = None) -> set[str]:
        self.started += 1
        self.log.append(list(items.values()))
        try:
            if not self.gate.is_set() and items and all(unnamed(data) for data in items.values()):
                self.held += 1
                self.gate.wait(30)
            return super().put_many(session, items, check)
        finally:
            self.finished += 1


def unnamed(data: bytes) -> bool:
    """Whether an entry is one of the records no marker names: anything but an original."""
    return data.startswith(RECORD)


def run(
    store: str | DirStore,
    bodies: list[dict[str, Any]],
    times: list[float],
    *,
    later: bool,
) -> tuple[list[dict[str, Any]], int]:
    """The managed bodies, and how many calls returned with records left for later."""
    out, deferred = [], 0
    with Session("idle", store=store, policy=Policy(), write_later=later) as session:
        for body, now in zip(bodies, times, strict=True):
            out.append(session.manage(body, "anthropic", now=now).body)
            deferred += session.writes_pending
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


def test_a_call_leaves_its_records_for_later_and_the_next_call_writes_them_first(tmp_path: Path) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), (4,))  # the cold request cuts the early results
    store = GatedDir(tmp_path / "d")
    left = cutting = 0
    with Session("idle", store=store, policy=Policy(), write_later=True) as session:
        for body, now in zip(bodies, times, strict=True):
            mark = len(store.log)
            managed = session.manage(body, "anthropic", now=now)
            if managed.report.keys_written:
                # A call that cut: its originals went in the call, its cuts' records did not.
                cutting += 1
                assert session.writes_pending
            if not session.writes_pending:
                continue
            left += 1
            # Only originals went to the store in the call, the cuts' records too left for later;
            # each original a marker names is there.
            assert not any(any(map(unnamed, items)) for items in store.log[mark:])
            keys = set(re.findall(r"\b[0-9a-f]{32}\b", orjson.dumps(managed.body).decode()))
            assert all(not (store.get("idle", key) or RECORD).startswith(RECORD) for key in keys)
            mark = len(store.log)
            if left % 2:
                session.write_now()
                assert not session.writes_pending
            else:
                session.manage(body, "anthropic", now=now)  # the same request again: a retry
            assert store.log[mark] and all(map(unnamed, store.log[mark]))  # first, the records left
        assert left > 4
        assert cutting


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
