"""The proxy's acceptance runs: a real Claude Code and a real Codex, each through ``toolbudget proxy``
for more than ten turns, against the scripted upstream with a context limit the client's own history
would overflow.

Each run must show, in what the upstream received: a big result cut with a marker; a later request in
which the model read the cut through the marker's path and got the original (a slice from the middle,
which no preview holds); one request the upstream refused as too long and, right after it, the proxy's
smaller retry of the same turn accepted, while the client never saw the error (it finishes normally and
never starts its own compaction); and valid pairing on every request.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from realclients.clients import run_claude, run_codex
from realclients.install import Client
from realclients.script import Reply, Steps, Turn, say, use
from realclients.upstream import Recorded, Upstream
from toolbudget.marker import find_markers

pytestmark = pytest.mark.slow
pytest_plugins = ["realclients.fixtures"]

BIG = 22_000  # `seq 1 22000`: 114_893 bytes, over the 20_000 cap of a tool with none of its own
MIDDLE = 11_000  # a line far from both ends of that output: no preview keeps it
MEDIUM = 2_600  # `seq N N+2600`: about 15 KB, kept whole at level 0
CLAUDE_CODE_REACTIVE = "[earlier conversation truncated for compaction retry]"


@contextmanager
def proxy_in_front(upstream_url: str) -> Iterator[str]:
    from toolbudget.proxy.config import ProxyConfig, upstreams_of
    from toolbudget.proxy.server import running

    root = tempfile.mkdtemp(prefix="toolbudget-accept-")
    try:
        with running(ProxyConfig(upstreams=upstreams_of(upstream_url), store=f"dir:{root}")) as server:
            yield server.url
    finally:
        shutil.rmtree(root, ignore_errors=True)


def seq_text(start: int, stop: int) -> str:
    return "".join(f"{i}\n" for i in range(start, stop + 1))


def marker_path(turn: Turn) -> str | None:
    for result in turn.results:
        for marker in result.markers():
            if marker.path:
                return marker.path
    return None


def assert_overflow_recovered(requests: list[Recorded], limit: int) -> list[int]:
    """Every refusal is followed by the same turn, smaller, accepted; returns where refusals were."""
    answers = [r.answer for r in requests]
    refused = [i for i, a in enumerate(answers) if a == "overflow"]
    assert refused, f"the upstream never refused a request: {[(r.answer, r.tokens) for r in requests]}"
    for i in refused:
        assert requests[i].tokens > limit
        following = next(r for r in requests[i + 1 :] if r.answer != "overflow")
        assert following.answer == "turn" and following.tokens <= limit < requests[i].tokens
    return refused


def assert_all_valid(requests: list[Recorded]) -> None:
    for recorded in requests:
        assert recorded.violations == (), (recorded.answer, recorded.violations)
        assert recorded.toolbudget_violations == (), (recorded.answer, recorded.toolbudget_violations)


# --- Claude Code ----------------------------------------------------------------------------------


def claude_results(body: Any) -> list[str]:
    out: list[str] = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(
                        content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
                    )
    return out


def test_claude_code_through_the_proxy_cut_read_back_and_overflow_recovered(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    def read_the_middle(turn: Turn) -> Reply:
        path = marker_path(turn)
        if path is None:
            return say("The result had no marker to follow.")
        return use(turn.tool("Read"), file_path=path, offset=MIDDLE, limit=20)

    medium = [
        use("Bash", command=f"seq {n * 10_000} {n * 10_000 + MEDIUM}", description=f"count {n}")
        for n in range(1, 8)
    ]
    script = Steps(
        [
            use("Bash", command=f"seq 1 {BIG}", description="count"),
            read_the_middle,
            *medium,
            use("Bash", command="echo finished", description="finish"),
        ],
        final="All done.",
    )
    upstream.script = script
    limit = 15_000  # tokens (a quarter of a body's bytes): the first request is about 5,500
    upstream.context_limit = limit
    with proxy_in_front(upstream.url) as url:
        run = run_claude(
            claude,
            url,
            "Count.",
            cwd=workdir,
            home=client_home,
            settings={"bashOutputMaxChars": 128000},
            timeout=240,
        )
    assert run.returncode == 0, run.describe()
    results = [line for line in run.json_lines() if isinstance(line, dict) and line.get("type") == "result"]
    assert results and results[-1]["is_error"] is False and results[-1]["result"] == "All done."

    requests = upstream.conversation_requests()
    turns = upstream.turns()
    assert len(turns) == len(script.steps) + 1 >= 10
    assert_all_valid(requests)
    # What the client itself sent would not fit: its outputs alone are over the limit.
    unmanaged = len(seq_text(1, BIG)) + sum(
        len(seq_text(n * 10_000, n * 10_000 + MEDIUM)) for n in range(1, 8)
    )
    assert unmanaged // 4 > limit

    # The big output was cut with a marker naming a file the client's Read opens ...
    first = claude_results(turns[1].body)[-1]
    (marker,) = [m for m in find_markers(first) if m.path]
    assert f"\n{MIDDLE + 5}\n" not in first
    reads = [
        block["input"]
        for block in turns[2].body["messages"][-2]["content"]
        if block.get("type") == "tool_use"
    ]
    assert reads == [{"file_path": marker.path, "offset": MIDDLE, "limit": 20}]
    # ... and the model read the middle of it through that path: the original's lines came back.
    read_back = claude_results(turns[2].body)[-1]
    for line in range(MIDDLE, MIDDLE + 20):
        assert f"{line}\t{line}" in read_back.replace("→", "\t"), read_back[:500]

    # An overflow, refused by the upstream and recovered by the proxy's next level, unseen.
    assert_overflow_recovered(requests, limit)
    for recorded in requests:
        assert CLAUDE_CODE_REACTIVE not in orjson.dumps(recorded.body).decode()


# --- Codex ----------------------------------------------------------------------------------------


def codex_results(body: Any) -> list[str]:
    out: list[str] = []
    for item in body["input"]:
        if item.get("type") == "function_call_output":
            output = item["output"]
            out.append(output if isinstance(output, str) else orjson.dumps(output).decode())
    return out


def test_codex_through_the_proxy_cut_read_back_and_overflow_recovered(
    codex: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    def shell(turn: Turn, command: str) -> Reply:
        return use(turn.tool("exec_command"), cmd=command, max_output_tokens=200_000)

    def read_the_middle(turn: Turn) -> Reply:
        path = marker_path(turn)
        if path is None:
            return say("The result had no marker to follow.")
        return shell(turn, f"sed -n {MIDDLE},{MIDDLE + 19}p {path}")

    def step(command: str) -> Any:
        return lambda turn: shell(turn, command)

    medium = [step(f"seq {n * 10_000} {n * 10_000 + MEDIUM}") for n in range(1, 8)]
    script = Steps([step(f"seq 1 {BIG}"), read_the_middle, *medium, step("echo finished")], final="All done.")
    upstream.script = script
    limit = 22_000  # tokens: the first request is about 10,000
    upstream.context_limit = limit
    with proxy_in_front(upstream.url) as url:
        run = run_codex(
            codex,
            url,
            "Count.",
            cwd=workdir,
            home=client_home,
            config={"tool_output_token_limit": 200_000},
            timeout=240,
        )
    assert run.returncode == 0, run.describe()
    events = [e for e in run.json_lines() if isinstance(e, dict)]
    assert events[-1]["type"] == "turn.completed", run.describe()
    assert not [e for e in events if e.get("type") in ("error", "turn.failed")]

    requests = upstream.conversation_requests()
    turns = upstream.turns()
    assert len(turns) == len(script.steps) + 1 >= 10
    assert {r.answer for r in upstream.requests} <= {"turn", "overflow"}  # Codex never compacted
    assert_all_valid(requests)
    unmanaged = len(seq_text(1, BIG)) + sum(
        len(seq_text(n * 10_000, n * 10_000 + MEDIUM)) for n in range(1, 8)
    )
    assert unmanaged // 4 > limit

    first = codex_results(turns[1].body)[-1]
    assert [m for m in find_markers(first) if m.path]
    assert f"\n{MIDDLE + 5}\n" not in first
    read_back = codex_results(turns[2].body)[-1]
    # The archive holds the result as Codex sent it, its five header lines first.
    assert seq_text(MIDDLE - 5, MIDDLE + 14) in read_back, read_back[:500]

    assert_overflow_recovered(requests, limit)
