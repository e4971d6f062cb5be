"""A request that only appends to the last one is budgeted from the last one's decisions.

The proof that this shortcut is sound is that it gives the very bytes (and
report) of the whole pipeline on every request: over every shared session on
every API, with the default policy and with a window small enough that events
fire and old turns fold. The rest pins the cases where the shortcut must give
way: a caller that edits its earlier history in place, a value equal in
Python but not in JSON, a late answer to an old call, a recall answer that
stops being the newest, a bad new message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import orjson
import pytest

from toolbudget import budget, to_request
from toolbudget.errors import ShapeError
from toolbudget.incremental import HISTORY
from toolbudget.jsonio import dumps
from toolbudget.measure import request_chars
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.session import Session

APIS = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")


def _assistant(entry: dict[str, Any]) -> bool:
    return entry.get("role") in ("assistant", "model") or entry.get("type") in ("function_call", "reasoning")


def bodies(conversation: Conversation, api: str) -> Iterator[dict[str, Any]]:
    """The requests an agent sends: the history before each assistant turn, each a new body."""
    full = to_request(conversation, api, model="claude-sonnet-4-5-20250929")
    key = HISTORY[api]
    entries = full[key]
    for i in range(1, len(entries)):
        if _assistant(entries[i]) and not _assistant(entries[i - 1]):
            yield orjson.loads(orjson.dumps({**full, key: entries[:i]}))
    if entries and not _assistant(entries[-1]):
        yield orjson.loads(orjson.dumps(full))


class _Counted:
    """Counts the requests answered from the last one's decisions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fast = 0
        extended = Session._extended

        def counting(session: Session, *args: Any) -> Any:
            managed = extended(session, *args)
            self.fast += managed is not None
            return managed

        monkeypatch.setattr(Session, "_extended", counting)


def _whole(session: Session) -> Session:
    """``session`` with the shortcut off: every request through the whole pipeline."""
    session._extend = lambda *args: (None, None)  # type: ignore[method-assign]
    return session


