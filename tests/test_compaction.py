"""Microcompaction: levels by age, lossless at every level, and a schedule the prompt cache can live with."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbudget import load_transcript, to_request, validate, wire
from toolbudget.budget import result_text
from toolbudget.compaction import (
    EAGER_LOSING,
    LEVEL_NONE,
    QUIET_BELOW_CHARS,
    QUIET_EAGER,
    READ_COST,
    WRITE_COST,
    Schedule,
    SlotInfo,
    _decide,
    _eager_step,
    _Span,
    _unmanaged_step,
    eager_levels,
    size_at,
    turn_starts,
)
from toolbudget.marker import MARKER_RE, find_markers
from toolbudget.model import Conversation, Message, Request, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import requests_of
from toolbudget.session import Session

EAGER = Policy(compaction="eager")


def session_of(
    turns: int, size: int = 12_000, *, tool: str = "Bash", error_at: int | None = None
) -> Conversation:
    """A conversation of ``turns`` assistant turns, each calling one tool with a ``size``-char result."""
    messages = [Message("user", (Text("fix the bug"),))]
    for t in range(turns):
        call = ToolCall(f"call_{t}", tool, {"command": f"pytest tests/test_{t}.py"})
        messages.append(Message("assistant", (Text(f"step {t}"), call)))
        body = "".join(f"line {n} of output {t}\n" for n in range(size // 20))
        is_error = t == error_at
        if is_error:
            # Claude Code's form of a failed command: its exit status on the first line.
            body = "Exit code 1\n" + body + "Traceback (most recent call last):\nValueError: broken\n"
        messages.append(Message("tool", (ToolResult(call.id, (Text(body),), is_error, tool),)))
    return Conversation("c", "test", tuple(messages))


def result_texts(body: dict[str, Any], api: str = "anthropic") -> list[str]:
    request = wire.parse(body, api)
    return [result_text(p) or "" for m in request.messages for p in m.parts if isinstance(p, ToolResult)]


def test_levels_fire_at_their_ages_and_level_two_fires_with_the_defaults() -> None:
    conversation = session_of(8)
    with Session("ages", store="memory:", policy=EAGER) as session:
        managed = session.manage(to_request(conversation, "anthropic", model="m"), "anthropic")
        texts = result_texts(managed.body)
        originals = [
            result_text(p) or "" for m in conversation.messages for p in m.parts if isinstance(p, ToolResult)
        ]
        ages = [7 - t for t in range(8)]
        for text, original, age in zip(texts, originals, ages, strict=True):
            if age >= 4:
                (marker,) = find_markers(text)
                assert text.startswith("[toolbudget: omitted") and text.count("\n") == 0, age
                assert "Bash `pytest tests/test_" in marker.detail and " lines, " in marker.detail
                assert f"{len(original)} chars" in marker.detail
                assert session.original(marker.key or "") == original
            elif age >= 2:
                (marker,) = find_markers(text)
                assert len(text) <= 2_000 + 500 + 400
                assert text.startswith(original[:100])
                assert session.original(marker.key or "") == original
            else:
                assert text == original


def test_one_key_across_levels_and_recall_returns_the_original() -> None:
    conversation = session_of(7)
    keys: dict[int, set[str]] = {}
    with Session("keys", store="memory:", policy=EAGER) as session:
        for prefix in requests_of(conversation):
            body = to_request(prefix, "anthropic", model="m")
            for n, text in enumerate(result_texts(session.manage(body, "anthropic").body)):
                for marker in find_markers(text):
                    keys.setdefault(n, set()).add(marker.key or "")
        assert keys[0] and all(len(v) == 1 for v in keys.values())
        original = result_text(conversation.messages[2].parts[0])  # type: ignore[arg-type]
        assert session.original(next(iter(keys[0]))) == original


def test_errors_and_exec_results_keep_their_error_text_at_every_level() -> None:
    conversation = session_of(7, error_at=0)
    with Session("errors", store="memory:", policy=EAGER) as session:
        text = result_texts(
            session.manage(to_request(conversation, "anthropic", model="m"), "anthropic").body
        )[0]
    (marker,) = find_markers(text)
    assert "exit 1" in marker.detail
    assert "ValueError: broken" in text and "Traceback (most recent call last):" in text


def test_small_and_exempt_results_are_never_compacted() -> None:
    small = session_of(8, size=2_500)
    with Session("small", store="memory:", policy=EAGER) as session:
        body = to_request(small, "anthropic", model="m")
        assert session.manage(body, "anthropic").body is body
    exempt = session_of(8, tool="pager")
    policy = replace(Policy.load(env={}, exempt_tools=["pager"]), compaction="eager")
    with Session("exempt", store="memory:", policy=policy) as session:
        body = to_request(exempt, "anthropic", model="m")
        assert session.manage(body, "anthropic").body is body


def _managed_requests(
    conversation: Conversation, policy: Policy, api: str
) -> list[tuple[dict[str, Any], bool]]:
    out = []
    with Session("replay", store="memory:", policy=policy) as session:
        for prefix in requests_of(conversation):
            managed = session.manage(to_request(prefix, api, model="m"), api)
            out.append((managed.body, managed.report.compaction_event))
    return out


def _extends(previous: dict[str, Any], current: dict[str, Any]) -> bool:
    """Whether ``current`` is ``previous`` plus appended messages, byte for byte."""
    old, new = previous["messages"], current["messages"]
    if len(new) < len(old):
        return False
    same = all(orjson.dumps(a) == orjson.dumps(b) for a, b in zip(old, new, strict=False))
    rest = {k: v for k, v in previous.items() if k != "messages"} == {
        k: v for k, v in current.items() if k != "messages"
    }
    return same and rest


def _check_between_events(requests: list[tuple[dict[str, Any], bool]]) -> tuple[int, int]:
    events = stable = 0
    for (previous, _), (current, event) in itertools.pairwise(requests):
        if event:
            events += 1
            continue
        assert _extends(previous, current)
        stable += 1
    return events, stable


def test_between_events_each_request_extends_the_last_on_real_sessions(trajectories: Path) -> None:
    manifest = orjson.loads((trajectories / "manifest.json").read_bytes())
    totals = [0, 0]
    for entry in manifest:
        for conversation in load_transcript(trajectories / entry["file"]).conversations[:3]:
            events, stable = _check_between_events(_managed_requests(conversation, Policy(), "anthropic"))
            totals[0] += events
            totals[1] += stable
    assert totals[0] > 0 and totals[1] > 10 * totals[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(100, 40_000), min_size=2, max_size=14),
    clear_at_least=st.integers(1_000, 20_000),
)
def test_between_events_each_request_extends_the_last(sizes: list[int], clear_at_least: int) -> None:
    messages = [Message("user", (Text("go"),))]
    for t, size in enumerate(sizes):
        call = ToolCall(f"c{t}", "Bash", {"command": f"run {t}"})
        messages.append(Message("assistant", (call,)))
        text = "".join(f"{t}:{n}\n" for n in range(size // 6))
        messages.append(Message("tool", (ToolResult(call.id, (Text(text),)),)))
    conversation = Conversation("h", "test", tuple(messages))
    policy = Policy(compact_clear_at_least=clear_at_least)
    _check_between_events(_managed_requests(conversation, policy, "anthropic"))


_SCRIPT = """
import sys, orjson
from toolbudget.session import Session
body = orjson.loads(sys.stdin.buffer.read())
with Session("replay", store="memory:") as s:
    sys.stdout.buffer.write(orjson.dumps(s.manage(body, "anthropic").body))
