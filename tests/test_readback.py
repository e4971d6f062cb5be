"""A session started again reads back the previews and summaries its store holds.

The proof that reading back is sound is that the fresh session sends the very
bytes of one that made everything again, and of the warm session, on the
longest shared sessions; the proof that it is worth it is that the fresh
session makes none of the previews and summaries the warm one made, in one
batched read. A record of another policy, or one that does not check out, is
never used.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import budget, to_request
from toolbudget.errors import StoreError
from toolbudget.incremental import HISTORY
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.previews import Preview
from toolbudget.readback import MADE_PREFIX, read, record
from toolbudget.session import Session, _SessionArchive
from toolbudget.store import _recordlog
from toolbudget.store.dir import DirStore

MODEL = "claude-sonnet-4-5-20250929"


def bodies(conversation: Conversation, api: str) -> Iterator[dict[str, Any]]:
    """The requests an agent sends: the history before each assistant turn, each a new body."""
    full = to_request(conversation, api, model=MODEL)
    key = HISTORY[api]
    entries = full[key]

    def assistant(entry: dict[str, Any]) -> bool:
        return entry.get("role") in ("assistant", "model") or entry.get("type") in (
            "function_call",
            "reasoning",
        )

    for i in range(1, len(entries)):
        if assistant(entries[i]) and not assistant(entries[i - 1]):
            yield orjson.loads(orjson.dumps({**full, key: entries[:i]}))
    if entries and not assistant(entries[-1]):
        yield orjson.loads(orjson.dumps(full))


class Counting(DirStore):
    """A directory store that counts the calls a request makes of it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[str] = []

    def _get(self, session: str, key: str) -> bytes | None:
        self.calls.append("get")
        return super()._get(session, key)

    def _read_many(self, session: str, keys: list[str]) -> dict[str, bytes]:
        self.calls.append("get_many")  # a batched read, with the use stamped or not (peek_many)
        return super()._read_many(session, keys)

    def missing(self, session: str, keys: list[str], sizes: Mapping[str, int] | None = None) -> set[str]:
        self.calls.append("missing")  # one check, however the store answers it
        return super().missing(session, keys, sizes)

    def _put_each(self, session: str, items: dict[str, bytes]) -> set[str]:
        self.calls.append("put_many")
        return super()._put_each(session, items)