def _same_on_every_request(conversation: Conversation, api: str, policy: Policy, step: int = 1) -> int:
    """Compare the shortcut with the whole pipeline on every ``step``-th request (a session that
    sees every other request, as a replica taking turns does, decides several points at once)."""
    count = 0
    with (
        Session("inc", store="memory:", policy=policy) as fast,
        _whole(Session("inc", store="memory:", policy=policy)) as whole,
    ):
        for k, body in enumerate(bodies(conversation, api)):
            if k % step:
                continue
            given = orjson.dumps(body)
            got = fast.manage(body, api)
            want = whole.manage(orjson.loads(given), api)
            assert orjson.dumps(got.body) == orjson.dumps(want.body), (conversation.id, api, k)
            assert got.report == want.report, (conversation.id, api, k)
            # Counted from sizes known already, the figures are a count of the requests themselves.
            counted = (request_chars(want.original), request_chars(want.request))
            assert (want.report.chars_before, want.report.chars_after) == counted, (conversation.id, api, k)
            assert orjson.dumps(body) == given  # the caller's body is never changed
            count += 1
    return count


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("api", APIS)
def test_every_shared_request_gets_the_bytes_of_the_whole_pipeline(
    real: list[tuple[str, Conversation]], api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted(monkeypatch)
    total = sum(_same_on_every_request(c, api, Policy()) for _, c in real)
    # Most requests take the shortcut: the comparison is of the shortcut, not of two full runs.
    assert counted.fast > 0.75 * total, (counted.fast, total)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize(
    ("api", "step"), [("anthropic", 1), ("openai-responses", 1), ("anthropic", 2), ("anthropic", 3)]
)
def test_events_and_folds_give_the_bytes_of_the_whole_pipeline(
    real: list[tuple[str, Conversation]], api: str, step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also on a session that sees every second or third request, as a replica taking turns
    does: it decides several points at once, and an event may fire at one before its last."""
    longest = sorted(real, key=lambda item: len(item[1].messages), reverse=True)[:12]
    policy = Policy(context_window_tokens=15_000)
    counted = _Counted(monkeypatch)
    total = sum(_same_on_every_request(c, api, policy, step) for _, c in longest)
    assert 0.3 * total < counted.fast < total, (counted.fast, total)


# --- synthetic sessions ----------------------------------------------------------------


def _turn(t: int, size: int) -> list[dict[str, Any]]:
    text = "".join(f"line {t}:{n} of the output\n" for n in range(size // 24))
    call = {"type": "tool_use", "id": f"call_{t}", "name": "Bash", "input": {"command": f"run {t}"}}
    result = {"type": "tool_result", "tool_use_id": f"call_{t}", "content": text}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


def _history(turns: int, size: int = 30_000) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for t in range(turns):
        messages += _turn(t, size)
    return messages


TOOLS = [
    {"name": name, "description": "", "input_schema": {"type": "object"}}
    for name in ("Bash", "toolbudget_recall")
]


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5-20250929", "max_tokens": 1000, "messages": messages, "tools": TOOLS}


def _from_scratch(body: dict[str, Any], policy: Policy | None = None) -> bytes:
    with Session("inc", store="memory:", policy=policy or Policy()) as session:
        return orjson.dumps(session.manage(orjson.loads(orjson.dumps(body)), "anthropic").body)


def test_the_shortcut_works_on_the_new_messages_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _Counted(monkeypatch)
    seen = [0]
    original_of = budget._original_of

    def counting(*args: Any) -> str:
        seen[0] += 1
        return original_of(*args)

    monkeypatch.setattr(budget, "_original_of", counting)
    history = _history(40)
    per_request = []
    with Session("inc", store="memory:") as session:
        for turns in range(1, 41):
            body = orjson.loads(orjson.dumps(_body(history[: 1 + 2 * turns])))
            seen[0] = 0
            managed = session.manage(body, "anthropic")
            per_request.append(seen[0])
            if turns in (10, 40):
                assert orjson.dumps(managed.body) == _from_scratch(body)
    # Each request looks at its one new result, whatever the length of the history.
    assert per_request[5:] == [1] * len(per_request[5:]), per_request
    assert counted.fast >= 35


def test_an_earlier_history_edited_in_place_is_not_taken_for_the_last_one() -> None:
    history = _history(8)
    with Session("inc", store="memory:") as session:
        body = _body(history[:9])
        session.manage(body, "anthropic")
        # The caller edits an old result in place, in the very objects it sent, and appends.
        history[2]["content"][0]["content"] = "short now"
        body = _body(history[:11])
        got = orjson.dumps(session.manage(body, "anthropic").body)
    assert got == _from_scratch(body)
    assert b"short now" in got


def test_the_whole_pipeline_takes_the_historys_text_from_its_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The text a session keeps to recognise its next request is its entries' texts joined (the
    parse wrote each already), byte for byte what writing the whole history gives."""
    import toolbudget.session as session_module
    from toolbudget.incremental import fingerprint

    written: list[Any] = []

    def writing(entries: Any) -> bytes | None:
        written.append(entries)
        return fingerprint(entries)

    monkeypatch.setattr(session_module, "fingerprint", writing)
    body = _body(_history(8)[:9])
    with Session("inc", store="memory:") as session:
        session.manage(body, "anthropic")  # a session's first request: the whole pipeline
        prefix = session._prefix
        assert session._caches["anthropic"].history is None  # taken: the cache keeps no body alive
    assert prefix is not None
    assert bytes(prefix.history) + b"]" == orjson.dumps(body["messages"])
    assert written == []  # not written a second time


def test_a_list_edited_in_place_and_sent_again_is_read_as_it_is_now() -> None:
    """A caller that keeps one list, edits an entry of it in place and sends it again, is not
    answered from the text of the list as its last parse saw it."""
    history = _history(8)[:9]
    body = _body(history)
    with Session("inc", store="memory:") as session:
        session.manage(body, "anthropic")
        history[2]["content"][0]["content"] = "short now"
        first = orjson.dumps(session.manage(body, "anthropic").body)
        history.extend(_history(8)[9:11])
        second = orjson.dumps(session.manage(body, "anthropic").body)
        prefix = session._prefix
    assert b"short now" in first and first == _from_scratch(_body(history[:9]))
    assert second == _from_scratch(_body(history))
    assert prefix is not None and bytes(prefix.history) + b"]" == orjson.dumps(history)


@pytest.mark.parametrize("old, new", [(1, 1.0), (1, True), (0, False)])
def test_values_equal_in_python_but_not_in_json_are_told_apart(old: Any, new: Any) -> None:
    history = _history(6)
    history[1]["content"][0]["input"]["attempt"] = old
    with Session("inc", store="memory:") as session:
        session.manage(orjson.loads(orjson.dumps(_body(history[:7]))), "anthropic")
        history[1]["content"][0]["input"]["attempt"] = new
        body = orjson.loads(orjson.dumps(_body(history[:9])))
        got = orjson.dumps(session.manage(body, "anthropic").body)
    assert got == _from_scratch(body)
    assert orjson.dumps({"attempt": new})[1:-1] in got


def test_a_returned_body_is_not_changed_by_the_requests_after_it() -> None:
    history = _history(12)
    kept = []
    with Session("inc", store="memory:") as session:
        for turns in range(1, 13):
            managed = session.manage(orjson.loads(orjson.dumps(_body(history[: 1 + 2 * turns]))), "anthropic")
            kept.append((managed.body, orjson.dumps(managed.body)))
    for body, text in kept:
        assert orjson.dumps(body) == text


def test_a_late_answer_to_an_old_call_is_budgeted_as_a_whole() -> None:
    history = _history(5)
    call = {"type": "tool_use", "id": "late", "name": "Bash", "input": {"command": "make"}}
    history[-2]["content"].append(call)
    history[-1]["content"].append({"type": "tool_result", "tool_use_id": "late", "content": "pending"})
    with Session("inc", store="memory:") as session:
        session.manage(orjson.loads(orjson.dumps(_body(history))), "anthropic")
        text = "x" * 60_000
        answer = {"type": "tool_result", "tool_use_id": "late", "content": text}
        more = [*history, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [answer]}]
        body = orjson.loads(orjson.dumps(_body(more)))
        managed = session.manage(body, "anthropic")
    assert orjson.dumps(managed.body) == _from_scratch(body)
    assert managed.report.repairs  # an orphan result, repaired as the whole pipeline does


def test_a_recall_answer_that_is_no_longer_newest_is_cut_as_a_whole() -> None:
    history = _history(3)
    call = {"type": "tool_use", "id": "r1", "name": "toolbudget_recall", "input": {"key": "0" * 32}}
    answer = {"type": "tool_result", "tool_use_id": "r1", "content": "y" * 80_000}
    history += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [answer]}]
    with Session("inc", store="memory:") as session:
        first = session.manage(orjson.loads(orjson.dumps(_body(history))), "anthropic")
        assert not first.report.cuts or all(c.call_id != "r1" for c in first.report.cuts)
        body = orjson.loads(orjson.dumps(_body(history + _turn(9, 500))))
        second = session.manage(body, "anthropic")
    assert orjson.dumps(second.body) == _from_scratch(body)
    assert any(c.call_id == "r1" for c in second.report.cuts)