"""


def test_a_restart_gives_the_same_bytes(trajectories: Path) -> None:
    path = trajectories / "claude-code/tests/integration/session/fixtures/session-624a4a58.jsonl"
    conversation = load_transcript(path).conversations[0]
    requests = _managed_requests(conversation, Policy(), "anthropic")
    assert any(event for _, event in requests)
    prefixes = list(requests_of(conversation))
    for n in (len(prefixes) // 2, len(prefixes) - 1):
        # A fresh process that never saw the earlier requests.
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT],
            input=orjson.dumps(to_request(prefixes[n], "anthropic", model="m")),
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "7"},
        )
        assert done.stdout == orjson.dumps(requests[n][0])


@pytest.mark.parametrize("window", [6_000, 15_000])
def test_the_window_is_never_exceeded(trajectories: Path, window: int) -> None:
    """Past the high watermark compaction keeps going (every old result to one line, then the
    oldest turns folded away) until the request fits: no managed request is over the window."""
    policy = Policy(context_window_tokens=window)
    folds = over = 0
    for name in (
        "claude-code/tests/integration/session/fixtures/session-624a4a58.jsonl",
        "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json",
    ):
        conversation = load_transcript(trajectories / name).conversations[0]
        requests = []
        with Session("window", store="memory:", policy=policy) as session:
            for prefix in requests_of(conversation):
                managed = session.manage(to_request(prefix, "anthropic", model="m"), "anthropic")
                report = managed.report
                if report.tokens_after > window:
                    # Only when nothing is left to fold: the task and the newest turn, which is
                    # over the window by itself (a long assistant message); the report says so.
                    left = wire.parse(managed.body, "anthropic").messages
                    assert report.over_window and len(turn_starts(left)) == 1, (name, report.tokens_after)
                    over += 1
                assert validate(managed.body, "anthropic") == [], name
                folds += any(c.reason == "compaction_fold" for c in report.cuts)
                requests.append((managed.body, report.compaction_event))
        # Folds too change the prefix only at events.
        _check_between_events(requests)
    assert folds > 0
    assert over <= 3


ALL_APIS = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")


@pytest.mark.parametrize("api", ALL_APIS)
def test_folded_turns_recall_exactly_and_a_folded_body_is_managed_unchanged(api: str, tmp_path: Path) -> None:
    conversation = session_of(40, 12_000)
    policy = Policy(context_window_tokens=8_000)
    body = to_request(conversation, api, model="m")
    store = f"dir:{tmp_path}"
    with Session("fold", store=store, policy=policy) as session:
        managed = session.manage(body, api)
        again = session.manage(orjson.loads(orjson.dumps(managed.body)), api)
        fold = next(c for c in managed.report.cuts if c.reason == "compaction_fold")
        assert fold.key is not None
        archived = session.original(fold.key)
    assert managed.report.tokens_after <= 8_000
    assert validate(managed.body, api) == []
    assert again.body == managed.body
    # What the fold recalls is the folded messages exactly, as this API lays them out.
    original = wire.parse(body, api).messages
    folded = wire.parse(orjson.loads(archived), api).messages
    start = next(i for i, m in enumerate(original) if m.role == "assistant")
    assert folded == original[start : start + len(folded)]
    assert len(folded) >= 2
    # A session started again with the same id and store sends it back unchanged too.
    with Session("fold", store=store, policy=policy) as session:
        assert orjson.dumps(session.manage(managed.body, api).body) == orjson.dumps(managed.body)


@pytest.mark.shared
@pytest.mark.slow
def test_a_two_thousand_turn_session_stays_inside_its_window(trajectories: Path) -> None:
    """Real turns repeated with fresh ids, 2000 of them: past the window from a few hundred
    turns on, and every managed request still estimated inside it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from loop import request_bodies, synthetic

    path = (
        "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/"
        "pylint-dev__pylint-6528/pylint-dev__pylint-6528.traj.json"
    )
    conversation = synthetic(load_transcript(trajectories / path).conversations[0], 2_000)
    window = 200_000
    past = 0
    with Session("long", store="memory:", policy=Policy()) as session:
        for body in request_bodies(conversation):
            report = session.manage(body, "anthropic").report
            assert report.window_tokens == window
            past += report.tokens_before > window
            assert report.tokens_after <= window and not report.over_window, report.tokens_after
    assert past > 1_000