class Made:
    """Counts the previews and summaries the requests made (not found in a memo).

    Only on the caller's thread: once a request has returned, the store's
    worker makes what a later event will make (:mod:`toolbudget.ahead`), as
    soon or as late as it gets to it.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        preview, summarize = getattr(budget, "make_preview"), getattr(budget, "summarize_result")  # noqa: B009
        caller = threading.main_thread()

        def counted_preview(*args: Any, **kwargs: Any) -> Any:
            self.count += threading.current_thread() is caller
            return preview(*args, **kwargs)

        def counted_summary(*args: Any, **kwargs: Any) -> Any:
            self.count += threading.current_thread() is caller
            return summarize(*args, **kwargs)

        monkeypatch.setattr(budget, "make_preview", counted_preview)
        monkeypatch.setattr(budget, "summarize_result", counted_summary)


def _fresh(sid: str, store: DirStore, policy: Policy, body: dict[str, Any], api: str) -> bytes:
    with Session(sid, store=store, policy=policy) as session:
        return orjson.dumps(session.manage(orjson.loads(orjson.dumps(body)), api).body)


def _longest(real: list[tuple[str, Conversation]], n: int) -> list[tuple[str, Conversation]]:
    return sorted(real, key=lambda item: (len(item[1].messages), item[0]), reverse=True)[:n]


@pytest.mark.shared
@pytest.mark.parametrize("api", ["anthropic", "openai-chat"])
def test_a_fresh_session_reads_back_in_one_batch_and_sends_the_same_bytes(
    real: list[tuple[str, Conversation]], api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = Policy()
    made = Made(monkeypatch)
    read_back = 0
    for n, (name, conversation) in enumerate(_longest(real, 6)):
        store = Counting(tmp_path / f"s{n}")
        sid = f"fresh-{n}"
        requests = list(bodies(conversation, api))
        with Session(sid, store=store, policy=policy) as warm:
            for body in requests:
                managed = warm.manage(body, api)
        want = orjson.dumps(managed.body)
        warm_made = made.count

        store.calls.clear()
        made.count = 0
        got = _fresh(sid, store, policy, requests[-1], api)
        fresh_made, fresh_calls = made.count, list(store.calls)

        # From scratch: the same cold session, with nothing read back.
        monkeypatch.setattr(_SessionArchive, "read_made", lambda self, keys: {})
        made.count = 0
        scratch = _fresh(sid, store, policy, requests[-1], api)
        scratch_made = made.count
        monkeypatch.undo()
        made = Made(monkeypatch)

        assert got == scratch == want, name
        # One batched read (and at most one more, of the schedule's record at the point the session
        # last wrote: see test_schedule_record), and the one check of the keys its markers name;
        # nothing read one by one.
        assert fresh_calls.count("get_many") in (1, 2) and "get" not in fresh_calls, (name, fresh_calls)
        assert fresh_calls.count("missing") == 1, (name, fresh_calls)
        assert warm_made > 0 and scratch_made > 0, name
        # Only the turn budget's previews (their limits depend on the whole turn) are made again.
        assert fresh_made < scratch_made, (name, fresh_made, scratch_made)
        read_back += scratch_made - fresh_made
    assert read_back > 0


def _turns(count: int, size: int = 30_000) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the build"}]
    for t in range(count):
        text = "".join(f"{t}: compiling unit {n} of the build, no warnings\n" for n in range(size // 48))
        call = {"type": "tool_use", "id": f"c{t}", "name": "Bash", "input": {"command": f"make unit{t}"}}
        result = {"type": "tool_result", "tool_use_id": f"c{t}", "content": text}
        messages += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return {"model": MODEL, "max_tokens": 100, "messages": messages}


def _scratch(
    sid: str, store: DirStore, policy: Policy, body: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> bytes:
    """What a cold session sends when it reads nothing back."""
    with monkeypatch.context() as patch:
        patch.setattr(_SessionArchive, "read_made", lambda self, keys: {})
        return _fresh(sid, store, policy, body, "anthropic")


def test_a_fresh_session_reads_back_the_summaries_of_small_results_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its high watermark a long history has its small results summarised too, whatever
    their size, which only the schedule says: a session started again reads those summaries
    back (one more batched read) instead of making them again, and sends the same bytes."""
    policy = Policy(context_window_tokens=12_000)
    messages = _turns(40, 2_400)["messages"]  # every result under the size compaction starts at
    requests = [{"model": MODEL, "max_tokens": 100, "messages": messages[: 2 * t + 1]} for t in range(1, 41)]
    store = Counting(tmp_path)
    made = Made(monkeypatch)
    with Session("small", store=store, policy=policy) as warm:
        for body in requests:
            managed = warm.manage(orjson.loads(orjson.dumps(body)), "anthropic")
    want = orjson.dumps(managed.body)
    assert b"compiling unit" in want and want.count(b"toolbudget") > 10  # summarised, small as they are
    store.calls.clear()
    made.count = 0
    got = _fresh("small", store, policy, requests[-1], "anthropic")
    fresh_made, fresh_calls = made.count, list(store.calls)
    made.count = 0
    scratch = _scratch("small", store, policy, requests[-1], monkeypatch)
    assert got == scratch == want
    assert made.count > 10  # made from scratch, the summaries are many
    assert fresh_made == 0, fresh_made
    assert fresh_calls.count("get_many") <= 3 and "get" not in fresh_calls, fresh_calls


