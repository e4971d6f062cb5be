"""Many threads on one pool and on one session send what serial use sends, byte for byte."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import Session, Sessions
from toolbudget.convert import to_request
from toolbudget.model import Conversation, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import requests_of

_KEY = re.compile(r"<<tb:([a-z0-9]+)>>")
_APIS = ("anthropic", "openai-chat", "openai-responses", "gemini")
# Tight budgets, so that the requests are cut and compacted a lot.
_POLICY = replace(Policy().scaled(0.25), compaction="cache-aware")


def _results(conversation: Conversation) -> int:
    return sum(isinstance(p, ToolResult) for m in conversation.messages for p in m.parts)


def _pick(real: list[tuple[str, Conversation]], count: int) -> list[Conversation]:
    """The conversations with the most results, of 20 to 60 requests (deterministic: by count, then name)."""
    fit = [(n, c) for n, c in real if 20 <= sum(1 for _ in requests_of(c)) <= 60]
    fit.sort(key=lambda item: (-_results(item[1]), item[0]))
    return [c for _, c in fit[:count]]


def _bodies(conversation: Conversation, api: str) -> list[bytes]:
    return [orjson.dumps(to_request(r, api)) for r in requests_of(conversation)]


def _headers(n: int) -> dict[str, str] | None:
    # Two conversations name their session, two are found by their content.
    return {"x-toolbudget-session": f"named-{n}"} if n % 2 else None


def _run(threads: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(len(threads))

    def wrapped(work: Callable[[], None]) -> None:
        try:
            start.wait()
            work()
        except BaseException as exc:  # every failure is reported, none is lost in a thread
            errors.append(exc)

    running = [threading.Thread(target=wrapped, args=(w,)) for w in threads]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return errors


@pytest.mark.shared
@pytest.mark.parametrize("kind", ["memory", "dir"])
def test_sixteen_threads_on_one_pool_send_what_serial_runs_send(
    real: list[tuple[str, Conversation]], kind: str, tmp_path: Path
) -> None:
    conversations = _pick(real, 4)
    assert len(conversations) == 4
    bodies = [_bodies(c, _APIS[n]) for n, c in enumerate(conversations)]
    # The directory store's markers name its files, so both runs use one root, emptied between
    # them; a generous bound, so a busy machine never turns a slow write into a lost cut.
    store = "memory:" if kind == "memory" else f"dir:{tmp_path / 'archives'}"
    policy = replace(_POLICY, store_timeout=120.0)
    serial: list[list[Any]] = []
    for n, requests in enumerate(bodies):
        with Sessions(store=store, policy=policy) as pool:
            out = []
            for body in requests:
                session = pool.for_request(body, api=_APIS[n], headers=_headers(n))
                out.append(session.manage(body, _APIS[n]).body)
            serial.append(out)
    assert sum(b != s for req, ser in zip(bodies, serial, strict=True) for b, s in zip(req, ser, strict=True))
    shutil.rmtree(tmp_path / "archives", ignore_errors=True)

    got: dict[tuple[int, int], Any] = {}
    with Sessions(store=store, policy=policy) as pool:

        def worker(t: int) -> Callable[[], None]:
            n, lane = t % 4, t // 4

            def work() -> None:
                # Four threads per conversation, each on every fourth request, in order.
                for j in range(lane, len(bodies[n]), 4):
                    body = bodies[n][j]
                    session = pool.for_request(body, api=_APIS[n], headers=_headers(n))
                    got[n, j] = session.manage(body, _APIS[n]).body

            return work

        errors = _run([worker(t) for t in range(16)])
        assert len(pool) == 4
    assert not errors, errors
    for n, out in enumerate(serial):
        for j, body in enumerate(out):
            assert got[n, j] == body, (n, j)


@pytest.mark.shared
def test_many_threads_on_one_session_send_what_serial_use_sends(
    real: list[tuple[str, Conversation]],
) -> None:
    (conversation,) = _pick(real, 1)
    api = "anthropic"
    bodies = _bodies(conversation, api)
    with Session("one", store="memory:", policy=_POLICY) as alone:
        serial = [alone.manage(body, api).body for body in bodies]
        originals = {key: alone.original(key) for body in serial for key in _KEY.findall(body.decode())}
        pages = {key: alone.recall(key, lines=(1, 2)) for key in originals}
    assert originals

    got: dict[int, Any] = {}
    answers: list[tuple[str, str, str]] = []
    with Session("one", store="memory:", policy=_POLICY) as shared:

        def worker(t: int) -> Callable[[], None]:
            def work() -> None:
                for j in range(t, len(bodies), 8):
                    managed = shared.manage(bodies[j], api)
                    got[j] = managed.body
                    assert managed.report.session == "one"
                    for key in _KEY.findall(managed.body.decode())[:2]:
                        answers.append((key, shared.original(key), "original"))
                        answers.append((key, shared.recall(key, lines=(1, 2)), "page"))
                        answers.append((key, shared.handle_recall({"key": key, "lines": "1:2"}), "page"))
                    report = shared.last_report
                    assert report is not None

            return work

        errors = _run([worker(t) for t in range(8)])
    assert not errors, errors
    assert [got[j] for j in range(len(bodies))] == serial
    assert answers
    for key, answer, kind in answers:
        assert answer == (originals[key] if kind == "original" else pages[key])


def test_threads_cutting_and_managing_on_one_session_agree() -> None:
    """``cut_result`` and ``manage`` from many threads at once: each gives its serial answer."""
    texts = [f"result {i}\n" + "".join(f"{i}.{k} some output\n" for k in range(3000)) for i in range(24)]
    with Session("cuts", store="memory:") as alone:
        serial = [alone.cut_result("Bash", t) for t in texts]
    got: dict[int, str] = {}
    with Session("cuts", store="memory:") as shared:

        def worker(t: int) -> Callable[[], None]:
            def work() -> None:
                for i in range(t, len(texts), 6):
                    got[i] = shared.cut_result("Bash", texts[i])
                    (key,) = _KEY.findall(got[i])
                    assert shared.original(key) == texts[i]

            return work

        errors = _run([worker(t) for t in range(6)])
    assert not errors, errors
    assert [got[i] for i in range(len(texts))] == serial


def test_a_recovery_rung_waits_for_the_session_s_request() -> None:
    """A rung of the recovery ladder cuts into the session's archive: it waits while another
    thread's request holds the session, so its keys never land in that request's batch."""
    from toolbudget import wire
    from toolbudget.recovery.ladder import shrink

    body = {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x\n" * 30_000}],
            },
        ],
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    }
    request = wire.parse(body, "anthropic")
    done = threading.Event()
    with Session("rung", store="memory:") as session:
        with session.exclusive():

            def rung() -> None:
                shrink(session, request, 1)
                done.set()

            thread = threading.Thread(target=rung)
            thread.start()
            assert not done.wait(0.5)  # held off while the session is held
        thread.join(30)
        assert done.is_set()


def test_each_thread_has_its_own_store_bound(tmp_path: Any) -> None:
    """One thread's request that used up its time on the store does not starve another's recall."""
    with Session("bound", store=f"dir:{tmp_path}") as session:
        text = "line\n" * 10_000
        (key,) = _KEY.findall(session.cut_result("Bash", text))
        read: list[str | BaseException] = []

        def recall() -> None:
            try:
                read.append(session.original(key))
            except BaseException as exc:
                read.append(exc)

        with session._request_time():
            deadline = session._deadline
            assert deadline is not None
            deadline.spend(100.0)  # this thread's request has no time left
            thread = threading.Thread(target=recall)
            thread.start()
            thread.join(30)
    assert read == [text]


def test_an_entry_cache_shared_by_threads_drops_an_entry_once() -> None:
    """Two threads evicting from one cache at once may pick the same entry: the second pop is no error."""
    from toolbudget.wire import EntryCache
    from toolbudget.wire.anthropic import parse

    cache = EntryCache(limit=4)

    class Racing(dict[bytes, Any]):
        def pop(self, key: bytes, *default: Any) -> Any:
            super().pop(key, None)  # another thread dropped it just before
            return super().pop(key, *default)

    cache.entries = Racing()
    for i in range(12):
        parse({"messages": [{"role": "user", "content": f"m{i}"}]}, cache)
    assert 0 < len(cache.entries) <= 4
