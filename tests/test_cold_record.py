"""Idle gaps are decided once and recorded with the session's archive.

A request after a gap longer than the cache's TTL is cold, and the schedule
compacts everything eligible there. The decision depends on time, which the
history does not hold, so it is written to the session's store: a session made
again (after a restart, in another process, on another replica reading the same
store) gives the bytes one session running throughout would have given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bash_history import bash_history
from redis_server import RedisServer, serve_for_test
from toolbudget import InputError, to_request
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.replay import requests_of
from toolbudget.session import Session
from toolbudget.store import MemoryStore, Store, open_store

GAP = 600.0  # longer than the 5-minute cache's TTL


def conversation(turns: int = 14, size: int = 3_200) -> Conversation:
    """Results just over the compaction minimum: at Anthropic's write price no rewrite pays
    for a while, so only a cold request compacts the early ones."""
    return bash_history(turns, size)


def bodies_of(convo: Conversation) -> list[dict[str, Any]]:
    return [to_request(prefix, "anthropic", model="m") for prefix in requests_of(convo)]


def arrivals(count: int, gaps: tuple[int, ...]) -> list[float]:
    """Ten seconds apart, and ``GAP`` seconds before each request in ``gaps``."""
    out, now = [], 1_000_000.0
    for n in range(count):
        now += GAP if n in gaps else 10.0
        out.append(now)
    return out


def managed(
    store: str | Store,
    bodies: list[dict[str, Any]],
    times: list[float] | None,
    policy: Policy | None = None,
) -> list[dict[str, Any]]:
    with Session("idle", store=store, policy=policy or Policy()) as session:
        return [
            session.manage(body, "anthropic", now=None if times is None else times[n]).body
            for n, body in enumerate(bodies)
        ]


_SCRIPT = """
import sys, orjson
from toolbudget.session import Session
data = orjson.loads(sys.stdin.buffer.read())
with Session("idle", store=data["store"]) as session:
    out = [session.manage(b, "anthropic", now=t).body for b, t in zip(data["bodies"], data["times"])]
sys.stdout.buffer.write(orjson.dumps(out))
"""


def in_process(store: str, bodies: list[dict[str, Any]], times: list[float]) -> list[Any]:
    """The requests managed by a fresh Python process on ``store``."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input=orjson.dumps({"store": store, "bodies": bodies, "times": times}),
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "7"},
        timeout=300,
    )
    out: list[Any] = orjson.loads(done.stdout)
    return out


SCENARIOS = [
    pytest.param((4,), 7, id="a-gap-before"),  # the new session needs the cold point at 4
    pytest.param((4, 9), 9, id="a-gap-at-the-handover"),  # and the arrival of request 8
]


@pytest.mark.parametrize(("gaps", "k"), SCENARIOS)
def test_the_scenarios_depend_on_what_was_recorded(gaps: tuple[int, ...], k: int) -> None:
    """A session taking over at ``k`` that knew nothing of the earlier requests' times would
    give other bytes: so the tests below show the record at work."""
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), gaps)
    told = managed("memory:", bodies, times)
    blind = managed("memory:", bodies, None)
    assert told[: gaps[0]] == blind[: gaps[0]]
    assert told[gaps[0]] != blind[gaps[0]]
    assert managed("memory:", bodies[k:], times[k:]) != told[k:]


@pytest.mark.parametrize(("gaps", "k"), SCENARIOS)
@pytest.mark.parametrize("url", ["memory", "dir", "sqlite"])
def test_a_session_made_again_on_the_store_continues_with_the_same_bytes(
    url: str, gaps: tuple[int, ...], k: int, tmp_path: Path
) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), gaps)
    whole = managed("memory:", bodies, times)
    stores: dict[str, str | Store] = {
        "memory": MemoryStore(),
        "dir": f"dir:{tmp_path}/d",
        "sqlite": f"sqlite:{tmp_path}/s.db",
    }
    store = stores[url]
    if url == "dir":
        # The dir store's markers name the archived file: the one session runs on that store too.
        whole = managed(store, bodies, times)
        with open_store(str(store)) as opened:
            opened.drop("idle")
    assert managed(store, bodies[:k], times[:k]) == whole[:k]
    assert managed(store, bodies[k:], times[k:]) == whole[k:]


def test_a_retry_sent_to_a_fresh_session_is_not_a_new_arrival() -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), (4,))
    store = MemoryStore()
    whole = managed(store, bodies[:8], times[:8])
    # Request 7 again, much later, to a session made again: it was decided warm, and stays so.
    assert managed(store, [bodies[7]], [times[7] + 3 * GAP]) == whole[7:8]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    yield from serve_for_test(tmp_path / "redis")


