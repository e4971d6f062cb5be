"""``Sessions``: the pool a shell finds each request's session in."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import toolbudget
from toolbudget import InputError, Session, Sessions, wire
from toolbudget import jsonio as jsonio_module
from toolbudget.policy import Policy
from toolbudget.session import conversation_id
from toolbudget.sessions import session_id_of

_KEY = re.compile(r"<<tb:([a-z0-9]+)>>")


def _body(task: str, size: int = 30_000, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "tools": [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": "you run commands"},
            {"role": "user", "content": task},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": f"{task}\n" + "output line\n" * (size // 12)},
        ],
        **extra,
    }


def test_the_id_comes_from_the_header_then_claude_code_then_the_cache_key() -> None:
    body = _body("t", prompt_cache_key="conv-7")
    assert session_id_of(body, {"X-Toolbudget-Session": "mine", "x-claude-code-session-id": "u"}) == "mine"
    assert session_id_of(body, {"x-claude-code-session-id": "u1"}) == "claude-code-u1"
    agent = {"x-claude-code-session-id": "u1", "x-claude-code-agent-id": "a2"}
    assert session_id_of(body, agent) == "claude-code-u1-agent-a2"
    assert session_id_of(body, {}) == "prompt-cache-conv-7"
    assert session_id_of(_body("t"), {"x-toolbudget-session": "  "}) is None
    with Sessions(store="memory:") as pool:
        derived = pool.for_request(_body("t"), api="openai-chat")
        assert derived.id == conversation_id(wire.parse(_body("t"), "openai-chat"))
        assert pool.for_request(body, api="openai-chat").id == "prompt-cache-conv-7"
        assert pool.for_request(body, api="openai-chat", headers={"x-toolbudget-session": "s"}).id == "s"


def test_requests_of_one_conversation_find_one_session() -> None:
    with Sessions(store="memory:") as pool:
        first = pool.for_request(_body("a"), api="openai-chat")
        assert pool.for_request(orjson.dumps(_body("a")), api="openai-chat") is first
        assert pool.for_request(_body("b"), api="openai-chat") is not first
        assert len(pool) == 2


def test_a_pooled_session_sends_what_a_session_of_its_own_sends() -> None:
    body = orjson.dumps(_body("same"))
    with Sessions(store="memory:") as pool, Session(store="memory:") as alone:
        session = pool.for_request(body, api="openai-chat")
        assert session.manage(body, "openai-chat").body == alone.manage(body, "openai-chat").body
        assert session.id == alone.id


@pytest.mark.parametrize("headers", [None, {"x-toolbudget-session": "named"}])
def test_a_body_is_parsed_once_for_its_session_and_its_manage(
    monkeypatch: pytest.MonkeyPatch, headers: dict[str, str] | None
) -> None:
    """The parse that finds the session is the one ``manage`` uses: one JSON read, one wire parse."""
    reads: list[int] = []
    parses: list[int] = []
    real_loads, real_parse = jsonio_module.loads, wire.parse

    def loads(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        return real_loads(*args, **kwargs)

    def parse(*args: Any, **kwargs: Any) -> Any:
        parses.append(1)
        return real_parse(*args, **kwargs)

    monkeypatch.setattr(jsonio_module, "loads", loads)
    monkeypatch.setattr(wire, "parse", parse)
    body = orjson.dumps(_body("once"))
    with Sessions(store="memory:") as pool:
        session = pool.for_request(body, api="openai-chat", headers=headers)
        managed = session.manage(body, "openai-chat")
    assert managed.report.results_cut == 1
    assert (len(reads), len(parses)) == (1, 1)


def test_another_body_is_parsed_by_its_own_manage() -> None:
    with Sessions(store="memory:") as pool:
        session = pool.for_request(_body("x"), api="openai-chat")
        other = _body("x")
        other["messages"][3]["content"] = "short"
        assert session.manage(other, "openai-chat").body is other  # not the primed body's answer


def test_the_least_recently_used_session_is_closed_past_max_sessions() -> None:
    with Sessions(store="memory:", max_sessions=2) as pool:
        a = pool.for_request(_body("a"), api="openai-chat")
        b = pool.for_request(_body("b"), api="openai-chat")
        assert pool.for_request(_body("a"), api="openai-chat") is a  # a is now the most recent
        pool.for_request(_body("c"), api="openai-chat")
        assert len(pool) == 2 and b._closed and not a._closed
        again = pool.for_request(_body("b"), api="openai-chat")
        assert again is not b and again.id == b.id and a._closed


def test_the_least_recently_used_sessions_are_closed_past_max_held_bytes() -> None:
    """A session holds about ten times its history: the pool bounds what they hold in all."""
    bodies = {task: _body(task, size=30_000) for task in "abcd"}
    with Sessions(store="memory:", max_held_bytes=70_000) as pool:
        made = {}
        for task, body in bodies.items():
            made[task] = session = pool.for_request(body, api="openai-chat")
            session.manage(body, "openai-chat")
        held = made["a"].held_bytes
        assert held > 30_000  # the history's JSON text, which holds a 30 KB result
        # Two histories fit in 70 KB, three do not: only the two most recent are left.
        pool.for_request(_body("e", size=10), api="openai-chat")
        assert made["a"]._closed and made["b"]._closed and not made["d"]._closed
        assert len(pool) <= 3
        # The one asked for stays, however much it holds.
        with Sessions(store="memory:", max_held_bytes=1) as tight:
            one = tight.for_request(bodies["a"], api="openai-chat")
            one.manage(bodies["a"], "openai-chat")
            assert tight.for_request(bodies["a"], api="openai-chat") is one and not one._closed


def test_a_session_managed_after_later_gets_is_still_weighed() -> None:
    # Many threads: a session's manage may run after other requests got their sessions.
    with Sessions(store="memory:", max_held_bytes=40_000) as pool:
        a = pool.for_request(_body("a"), api="openai-chat")
        b = pool.for_request(_body("b"), api="openai-chat")
        a.manage(_body("a"), "openai-chat")
        b.manage(_body("b"), "openai-chat")
        pool.for_request(_body("c", size=10), api="openai-chat")
        assert a._closed and not b._closed


def test_idle_sessions_are_closed() -> None:
    now = [0.0]
    with Sessions(store="memory:", idle_seconds=60, clock=lambda: now[0]) as pool:
        a = pool.for_request(_body("a"), api="openai-chat")
        now[0] = 30.0
        b = pool.for_request(_body("b"), api="openai-chat")
        now[0] = 70.0
        pool.for_request(_body("b"), api="openai-chat")
        assert a._closed and not b._closed and len(pool) == 1
    assert b._closed


def test_closing_keeps_every_archive_a_marker_names(tmp_path: Path) -> None:
    store = f"dir:{tmp_path}"
    body = _body("kept", size=60_000)
    with Sessions(store=store, max_sessions=1) as pool:
        session = pool.for_request(body, api="openai-chat")
        sent = session.manage(body, "openai-chat").body["messages"][3]["content"]
        sid = session.id
        pool.for_request(_body("other"), api="openai-chat")  # closes the first
        assert session._closed
    (key,) = _KEY.findall(sent)
    with Session(sid, store=store) as later:
        assert later.original(key) == body["messages"][3]["content"]


def test_a_closed_pool_refuses_and_bad_settings_are_refused() -> None:
    pool = Sessions(store="memory:")
    pool.close()
    with pytest.raises(InputError):
        pool.for_request(_body("a"), api="openai-chat")
    for bad in ({"max_sessions": 0}, {"idle_seconds": 0}, {"max_sessions": True}, {"max_held_bytes": 0}):
        with pytest.raises(InputError):
            Sessions(store="memory:", **bad)
    with Sessions(store="memory:") as pool, pytest.raises(InputError):
        pool.for_request(b"[1]", api="openai-chat")


def test_sessions_is_public() -> None:
    assert toolbudget.Sessions is Sessions
    assert Policy().store is None or isinstance(Policy().store, str)


def test_a_pool_closes_its_sessions_at_once_on_a_store_that_hangs(tmp_path: Path) -> None:
    """Each session's close may wait its store's bound; a pool closed them one after the other,
    so closing 256 sessions on a stopped store waited 256 bounds. It closes them at once now, and
    every session is closed, its holder let go of once the store answers."""
    import threading
    import time

    from toolbudget.store.dir import DirStore

    stuck = threading.Event()

    class Stuck(DirStore):
        def release(self, session: str, holder: str) -> None:
            stuck.wait(10.0)  # stopped, until the test lets it go
            super().release(session, holder)

    store = Stuck(tmp_path)
    pool = Sessions(store=store, policy=Policy(store_timeout=0.3))
    sessions = []
    for n in range(8):
        session = pool.get(f"s{n}")
        session.manage(_body(f"task {n}"), "openai-chat")
        session.settle(10.0)  # each holds its directory
        sessions.append(session)
    assert all(store.live_holders(f"s{n}") for n in range(8))
    began = time.monotonic()
    pool.close()
    took = time.monotonic() - began
    stuck.set()
    assert took < 8 * 0.3 / 2, took  # one after the other: 2.4 s
    assert all(session._closed for session in sessions)
    deadline = time.monotonic() + 10
    while any(store.live_holders(f"s{n}") for n in range(8)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(store.live_holders(f"s{n}") for n in range(8))