def _synthetic(result_sizes: list[int], policy: Policy) -> tuple[list[SlotInfo], list[int], list[int]]:
    """A task, then per turn an assistant call and its result: slots, cumulative sizes, request ends."""
    sizes = [500]
    slots = []
    for turn, size in enumerate(result_sizes):
        sizes += [200, size]
        slots.append(SlotInfo(len(sizes) - 1, turn, size, size > policy.microcompact_min_chars, False))
    cum = [0, *itertools.accumulate(sizes)]
    ends = [3 + 2 * j for j in range(len(result_sizes))]
    return slots, cum, ends


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(100, 20_000), min_size=1, max_size=12))
def test_the_eager_replay_bills_as_a_count_of_the_prompt_text(result_sizes: list[int]) -> None:
    """What the schedule tallies for per-turn aging equals billing the prompts it would send."""
    policy = Policy()
    slots, cum, ends = _synthetic(result_sizes, policy)
    counted = tallied = 0.0
    previous = ""
    then: list[int] = []
    for j, end in enumerate(ends):
        present = [s for s in slots if s.msg < end]
        now = eager_levels(present, j + 1, policy)
        levels = dict(zip((s.msg for s in present), now, strict=True))
        pieces = []
        for i in range(end):
            if i in levels:
                slot = next(s for s in present if s.msg == i)
                # A character of its own per result and level: a changed level changes the first byte.
                pieces.append(chr(0x100 + 3 * i + levels[i]) * size_at(slot, levels[i], policy))
            else:
                pieces.append("x" * (cum[i + 1] - cum[i]))
        text = "".join(pieces)
        same = (i for i, (a, b) in enumerate(zip(previous, text, strict=False)) if a != b)
        prefix = next(same, min(len(previous), len(text)))
        counted += READ_COST * prefix + WRITE_COST * (len(text) - prefix)
        tallied += _eager_step(present, then, now, end, ends[j - 1] if j else 0, cum, policy)
        previous, then = text, now
    assert tallied == pytest.approx(counted)