def _two_processes(store: str, gaps: tuple[int, ...], k: int) -> None:
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), gaps)
    whole = managed("memory:", bodies, times)
    assert in_process(store, bodies[:k], times[:k]) == whole[:k]
    assert in_process(store, bodies[k:], times[k:]) == whole[k:]


@pytest.mark.parametrize(("gaps", "k"), SCENARIOS)
def test_two_processes_on_one_redis_give_the_bytes_of_one_session(
    redis: RedisServer, gaps: tuple[int, ...], k: int
) -> None:
    _two_processes(redis.url, gaps, k)


@pytest.mark.parametrize(("gaps", "k"), SCENARIOS)
def test_two_processes_on_one_sqlite_file_give_the_bytes_of_one_session(
    tmp_path: Path, gaps: tuple[int, ...], k: int
) -> None:
    _two_processes(f"sqlite:{tmp_path}/archive.db", gaps, k)


def test_replicas_taking_turns_agree_on_every_request(redis: RedisServer) -> None:
    """Two live sessions on one store, each handed every other request (no sticky routing)."""
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), (4, 9))
    whole = managed("memory:", bodies, times)
    with (
        Session("idle", store=redis.url, policy=Policy()) as a,
        Session("idle", store=redis.url, policy=Policy()) as b,
    ):
        out = [(a, b)[n % 2].manage(body, "anthropic", now=times[n]).body for n, body in enumerate(bodies)]
    assert out == whole


class _Counting(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def _missing(self, session: str, keys: list[str]) -> set[str]:
        self.calls.append("missing")
        return super()._missing(session, keys)

    def _put_many(self, session: str, items: dict[str, bytes], check: list[str]) -> set[str]:
        self.calls.append("put_many")
        return super()._put_many(session, items, check)

    def _get_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        self.calls.append("get_many")
        return super()._get_many(session, keys)

    def _get(self, session: str, key: str) -> bytes | None:
        self.calls.append("get")
        return super()._get(session, key)


def test_without_arrival_times_nothing_is_read_or_written() -> None:
    bodies = bodies_of(conversation())
    blind, timed = _Counting(), _Counting()
    managed(blind, bodies, None)
    managed(timed, bodies, arrivals(len(bodies), (4,)))
    archive = set(blind.keys("idle"))
    # Told the times, the session keeps its record beside the archive, and reads it once.
    assert set(timed.keys("idle")) > archive
    assert timed.calls.count("get_many") == 1
    # Not told, the store sees only the archive's traffic: no record, no read.
    assert "get_many" not in blind.calls and "get" not in blind.calls
    assert blind.calls.count("put_many") <= blind.calls.count("missing")
    with Session("idle", store=blind, policy=Policy()) as again:
        for body in bodies:
            again.manage(body, "anthropic")
    assert set(blind.keys("idle")) == archive


def test_the_record_is_one_write_per_timed_request_in_the_archives_trip() -> None:
    bodies = bodies_of(conversation())
    store = _Counting()
    times = arrivals(len(bodies), (4,))
    with Session("idle", store=store, policy=Policy()) as session:
        for n, body in enumerate(bodies):
            before = len(store.calls)
            session.manage(body, "anthropic", now=times[n])
            calls = store.calls[before:]
            # One write carries the record with whatever the archive writes; one read, at the
            # first request the schedule decides (the first with a result).
            assert calls.count("put_many") == 1, (n, calls)
            assert calls.count("get_many") == (n == 1), (n, calls)
            assert "get" not in calls


@pytest.mark.parametrize("now", [float("nan"), float("inf"), "12:00", True])
def test_an_arrival_time_that_is_not_a_number_of_seconds_is_an_input_error(now: Any) -> None:
    body = bodies_of(conversation(2))[-1]
    with Session("idle", store="memory:") as session, pytest.raises(InputError, match="now="):
        session.manage(body, "anthropic", now=now)


def test_a_token_count_before_the_request_does_not_hide_its_gap() -> None:
    """Counting a history's tokens (managed, untimed) decides its point; the request itself,
    sent after an idle gap, is still the first arrival there, and finds the cache cold."""
    bodies = bodies_of(conversation())
    times = arrivals(len(bodies), (4,))
    whole = managed("memory:", bodies, times)
    with Session("idle", store=MemoryStore(), policy=Policy()) as session:
        out = []
        for n, body in enumerate(bodies):
            session.manage(body, "anthropic")  # the count
            out.append(session.manage(body, "anthropic", now=times[n]).body)
    assert out == whole