def test_a_fresh_session_reads_back_a_turn_budgets_preview(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn whose results together pass the turn budget has them previewed within a limit that
    depends on the whole turn: a session started again reads that preview back once it knows the
    limit, rather than making it again (for a large result, most of its first request)."""
    policy = Policy(result_max_chars=50_000, turn_budget_chars=40_000)
    lines = "".join(f"line {n}: a test ran and passed\n" for n in range(1_200))  # 36 KB each
    calls = [
        {"type": "tool_use", "id": f"p{k}", "name": "Bash", "input": {"command": f"pytest -k t{k}"}}
        for k in range(3)
    ]
    results = [{"type": "tool_result", "tool_use_id": f"p{k}", "content": f"{k}\n{lines}"} for k in range(3)]
    messages = [
        {"role": "user", "content": "run the three suites"},
        {"role": "assistant", "content": calls},
        {"role": "user", "content": results},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "q", "name": "Bash", "input": {"command": "ls"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "q", "content": "a b c"}]},
    ]
    first, last = (
        {"model": MODEL, "max_tokens": 100, "messages": messages[:3]},
        {"model": MODEL, "max_tokens": 100, "messages": messages},
    )
    store = Counting(tmp_path)
    made = Made(monkeypatch)
    with Session("turn", store=store, policy=policy) as warm:
        warm.manage(orjson.loads(orjson.dumps(first)), "anthropic")
        want = orjson.dumps(warm.manage(orjson.loads(orjson.dumps(last)), "anthropic").body)
    assert made.count >= 2  # the turn's largest results, previewed to fit the turn's budget
    made.count = 0
    got = _fresh("turn", store, policy, last, "anthropic")
    assert (got, made.count) == (want, 0)
    assert got == _scratch("turn", store, policy, last, monkeypatch)


def test_a_record_of_another_policy_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DirStore(tmp_path)
    body = _turns(12)
    with Session("pol", store=store, policy=Policy()) as warm:
        warm.manage(body, "anthropic")
    same = Made(monkeypatch)
    _fresh("pol", store, Policy(), body, "anthropic")
    assert same.count == 0  # the policy that made them reads every one back
    other = Policy(preview_head_chars=900)
    made = Made(monkeypatch)
    got = _fresh("pol", store, other, body, "anthropic")
    assert made.count == 12  # each cap preview made again under its own policy
    assert got == _scratch("pol", store, other, body, monkeypatch)


def test_a_record_that_does_not_check_out_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirStore(tmp_path)
    body = _turns(12)
    with Session("torn", store=store, policy=Policy()) as warm:
        want = orjson.dumps(warm.manage(body, "anthropic").body)
    records = []
    for key in store.keys("torn"):
        data = store.get("torn", key)
        assert data is not None
        if data.startswith(MADE_PREFIX.encode()):
            records.append(key)
    assert len(records) == 12
    # The records are in the session's record log: write it again with each of them torn short
    # (a frame a killed writer left, which the log skips) or with one character of its text
    # changed under a frame that checks out (which the store serves, and readback must refuse).
    log = store.workspace("torn") / "records"
    kept = _recordlog.RecordLog(str(log))
    everything = kept.read(kept.held())
    frames = []
    for key, data in everything.items():
        if key not in records:
            frames.append(_recordlog.frame(key, data))
        elif records.index(key) % 2:
            frames.append(_recordlog.frame(key, data)[: -len(data) // 2])
        else:
            frames.append(_recordlog.frame(key, data[:-1] + b"#"))
    log.write_bytes(b"".join(frames))
    made = Made(monkeypatch)
    got = _fresh("torn", store, Policy(), body, "anthropic")
    assert got == want
    assert made.count == len(records)


def test_a_record_is_one_of_the_sessions_own_records_not_an_original() -> None:
    assert MADE_PREFIX.startswith(budget.FORM_PREFIX)


def test_a_record_reads_back_only_under_its_own_name_and_whole() -> None:
    def digest(text: str) -> str:
        return str(len(text)) + text[:3]

    made = Preview("head\n[toolbudget: omitted 5 of 9 chars]\ntail", "log", 5, "2 lines")
    data = record("abc", made, digest)
    assert data is not None and read(data, "abc", digest) == made
    assert read(data, "abd", digest) is None
    assert read(data[:-1], "abc", digest) is None
    assert read(data.replace("\n5\n", "\nx\n"), "abc", digest) is None
    assert record("abc", Preview("t", "log", 1, "two\nlines"), digest) is None


def _cutting_body() -> dict[str, Any]:
    """A small request whose one result is cut: a preview and its record to read back."""
    log = "".join(f"line {n}: step {n} of the build went as planned\n" for n in range(2000))
    return {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "build it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": log}]},
        ],
    }


@pytest.mark.parametrize("local", [True, False])
def test_a_fresh_session_reads_back_on_its_own_thread_where_the_store_cannot_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: bool
) -> None:
    """The read-back batch of a local directory costs less than a trip to the store's worker, and
    writes nothing there (the ``used`` stamp is the check's); elsewhere it goes to the worker."""
    body = _cutting_body()
    with Session("reads", store=f"dir:{tmp_path}") as warm:
        want = orjson.dumps(warm.manage(body, "anthropic").body)
    threads: list[tuple[str, bool]] = []
    read_many, get_many = DirStore._read_many, DirStore._get_many

    def noted_read(self: DirStore, session: str, keys: list[str]) -> dict[str, bytes]:
        threads.append(("read", threading.current_thread() is threading.main_thread()))
        return read_many(self, session, keys)

    def noted_get(self: DirStore, session: str, keys: list[str]) -> dict[str, bytes]:
        threads.append(("get", threading.current_thread() is threading.main_thread()))
        return get_many(self, session, keys)

    monkeypatch.setattr(DirStore, "_read_many", noted_read)
    monkeypatch.setattr(DirStore, "_get_many", noted_get)
    store = DirStore(tmp_path)
    store.local = local
    with Session("reads", store=store) as fresh:
        got = orjson.dumps(fresh.manage(orjson.loads(orjson.dumps(body)), "anthropic").body)
    store.close()
    assert got == want
    assert threads, "nothing was read back"
    if local:
        # peek_many alone: no stamp, no trip to the worker.
        assert threads == [("read", True)] * len(threads), threads
    else:
        assert all(not here for _, here in threads) and ("get", False) in threads, threads


def test_peek_many_reads_what_get_many_reads_and_leaves_the_used_stamp(tmp_path: Path) -> None:
    store = DirStore(tmp_path)
    store.put_many("s", {"a" * 32: b"one", "b" * 32: MADE_PREFIX.encode() + b" a record"})
    used = store.workspace("s") / "used"
    used.touch()
    os.utime(used, (1_000_000, 1_000_000))
    store._stamped.clear()  # the stamp is due
    keys = ["a" * 32, "b" * 32, "c" * 32]
    assert store.peek_many("s", keys) == {"a" * 32: b"one", "b" * 32: MADE_PREFIX.encode() + b" a record"}
    assert used.stat().st_mtime == 1_000_000
    assert store.get_many("s", keys) == store.peek_many("s", keys)
    assert used.stat().st_mtime > 1_000_000
    store.close()


def test_a_record_log_that_cannot_be_read_fails_only_the_keys_no_file_holds(tmp_path: Path) -> None:
    """An original is a file: read back beside a broken log (as ``get`` reads it), where a key that
    only the log could hold is an error, never taken for absent."""
    store = DirStore(tmp_path)
    original, record = "a" * 32, "b" * 32
    store.put_many("s", {original: b"the original"})
    (store.workspace("s") / "records").mkdir()  # the log's place taken: it cannot be read
    assert store.peek_many("s", [original]) == {original: b"the original"}
    assert store.get_many("s", [original]) == {original: b"the original"}
    with pytest.raises(StoreError):
        store.peek_many("s", [original, record])
    store.close()