def test_a_patient_schedule_fires_only_for_the_watermark() -> None:
    policy = Policy()
    slots, cum, ends = _synthetic([12_000] * 8, policy)
    end, prev_end = ends[-1], ends[-2]

    def decide(patient: bool, window_chars: int) -> tuple[bool, list[int]]:
        state = [LEVEL_NONE] * len(slots)
        targets = eager_levels(slots, len(ends), policy)
        fired = _decide(slots, state, targets, len(ends), end, prev_end, cum, window_chars, policy, patient)
        return fired, state

    assert decide(False, 10**9)[0]
    assert decide(True, 10**9) == (False, [LEVEL_NONE] * len(slots))
    fired, state = decide(True, cum[end] // 2)
    assert fired and any(state)


def test_the_system_prompt_counts_against_the_window() -> None:
    """On APIs that hold it outside the messages, the system prompt fills the window too."""
    window = 10_000
    policy = Policy(context_window_tokens=window)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    with Session("system", store="memory:", policy=policy) as session:
        for turn in range(8):
            call = {
                "type": "tool_use",
                "id": f"c{turn}",
                "name": "Read",
                "input": {"file_path": f"/f{turn}.py"},
            }
            messages.append({"role": "assistant", "content": [call]})
            result = {"type": "tool_result", "tool_use_id": f"c{turn}", "content": f"line {turn}\n" * 700}
            messages.append({"role": "user", "content": [result]})
            body = {"model": "m", "max_tokens": 5, "system": "rules\n" + "r" * 24_000, "messages": messages}
            assert session.manage(body, "anthropic").report.tokens_after <= window


def test_a_gemini_call_without_an_id_still_names_its_command() -> None:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "fix the tests"}]}]
    output = "\n".join(f"tests/test_x.py::test_{i} PASSED" for i in range(300))
    for turn in range(5):
        call = {"name": "run_shell_command", "args": {"command": f"pytest -k case{turn}"}}
        contents.append({"role": "model", "parts": [{"functionCall": call}]})
        response = {"name": "run_shell_command", "response": {"output": f"{output}\n{turn}"}}
        contents.append({"role": "user", "parts": [{"functionResponse": response}]})
    with Session("noid", store="memory:", policy=EAGER) as session:
        out = session.manage({"contents": contents}, "gemini").body
    summary = out["contents"][2]["parts"][0]["functionResponse"]["response"]["output"]
    marker = MARKER_RE.search(summary)
    assert marker is not None and "`pytest -k case0`" in (marker.group("detail") or "")