def test_a_bad_new_message_is_refused_in_the_bodys_own_numbering() -> None:
    history = _history(4)
    with Session("inc", store="memory:") as session:
        session.manage(orjson.loads(orjson.dumps(_body(history))), "anthropic")
        bad = _body([*history, {"role": "assistant", "content": 7}])
        with pytest.raises(ShapeError) as fast:
            session.manage(bad, "anthropic")
    with Session("inc", store="memory:") as session, pytest.raises(ShapeError) as whole:
        session.manage(bad, "anthropic")
    assert str(fast.value) == str(whole.value)
    assert "messages.9" in str(fast.value)


def test_events_and_folds_in_a_long_session_give_the_bytes_of_a_fresh_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted = _Counted(monkeypatch)
    policy = Policy(context_window_tokens=8_000)
    history = _history(60, 3_000)
    with Session("inc", store="memory:", policy=policy) as session:
        for turns in range(1, 61):
            body = orjson.loads(orjson.dumps(_body(history[: 1 + 2 * turns])))
            managed = session.manage(body, "anthropic")
            if turns % 6 == 0:
                assert orjson.dumps(managed.body) == _from_scratch(body, policy), turns
    assert any(c.reason == "compaction_fold" for c in managed.report.cuts)
    assert 20 < counted.fast < 60


