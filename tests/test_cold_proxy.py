"""The proxy tells the schedule when each managed request arrived.

The proxy runs in this process (a thread), so the clock it reads
(``toolbudget.proxy.app.arrival_time``) is replaced by a script of times with
one idle gap longer than the cache's TTL. The request after the gap goes
upstream with everything eligible compacted; and a proxy started again on the
same store (a restart, another replica) carries on with the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from bash_history import bash_history
from proxy_upstream import upstream
from toolbudget import to_request
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig, app
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import running
from toolbudget.replay import requests_of

GAP_AT = 7


def conversation(turns: int = 10, size: int = 3_200) -> Conversation:
    """Results just over the compaction minimum: only a cold request compacts them early."""
    return bash_history(turns, size, call_prefix="toolu_")


BODIES = [to_request(p, "anthropic", model="claude-sonnet-4-5") for p in requests_of(conversation())]


def times(gap: float | None) -> list[float]:
    out, now = [], 3_000_000.0
    for n in range(len(BODIES)):
        now += gap if gap is not None and n == GAP_AT else 10.0
        out.append(now)
    return out


Clock = Callable[[list[float]], None]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    def script(values: list[float]) -> None:
        left = iter(values)
        monkeypatch.setattr(app, "arrival_time", lambda: next(left))

    return script


def through_proxy(store: str, bodies: list[dict[str, Any]]) -> list[bytes]:
    """Each body posted to a proxy started on ``store``; what reached the upstream."""
    with upstream() as (scripted, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=store, policy=Policy())
        with running(config) as proxy:
            for body in bodies:
                answer = httpx.post(
                    proxy.url + "/v1/messages",
                    content=orjson.dumps(body),
                    headers={
                        "content-type": "application/json",
                        "x-api-key": "sk-one",
                        "x-toolbudget-session": "idle",
                    },
                    timeout=60,
                )
                assert answer.status_code == 200, answer.text
        return [got.body for got in scripted.received]


def markers(body: bytes) -> int:
    return body.count(b"[toolbudget:")


def test_a_request_after_an_idle_gap_goes_upstream_compacted(clock: Clock, tmp_path: Path) -> None:
    clock(times(None))
    plain = through_proxy(f"sqlite:{tmp_path}/plain.db", BODIES)
    clock(times(600.0))
    idle = through_proxy(f"sqlite:{tmp_path}/idle.db", BODIES)
    assert idle[:GAP_AT] == plain[:GAP_AT]
    assert markers(idle[GAP_AT]) > markers(plain[GAP_AT])


def test_a_proxy_started_again_on_the_store_carries_on_with_the_same_bytes(
    clock: Clock, tmp_path: Path
) -> None:
    at = times(600.0)
    clock(at)
    whole = through_proxy(f"sqlite:{tmp_path}/whole.db", BODIES)
    store = f"sqlite:{tmp_path}/shared.db"
    clock(at[:GAP_AT])
    first = through_proxy(store, BODIES[:GAP_AT])
    # The gap falls on the first request the new proxy sees: only the record can tell it.
    clock(at[GAP_AT:])
    second = through_proxy(store, BODIES[GAP_AT:])
    assert first + second == whole
    clock(times(None))
    plain = through_proxy(f"sqlite:{tmp_path}/plain.db", BODIES[: GAP_AT + 1])
    assert markers(second[0]) > markers(plain[GAP_AT])  # the handover request was cold
