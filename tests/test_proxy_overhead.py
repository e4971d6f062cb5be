"""What the proxy spends on a request besides the upstream's answer: parses avoided, the loop kept free."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from proxy_upstream import upstream
from toolbudget import Session, Sessions, wire
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.app import PROXY_KEY
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.offload import SLOW_STORE
from toolbudget.proxy.server import RunningProxy, running
from toolbudget.proxy.tenancy import tenant_of
from toolbudget.store import Store, guard
from toolbudget.store.memory import MemoryStore

_HEADERS = {"content-type": "application/json", "x-api-key": "sk-one", "x-claude-code-session-id": "slow"}

_OUTPUT = "".join(f"output line {i:05d} of a command that printed a lot\n" for i in range(1000))


def _history(turns: int) -> dict[str, Any]:
    """An Anthropic body with ``turns`` tool calls and their long results: an agent's request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "build the project"}]
    for turn in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{turn}",
                        "name": "Bash",
                        "input": {"command": f"make {turn}"},
                    }
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": f"{turn}\n{_OUTPUT}"}
                ],
            }
        )
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "system": "You are a coding agent.",
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": messages,
    }


def _counting_parse(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    parses: list[int] = []
    real_parse = wire.parse

    def parse(*args: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(wire, "parse", parse)
    return parses


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_named_session_parses_only_what_its_next_request_appends(
    monkeypatch: pytest.MonkeyPatch, as_bytes: bool
) -> None:
    """A header names the session: finding it parses nothing, and ``manage`` of a request that
    extends the last one parses only the new messages, with the bytes a fresh session sends."""
    headers = {"x-claude-code-session-id": "s1"}
    first, second = _history(3), _history(4)
    with Sessions(store="memory:") as pool:
        given = orjson.dumps(first) if as_bytes else first
        pool.for_request(given, api="anthropic", headers=headers).manage(given, "anthropic")
        parses = _counting_parse(monkeypatch)
        given = orjson.dumps(second) if as_bytes else second
        session = pool.for_request(given, api="anthropic", headers=headers)
        sent = session.manage(given, "anthropic")
        assert parses == []  # the history of four results was not parsed whole, not even once
        assert sent.report.results_cut >= 1
    monkeypatch.undo()
    with Session("claude-code-s1", store="memory:") as alone:
        alone.manage(first, "anthropic")
        expected = alone.manage(second, "anthropic").body
    assert (sent.body if as_bytes else orjson.dumps(sent.body)) == orjson.dumps(expected)


def test_a_named_session_with_a_bad_history_is_refused_by_its_manage() -> None:
    """Finding a named session no longer reads the history; its ``manage`` still refuses a bad one."""
    from toolbudget import InputError

    with Sessions(store="memory:") as pool:
        session = pool.for_request({"messages": 7}, api="anthropic", headers={"x-toolbudget-session": "s"})
        with pytest.raises(InputError):
            session.manage({"messages": 7}, "anthropic")


# --- the loop is not held by a store that takes its time ----------------------------------------


class _SlowStore(Store):
    """A store whose writes wait until the test lets them go (a disk or Redis under load)."""

    url = "slow:"

    def __init__(self) -> None:
        super().__init__()
        self._entries = MemoryStore()
        self.writing = threading.Event()
        self.release = threading.Event()

    def _put(self, session: str, key: str, data: bytes) -> None:
        self.writing.set()
        self.release.wait(10)
        self._entries.put(session, key, data)

    def _get(self, session: str, key: str) -> bytes | None:
        return self._entries.get(session, key)

    def _find(self, key: str, within: str) -> bytes | None:
        return self._entries.find(key, within)

    def _keys(self, session: str) -> list[str]:
        return self._entries.keys(session)

    def _drop(self, session: str) -> None:
        self._entries.drop(session)


def _post_in_background(
    proxy: RunningProxy, body: dict[str, Any], answers: list[httpx.Response]
) -> threading.Thread:
    sender = threading.Thread(
        target=lambda: answers.append(
            httpx.post(proxy.url + "/v1/messages", content=orjson.dumps(body), headers=_HEADERS, timeout=30)
        )
    )
    sender.start()
    return sender


def test_once_the_store_is_slow_the_proxy_answers_others_while_a_request_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a store call kept its request waiting, the next request whose cut is being written
    (the store guard waiting on its worker) leaves the event loop free: a health check, or
    another client's bytes, are served meanwhile."""
    monkeypatch.setattr(guard, "_recent", [0.0])
    store = _SlowStore()
    with (
        upstream() as (up, url),
        Sessions(store=store, policy=Policy(store_timeout=8.0)) as pool,
        running(ProxyConfig(upstreams=upstreams_of(url)), sessions=pool) as proxy,
    ):
        answers: list[httpx.Response] = []
        first = _post_in_background(proxy, _history(1), answers)
        assert store.writing.wait(10)
        time.sleep(0.3)  # a write that takes 0.3 s: the store is slow now
        store.release.set()
        first.join(30)
        assert guard.recent_wait() > SLOW_STORE
        store.writing.clear()
        store.release.clear()
        second = _post_in_background(proxy, _history(2), answers)
        try:
            assert store.writing.wait(10)  # the second request is inside its store call now
            health = httpx.get(proxy.url + "/healthz", timeout=2.0)
            assert health.status_code == 200
            assert not store.release.is_set() and second.is_alive()  # answered while the write waited
        finally:
            store.release.set()
            second.join(30)
        assert [answer.status_code for answer in answers] == [200, 200]
        assert b"<<tb:" in up.received[-1].body  # cut, and its original kept
        offload = proxy.app[PROXY_KEY].offload
        assert offload is not None and offload.offloaded >= 1  # the second was managed off the loop


def test_with_a_quick_store_the_proxy_manages_on_its_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that answers at once (memory, a local disk) is not worth a trip to a thread and
    back per request: the proxy manages on its loop, with the same bytes."""
    monkeypatch.setattr(guard, "_recent", [0.0])
    with (
        upstream() as (up, url),
        Sessions(store="memory:", policy=Policy()) as pool,
        running(ProxyConfig(upstreams=upstreams_of(url)), sessions=pool) as proxy,
    ):
        for turns in (1, 2):
            answer = httpx.post(
                proxy.url + "/v1/messages",
                content=orjson.dumps(_history(turns)),
                headers=_HEADERS,
                timeout=30,
            )
            assert answer.status_code == 200
        offload = proxy.app[PROXY_KEY].offload
        assert offload is not None and offload.offloaded == 0
        assert b"<<tb:" in up.received[-1].body


def test_the_recent_wait_shows_a_slow_call_at_once_and_fades_with_quick_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(guard, "_recent", [0.0])
    store_guard = guard.StoreGuard("test:")
    try:
        store_guard.call(guard.Deadline(5.0), time.sleep, 0.05)
        assert guard.recent_wait() > SLOW_STORE
        for _ in range(40):
            store_guard.call(guard.Deadline(5.0), int)
        assert guard.recent_wait() <= SLOW_STORE
    finally:
        store_guard.close()


@pytest.mark.parametrize("offload", ["auto", "always", "never"])
def test_requests_of_one_session_are_managed_in_the_order_they_arrived(offload: str) -> None:
    """On the loop or off it, one session's requests go through ``manage`` in arrival order:
    what the proxy sends for each is what one session sends for them in turn."""
    bodies = [_history(turns) for turns in range(1, 7)]
    with (
        upstream() as (up, url),
        Sessions(store="memory:", policy=Policy()) as pool,
        running(ProxyConfig(upstreams=upstreams_of(url), offload=offload), sessions=pool) as proxy,
    ):
        for data in bodies:
            answer = httpx.post(
                proxy.url + "/v1/messages", content=orjson.dumps(data), headers=_HEADERS, timeout=30
            )
            assert answer.status_code == 200
        sent = [got.body for got in up.received]
    with Session(f"{tenant_of(_HEADERS)}-claude-code-slow", store="memory:", policy=Policy()) as alone:
        expected = [orjson.dumps(alone.manage(data, "anthropic").body) for data in bodies]
    assert sent == expected