def test_a_resent_summary_is_not_worked_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Summaries are remembered like previews: the next request reuses them, byte for byte."""
    from toolbudget import budget

    conversation = session_of(8, error_at=1)
    prefixes = list(requests_of(conversation))
    calls: list[str] = []
    real_summarize = budget.summarize_result  # type: ignore[attr-defined]

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append("detail")
        return real_summarize(*args, **kwargs)

    monkeypatch.setattr(budget, "summarize_result", counting)
    with Session("memo", store="memory:", policy=EAGER) as session:
        session.manage(to_request(prefixes[-2], "anthropic", model="m"), "anthropic")
        summarised = len(calls)
        assert summarised > 0
        second = session.manage(to_request(prefixes[-1], "anthropic", model="m"), "anthropic").body
    # One more result reached the summary age; the others came from the memo.
    assert len(calls) - summarised <= 1
    with Session("memo", store="memory:", policy=EAGER) as fresh:
        assert fresh.manage(to_request(prefixes[-1], "anthropic", model="m"), "anthropic").body == second


def _reference(
    slots: list[SlotInfo], cum: list[int], starts: list[int], policy: Policy, window_chars: int
) -> tuple[list[int], list[int], int, float]:
    """The schedule worked out from scratch at every request point, walking every result."""
    points = [*starts[1:], len(cum) - 1]
    state: list[int] = []
    fold = [0]
    events = []
    unmanaged = eager = 0.0
    then: list[int] = []
    for j, end in enumerate(points):
        present = [s for s in slots if s.msg < end]
        now = eager_levels(present, j + 1, policy)
        state.extend([LEVEL_NONE] * (len(present) - len(state)))
        prev_end = points[j - 1] if j else 0
        patient = j > 0 and eager > (1 + EAGER_LOSING) * unmanaged
        quiet = j > 0 and cum[end] < QUIET_BELOW_CHARS and eager > (1 + QUIET_EAGER) * unmanaged
        span = _Span(starts, fold)
        args = (present, state, now, j + 1, end, prev_end, cum, window_chars, policy, patient, 0, span)
        if _decide(*args, quiet=quiet):
            events.append(j)
        unmanaged += _unmanaged_step(end, prev_end, cum, first=j == 0)
        eager += _eager_step(present, then, now, end, prev_end, cum, policy)
        then = now
    return state, events, fold[0], eager


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(
        st.tuples(st.integers(0, 3), st.lists(st.integers(50, 15_000), max_size=3), st.integers(0, 3_000)),
        min_size=1,
        max_size=40,
    ),
    window=st.sampled_from([3_000, 8_000, 30_000, 200_000]),
    clear_at_least=st.sampled_from([0, 2_000, 20_000]),
)
def test_the_running_schedule_decides_as_the_schedule_from_scratch(
    turns: list[tuple[int, list[int], int]], window: int, clear_at_least: int
) -> None:
    """Schedule.levels keeps running sums instead of walking every result at every point: the
    levels, events, folds and aging cost are the same as working every point out from scratch."""
    policy = Policy(context_window_tokens=window, compact_clear_at_least=clear_at_least)
    messages = [Message("user", (Text("task"),))]
    sizes = [400]
    slots = []
    for t, (extra, results, text) in enumerate(turns):
        messages.append(Message("assistant", (Text("x" * text),)))
        sizes.append(text)
        for _ in range(extra):  # user messages in between
            messages.append(Message("user", (Text("note"),)))
            sizes.append(300)
        for size in results:
            messages.append(Message("tool", (ToolResult(f"c{t}", (Text("r"),)),)))
            sizes.append(size)
            eligible = size > policy.microcompact_min_chars
            slots.append(SlotInfo(len(messages) - 1, t, size, eligible, size % 2 == 0, size % 5 != 0))
    if not slots:
        return  # nothing to schedule: every level is none without a walk
    cum = [0, *itertools.accumulate(sizes)]
    request = Request("anthropic", tuple(messages))
    schedule = Schedule()
    levels = schedule.levels(request, slots, sizes, policy)
    state, events, folded, eager = _reference(slots, cum, turn_starts(messages), policy, window * 4)
    state.extend([LEVEL_NONE] * (len(slots) - len(state)))
    assert levels == state
    assert schedule.events == events and schedule.folded == folded
    assert schedule._points[-1].eager == pytest.approx(eager)
    # And request by request, resuming from the memo, the same again.
    again = Schedule()
    for n in range(2, len(messages) + 1):
        prefix = Request("anthropic", tuple(messages[:n]))
        present = [s for s in slots if s.msg < n]
        if messages[n - 1].role != "assistant" and present:
            again.levels(prefix, present, sizes[:n], policy)
    assert again.levels(request, slots, sizes, policy) == levels


def test_a_cold_schedule_grows_linearly_with_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """Worked out from scratch (a restarted process), the schedule's work grows with the
    history, not with its square: twice the turns, about twice the result sizings."""
    from toolbudget import compaction

    calls = [0]
    sized = compaction.size_at

    def counting(slot: SlotInfo, level: int, policy: Policy) -> int:
        calls[0] += 1
        return sized(slot, level, policy)

    monkeypatch.setattr(compaction, "size_at", counting)
    counts = []
    for turns in (200, 400, 800):
        messages = [Message("user", (Text("task"),))]
        sizes = [400]
        slots = []
        for t in range(turns):
            messages += [Message("assistant", (Text("x"),)), Message("tool", (ToolResult(f"c{t}", ()),))]
            size = 2_000 + (t * 7919) % 9_000
            sizes += [300, size]
            slots.append(SlotInfo(len(messages) - 1, t, size, size > 3_000, t % 3 == 0))
        calls[0] = 0
        Schedule().levels(Request("anthropic", tuple(messages)), slots, sizes, Policy())
        counts.append(calls[0])
    assert counts[1] < 2.6 * counts[0] and counts[2] < 2.6 * counts[1], counts


_FOLD_SCRIPT = """
import sys, orjson
from toolbudget.policy import Policy
from toolbudget.session import Session
body = orjson.loads(sys.stdin.buffer.read())
with Session("replay", store="memory:", policy=Policy(context_window_tokens=8000)) as s:
    sys.stdout.buffer.write(orjson.dumps(s.manage(body, "anthropic").body))
