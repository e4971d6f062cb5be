"""The real Claude Code (``claude -p``) runs a tool loop against the scripted upstream.

The upstream checks every request the client sends as Anthropic would, so a
passing loop means each of Claude Code's requests was valid; the recorded
bodies show what it really sends (the facts a proxy must forward unchanged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from realclients.clients import Run, run_claude
from realclients.hops import Hop, whole_or_cut
from realclients.install import Client
from realclients.project import SENTINEL, make_project
from realclients.script import Reply, Steps, Turn, say, use
from realclients.upstream import Recorded, Upstream

pytestmark = pytest.mark.slow
pytest_plugins = ["realclients.fixtures"]

BIG_BASH = 22000  # `seq 1 22000` prints 114_893 bytes: under the 128_000 inline cap set below
SETTINGS = {"bashOutputMaxChars": 128000}


def result_of(run: Run) -> dict[str, Any]:
    results = [line for line in run.json_lines() if isinstance(line, dict) and line.get("type") == "result"]
    assert results, run.describe()
    result: dict[str, Any] = results[-1]
    return result


def tool_results(body: Any) -> dict[str, str]:
    """Every tool result of the body, by its call id, as text."""
    out: dict[str, str] = {}
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    text = (
                        content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
                    )
                    out[block["tool_use_id"]] = text
    return out


def calls_of(body: Any) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def follow_marker(turn: Turn) -> Reply:
    """Read the file the last result's marker names; say so when there is none."""
    for result in turn.results:
        for marker in result.markers():
            if marker.path:
                return use(turn.tool("Read"), file_path=marker.path)
    return say("The result had no marker to follow.")


def read_persisted(turn: Turn) -> Reply:
    """Read the file Claude Code saved an output too large to send to."""
    for result in turn.results:
        if result.text.startswith("<persisted-output>"):
            path = result.text.split("Full output saved to: ", 1)[1].split("\n", 1)[0]
            return use(turn.tool("Read"), file_path=path, limit=200)
    return say("Nothing was saved.")


def assert_all_valid(requests: list[Recorded]) -> None:
    for recorded in requests:
        assert recorded.violations == (), recorded.violations
        assert recorded.toolbudget_violations == (), recorded.toolbudget_violations