def test_an_event_on_a_history_known_valid_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction event runs the whole budget, but a history that appended validly to a valid
    one needs no second pairing check; one that needs a repair still gets it."""
    from toolbudget import pairing
    from toolbudget import session as session_module

    checked: list[int] = []
    repair_traced = pairing.repair_traced

    def counting(request: Any) -> Any:
        checked.append(len(request.messages))
        return repair_traced(request)

    monkeypatch.setattr(session_module, "repair_traced", counting)
    policy = Policy(context_window_tokens=8_000)
    history = _history(30, 3_000)
    events = 0
    with Session("inc", store="memory:", policy=policy) as session:
        for turns in range(1, 31):
            body = orjson.loads(orjson.dumps(_body(history[: 1 + 2 * turns])))
            managed = session.manage(body, "anthropic")
            events += managed.report.compaction_event
            if turns % 10 == 0:
                mine = len(checked)
                assert orjson.dumps(managed.body) == _from_scratch(body, policy), turns
                del checked[mine:]  # the fresh session's own check
        assert events >= 3
        assert checked == [3]  # the first request alone: every later one appended validly
        # A result answering no call: the whole check runs, and repairs it.
        stray = {"type": "tool_result", "tool_use_id": "call_nobody", "content": "late"}
        bad = [*history, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [stray]}]
        repaired = session.manage(orjson.loads(orjson.dumps(_body(bad))), "anthropic")
        assert checked[1:] == [len(bad)]
        assert repaired.report.repairs


@pytest.mark.parametrize("big", [False, True])
def test_bodies_given_as_bytes_get_the_bytes_of_the_whole_pipeline(
    monkeypatch: pytest.MonkeyPatch, big: bool
) -> None:
    counted = _Counted(monkeypatch)
    history = _history(12)
    history[1]["content"][0]["input"]["timeout"] = 1.0e1  # a literal orjson writes otherwise
    if big:
        history[3]["content"][0]["input"]["seed"] = 10**30  # a number orjson cannot hold
    with (
        Session("inc", store="memory:") as fast,
        _whole(Session("inc", store="memory:")) as whole,
    ):
        for turns in range(1, 13):
            text = dumps(_body(history[: 1 + 2 * turns])).replace(b"10.0", b"1.0e1")
            got = fast.manage(text, "anthropic")
            assert got.body == whole.manage(text, "anthropic").body
            assert got.report == whole.last_report
    # A history orjson cannot write goes through the whole pipeline every time.
    assert counted.fast == 0 if big else counted.fast >= 10


def test_a_parsed_request_managed_between_bodies_leaves_the_next_body_exact() -> None:
    history = _history(6)
    with Session("inc", store="memory:") as session:
        session.manage(orjson.loads(orjson.dumps(_body(history[:7]))), "anthropic")
        other = to_request(Conversation("o", "test", ()), "anthropic", model="m")
        session.manage_request(wire_parse(other))
        body = orjson.loads(orjson.dumps(_body(history[:11])))
        got = orjson.dumps(session.manage(body, "anthropic").body)
    assert got == _from_scratch(body)


def wire_parse(body: dict[str, Any]) -> Any:
    from toolbudget import wire

    return wire.parse(body, "anthropic")


def test_the_same_history_again_is_answered_as_before_without_the_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = [0]
    run = Session._run

    def counting(session: Session, request: Any) -> Any:
        runs[0] += 1
        return run(session, request)

    monkeypatch.setattr(Session, "_run", counting)
    history = _history(6)
    with Session("inc", store="memory:") as session:
        session.manage(orjson.loads(orjson.dumps(_body(history[:9]))), "anthropic")
        body = orjson.loads(orjson.dumps(_body(history[:11])))
        first = session.manage(body, "anthropic")
        runs[0] = 0
        again = session.manage(orjson.loads(orjson.dumps(body)), "anthropic")
    assert runs[0] == 0  # a retry costs no pipeline
    assert orjson.dumps(again.body) == orjson.dumps(first.body) == _from_scratch(body)
    assert again.report == replace(first.report, keys_written=())