"""


def test_folds_are_the_same_bytes_warm_fresh_and_in_another_process() -> None:
    conversation = session_of(30, 12_000)
    policy = Policy(context_window_tokens=8_000)
    requests = _managed_requests(conversation, policy, "anthropic")
    last = to_request(list(requests_of(conversation))[-1], "anthropic", model="m")
    with Session("replay", store="memory:", policy=policy) as session:
        fresh = session.manage(last, "anthropic")
    assert any(c.reason == "compaction_fold" for c in fresh.report.cuts)
    assert fresh.body == requests[-1][0]
    done = subprocess.run(
        [sys.executable, "-c", _FOLD_SCRIPT],
        input=orjson.dumps(last),
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "11"},
    )
    assert done.stdout == orjson.dumps(requests[-1][0])


# --- idle gaps: a cold cache is the moment to compact everything eligible ---------------


def _timed(
    conversation: Conversation,
    policy: Policy,
    arrivals: list[float] | None,
    cold: frozenset[int] = frozenset(),
) -> tuple[list[dict[str, Any]], frozenset[int]]:
    """Every request managed by one session, told when each arrives; the cold points it recorded."""
    out = []
    with Session("replay", store="memory:", policy=policy) as session:
        session._schedule.restore_cold(cold)
        for n, prefix in enumerate(requests_of(conversation)):
            now = arrivals[n] if arrivals is not None else None
            out.append(session.manage(to_request(prefix, "anthropic", model="m"), "anthropic", now=now).body)
        return out, session._schedule.cold_points


def _compacted(body: dict[str, Any]) -> int:
    return sum(
        text.startswith("[toolbudget:") or "[toolbudget: omitted" in text for text in result_texts(body)
    )


def test_a_request_after_an_idle_gap_compacts_everything_eligible() -> None:
    # Results just over the minimum: at Anthropic's write price no rewrite pays for a while.
    conversation = session_of(10, 3_200)
    policy = Policy()
    count = len(list(requests_of(conversation)))
    warm = [10.0 * n for n in range(count)]
    gap = 7
    idle = [t + (600.0 if n >= gap else 0.0) for n, t in enumerate(warm)]
    blind, none_cold = _timed(conversation, policy, None)
    told, cold = _timed(conversation, policy, idle)
    assert none_cold == frozenset() and _timed(conversation, policy, warm)[1] == frozenset()
    assert len(cold) == 1
    eager, _ = _timed(conversation, Policy(compaction="eager"), None)
    # Before the gap the same bytes; at it, everything eligible compacted as eager has it.
    assert told[:gap] == blind[:gap]
    assert _compacted(told[gap]) == _compacted(eager[gap]) > _compacted(blind[gap])
    # Without timing the schedule is the function of the history it was.
    assert _timed(conversation, policy, None)[0] == blind


def test_the_one_hour_cache_survives_a_ten_minute_gap() -> None:
    conversation = session_of(10, 3_200)
    count = len(list(requests_of(conversation)))
    idle = [10.0 * n + (600.0 if n >= 7 else 0.0) for n in range(count)]
    assert len(_timed(conversation, Policy(cache_price="anthropic-1h"), idle)[1]) == 0
    assert len(_timed(conversation, Policy(cache_price="none"), idle)[1]) == 0
    assert len(_timed(conversation, Policy(cache_price="openai"), idle)[1]) == 1


_COLD_SCRIPT = """
import sys, orjson
from toolbudget.session import Session
data = orjson.loads(sys.stdin.buffer.read())
with Session("replay", store="memory:") as s:
    s._schedule.restore_cold(frozenset(data["cold"]))
    sys.stdout.buffer.write(orjson.dumps(s.manage(data["body"], "anthropic").body))
"""


def test_the_recorded_cold_points_give_the_same_bytes_fresh_and_in_another_process() -> None:
    conversation = session_of(10, 3_200)
    prefixes = list(requests_of(conversation))
    idle = [10.0 * n + (600.0 if n >= 7 else 0.0) for n in range(len(prefixes))]
    told, cold = _timed(conversation, Policy(), idle)
    assert cold
    for n in (7, len(prefixes) - 1):
        body = to_request(prefixes[n], "anthropic", model="m")
        with Session("replay", store="memory:") as session:
            session._schedule.restore_cold(cold)
            assert session.manage(body, "anthropic").body == told[n]
        done = subprocess.run(
            [sys.executable, "-c", _COLD_SCRIPT],
            input=orjson.dumps({"body": body, "cold": sorted(cold)}),
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "5"},
        )
        assert done.stdout == orjson.dumps(told[n])