def test_claude_code_runs_a_long_tool_loop(
    claude: Client, upstream: Upstream, hop: Hop, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    project = make_project(workdir)
    script = Steps(
        [
            use("Bash", command=f"seq 1 {BIG_BASH}", description="count"),
            use("Read", file_path=str(project.log), allow_large=True),
            use("Grep", pattern="ERROR", path=str(workdir), output_mode="content", head_limit=300),
            use("Bash", command="cat notes/cut.txt", description="show the cut"),
            follow_marker,
            use("Bash", command="wc -l app.log", description="count lines"),
            use("Grep", pattern="status=", path=str(workdir), output_mode="files_with_matches"),
            use("Read", file_path=str(project.log), offset=100, limit=50),
            use("Bash", command="head -c 300000 /dev/zero | tr '\\0' y | fold -w 100", description="too big"),
            read_persisted,
            use("Bash", command="echo finished", description="finish"),
        ],
        final="All done.",
    )
    upstream.script = script
    run = run_claude(
        claude, agent_base_url, "Look into app.log.", cwd=workdir, home=client_home, settings=SETTINGS
    )
    assert run.returncode == 0, run.describe()
    result = result_of(run)
    assert result["is_error"] is False
    assert result["result"] == "All done."
    assert result["num_turns"] >= 12

    turns = upstream.turns()
    assert len(turns) == 12, [(t.path, t.answer) for t in upstream.requests]
    assert_all_valid(upstream.conversation_requests())
    assert {r.answer for r in upstream.requests} <= {"turn", "side", "count", "probe", "models"}

    # Each scripted call came back answered, in order, and the big outputs are in the body whole.
    last = turns[-1].body
    calls = calls_of(last)
    assert [c["name"] for c in calls] == [
        "Bash",
        "Read",
        "Grep",
        "Bash",
        "Read",
        "Bash",
        "Grep",
        "Read",
        "Bash",
        "Read",
        "Bash",
    ]
    results = tool_results(last)
    texts = [results[c["id"]] for c in calls]
    assert calls[4]["input"]["file_path"] == str(project.archived)  # the marker was followed
    assert "5000" in texts[5]
    assert whole_or_cut(hop, texts[0], 110_000) and whole_or_cut(hop, texts[1], 200_000)
    if hop.faithful:
        assert "\n21999\n22000" in texts[0]
        assert "00000 INFO worker=0" in texts[1]
        assert texts[2].count("ERROR") >= 90
        assert SENTINEL in texts[4]
        assert turns[-1].size >= 250_000

    # Past the inline cap the client keeps the output itself and sends a 2 KB preview and a path.
    assert texts[8].startswith("<persisted-output>")
    assert len(texts[8]) < 4000
    saved = Path(calls[9]["input"]["file_path"])
    assert saved.is_relative_to(client_home / ".claude" / "projects")
    # The saved file could be read while the session ran...
    assert texts[9].count("y" * 100) >= 100 if hop.faithful else whole_or_cut(hop, texts[9], 20_000)
    # ... and is gone with the session (--no-session-persistence).
    assert not saved.exists()


def test_what_claude_code_sends(
    claude: Client, upstream: Upstream, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    """The paths, headers and body fields a proxy sees from this version (see the module docstring)."""
    upstream.script = Steps([use("Bash", command="echo hi", description="greet")], final="Bye.")
    run = run_claude(claude, agent_base_url, "Say hi.", cwd=workdir, home=client_home)
    assert run.returncode == 0, run.describe()
    session = result_of(run)["session_id"]
    requests = upstream.conversation_requests("anthropic")
    assert len(requests) == 2
    for recorded in requests:
        assert (recorded.method, recorded.path, dict(recorded.query)) == (
            "POST",
            "/v1/messages",
            {"beta": "true"},
        )
        headers = recorded.headers
        assert headers["x-claude-code-session-id"] == session
        assert headers["x-api-key"] == "<redacted>" and "authorization" not in headers
        assert headers["anthropic-version"] == "2023-06-01"
        assert "claude-code-20250219" in headers["anthropic-beta"].split(",")
        assert headers["user-agent"].startswith(f"claude-cli/{claude.version} ")
        assert headers["x-stainless-timeout"] == "600"
        assert "x-claude-code-agent-id" not in headers  # only sub-agents carry one
        body = recorded.body
        assert body["stream"] is True
        assert body["system"][0]["text"].startswith("x-anthropic-billing-header: cc_version=")
        assert body["thinking"]["type"] == "enabled"
        assert orjson.loads(body["metadata"]["user_id"])["session_id"] == session
        assert recorded.content_encoding is None
    # The attribution block is the same on every request of the conversation.
    assert len({r.body["system"][0]["text"] for r in requests}) == 1
    # The thinking block the upstream signed came back unchanged, first in its message.
    assert requests[1].body["messages"][1]["content"][0]["type"] == "thinking"


def test_claude_code_on_prompt_too_long(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    """A 400 ``prompt is too long`` makes Claude Code try to compact (twice), then give up.

    This is the client's own answer to the provider's error, so it talks to the upstream
    straight: a hop that manages the history would keep the error from happening."""
    upstream.script = Steps([use("Bash", command=f"seq 1 {BIG_BASH}", description="count")], final="Done.")
    upstream.context_limit = 15_000  # the first request fits (about 5,500); with the output it does not
    run = run_claude(claude, upstream.url, "Count.", cwd=workdir, home=client_home, settings=SETTINGS)
    assert run.returncode == 1, run.describe()
    result = result_of(run)
    assert result["is_error"] is True
    assert result["result"] == "Prompt is too long"
    assert result["api_error_status"] == 400
    assert result["terminal_reason"] == "prompt_too_long"

    answers = [r.answer for r in upstream.conversation_requests()]
    assert answers[0] == "turn" and set(answers[1:]) == {"overflow"}
    overflowed = [r for r in upstream.requests if r.answer == "overflow"]
    assert len(overflowed) == 3
    assert_all_valid(overflowed)
    # The retries are its reactive compaction: the start of the history replaced by a note and
    # a request for a text-only summary added after the tool result.
    for retry in overflowed[1:]:
        messages = retry.body["messages"]
        first = messages[0]["content"]
        first_text = first if isinstance(first, str) else first[-1]["text"]
        assert first_text == "[earlier conversation truncated for compaction retry]"
        assert messages[-1]["content"][0]["type"] == "tool_result"
        assert messages[-1]["content"][-1]["text"].startswith("CRITICAL: Respond with TEXT ONLY.")


def test_claude_code_side_routes(
    claude: Client, upstream: Upstream, hop: Hop, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    """Model discovery (opt-in), a bearer token instead of a key, and ``count_tokens`` before a
    request that has grown by a large read."""
    project = make_project(workdir)
    upstream.script = Steps([use("Read", file_path=str(project.log), allow_large=True)], final="Done.")
    env = {
        "CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY": "1",
        "ANTHROPIC_API_KEY": "",
        "ANTHROPIC_AUTH_TOKEN": "offline-test-token",
    }
    run = run_claude(claude, agent_base_url, "Read the log.", cwd=workdir, home=client_home, env=env)
    assert run.returncode == 0, run.describe()
    routes = [(r.method, r.path, dict(r.query), r.answer) for r in upstream.requests]
    assert routes == [
        ("GET", "/v1/models", {"limit": "1000"}, "models"),
        ("POST", "/v1/messages", {"beta": "true"}, "turn"),
        ("POST", "/v1/messages/count_tokens", {"beta": "true"}, "count"),
        ("POST", "/v1/messages", {"beta": "true"}, "turn"),
    ]
    for recorded in upstream.requests:
        assert recorded.headers["authorization"] == "<redacted>" and "x-api-key" not in recorded.headers
    # It counts the read's output alone, as one user message, before putting it in the history.
    counted = upstream.requests[2].body
    assert sorted(counted) == ["messages", "model", "tools"] and counted["tools"] == []
    assert [m["role"] for m in counted["messages"]] == ["user"]
    output = counted["messages"][0]["content"]
    assert isinstance(output, str) and len(output) > 100_000
    if hop.faithful:
        assert tool_results(upstream.requests[3].body).popitem()[1].startswith(output[:100_000])
