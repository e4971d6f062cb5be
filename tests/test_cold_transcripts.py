"""A transcript's own clock: Gemini CLI session files say when each request was sent."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import load_transcript
from toolbudget.policy import Policy
from toolbudget.replay import replay_requests, request_count, transcript_arrivals
from toolbudget.session import Session

GEMINI_FILE = "gemini-cli/tests/integration/metrics/fixtures/gemini/session-2025-12-01T21-45-5b959dae.json"


def _call(n: int, stamp: str, result: bool = True) -> dict[str, Any]:
    call: dict[str, Any] = {"id": f"c{n}", "name": "run_shell_command", "args": {"command": f"ls {n}"}}
    call["status"] = "success" if result else "cancelled"
    call["timestamp"] = stamp
    if result:
        call["result"] = [
            {"functionResponse": {"id": f"c{n}", "name": "run_shell_command", "response": {"output": "x"}}}
        ]
    return call


def test_gemini_cli_requests_leave_when_the_user_writes_or_the_last_result_is_ready(tmp_path: Path) -> None:
    session = {
        "sessionId": "s1",
        "projectHash": "p",
        "startTime": "2025-12-01T10:00:00.000Z",
        "messages": [
            {"id": "1", "type": "user", "timestamp": "2025-12-01T10:00:00.000Z", "content": "look"},
            # One answer, two calls: the second waited 10 minutes for the user's approval.
            {
                "id": "2",
                "type": "gemini",
                "timestamp": "2025-12-01T10:00:05.000Z",
                "content": "",
                "toolCalls": [_call(0, "2025-12-01T10:00:05.000Z"), _call(1, "2025-12-01T10:10:05.000Z")],
            },
            {"id": "3", "type": "info", "timestamp": "2025-12-01T10:10:06.000Z", "content": "notice"},
            {
                "id": "4",
                "type": "gemini",
                "timestamp": "2025-12-01T10:10:09.000Z",
                "content": "done",
                "toolCalls": [_call(2, "2025-12-01T10:10:09.000Z", result=False)],
            },
            {"id": "5", "type": "user", "timestamp": "2025-12-01T10:30:00.000Z", "content": "thanks"},
        ],
    }
    path = tmp_path / "session-2025-12-01T10-00-s1.json"
    path.write_bytes(orjson.dumps(session))
    conversation = load_transcript(path).conversations[0]
    arrivals = transcript_arrivals(path, conversation)
    assert arrivals is not None and len(arrivals) == request_count(conversation) == 3
    base = arrivals[0]
    # The task; the results, when the approved call finished; the user's next message.
    assert [round(t - base) for t in arrivals] == [0, 605, 1800]


def test_a_gemini_cli_file_with_a_message_without_its_time_has_no_clock(tmp_path: Path) -> None:
    session = {
        "sessionId": "s2",
        "messages": [
            {"id": "1", "type": "user", "content": "look"},
            {"id": "2", "type": "gemini", "timestamp": "2025-12-01T10:00:05.000Z", "content": "ok"},
        ],
    }
    path = tmp_path / "session-2025-12-01T10-00-s2.json"
    path.write_bytes(orjson.dumps(session))
    assert transcript_arrivals(path, load_transcript(path).conversations[0]) is None


@pytest.mark.shared
def test_the_shared_gemini_cli_session_has_its_clock(trajectories: Path) -> None:
    path = trajectories / GEMINI_FILE
    conversation = load_transcript(path).conversations[0]
    arrivals = transcript_arrivals(path, conversation)
    assert arrivals is not None and len(arrivals) == request_count(conversation)
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert all(gap >= 0 for gap in gaps)
    # A person reading the answer (about 100 s) is its longest pause: under any cache's TTL.
    assert 60 < max(gaps) < 300


@pytest.mark.shared
def test_a_claude_code_sub_agents_file_has_its_own_clock(trajectories: Path) -> None:
    """A sub-agent's file holds only sidechain lines: they are its conversation's clock."""
    path = trajectories / (
        "claude-code/tests/integration/session/fixtures/claude/incremental-subagents/turn-2/subagents/agent-a485154.jsonl"
    )
    (conversation,) = load_transcript(path).conversations
    assert conversation.sidechain
    arrivals = transcript_arrivals(path, conversation)
    assert arrivals is not None and len(arrivals) == request_count(conversation)
    assert all(b >= a for a, b in itertools.pairwise(arrivals))


# The timestamped sessions test_prices.py does not already bill (624a4a58 and the Codex rollout).
_OTHER_TIMED = (
    "claude-code/tests/integration/session/fixtures/claude/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
    "claude-code/tests/integration/session/fixtures/claude/incremental-subagents/turn-2.jsonl",
    "claude-code/tests/integration/session/fixtures/claude/incremental-subagents/turn-2/subagents/agent-a485154.jsonl",
    "claude-code/tests/integration/session/fixtures/session-196820da.jsonl",
    "claude-code/tests/integration/session/fixtures/session-9eda1058.jsonl",
    GEMINI_FILE,
)


@pytest.mark.shared
@pytest.mark.parametrize("name", _OTHER_TIMED)
def test_told_of_its_own_clock_the_schedule_never_bills_more(trajectories: Path, name: str) -> None:
    """None of these has a gap over five minutes where anything is eligible: told of the gaps,
    the schedule bills what it bills blind (never more)."""
    path = trajectories / name
    conversation = load_transcript(path).conversations[0]
    arrivals = transcript_arrivals(path, conversation)
    assert arrivals is not None
    billed = {}
    for label, told in (("blind", None), ("told", arrivals)):
        with Session(label, store="memory:", policy=Policy()) as session:
            times = iter(told) if told is not None else None

            def manage(
                body: dict[str, Any], live: Session = session, times: Iterator[float] | None = times
            ) -> tuple[dict[str, Any], int]:
                managed = live.manage(body, "anthropic", now=next(times) if times is not None else None)
                return managed.body, managed.report.results_cut

            billed[label] = replay_requests(conversation, "anthropic", manage, arrivals=arrivals).billed
    assert billed["told"] <= billed["blind"], billed
