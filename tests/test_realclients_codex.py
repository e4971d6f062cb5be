"""The real Codex (``codex exec``) runs a tool loop against the scripted upstream.

Codex's shell tool in this version is ``exec_command`` (``{"cmd": ...}``); its
output comes back as text with a short header (chunk id, wall time, exit
code, token count) before ``Output:``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from realclients.clients import Run, run_codex
from realclients.hops import Hop, whole_or_cut
from realclients.install import Client
from realclients.project import KEY, SENTINEL, make_project
from realclients.script import Reply, Steps, Turn, say, use
from realclients.upstream import Recorded, Upstream

pytestmark = pytest.mark.slow
pytest_plugins = ["realclients.fixtures"]

# Codex cuts command output to about 10 KB unless told otherwise.
BIG_OUTPUT = {"tool_output_token_limit": 200_000}
OUT_OF_ROOM = (
    "Codex ran out of room in the model's context window. "
    "Start a new thread or clear earlier history before retrying."
)


def shell(turn: Turn, command: str) -> Reply:
    return use(turn.tool("exec_command"), cmd=command, max_output_tokens=200_000)


def run_step(command: str) -> Any:
    return lambda turn: shell(turn, command)


def follow_marker(turn: Turn) -> Reply:
    for result in turn.results:
        for marker in result.markers():
            if marker.path:
                return shell(turn, f"cat {marker.path}")
    return say("The result had no marker to follow.")


def events_of(run: Run) -> list[dict[str, Any]]:
    return [e for e in run.json_lines() if isinstance(e, dict)]


def outputs(body: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in body["input"]:
        if item.get("type") == "function_call_output":
            output = item["output"]
            out[item["call_id"]] = output if isinstance(output, str) else orjson.dumps(output).decode()
    return out


def calls_of(body: Any) -> list[dict[str, Any]]:
    return [item for item in body["input"] if item.get("type") == "function_call"]


def assert_all_valid(requests: list[Recorded]) -> None:
    for recorded in requests:
        assert recorded.violations == (), recorded.violations
        assert recorded.toolbudget_violations == (), recorded.toolbudget_violations


def test_codex_runs_a_long_tool_loop(
    codex: Client, upstream: Upstream, hop: Hop, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    make_project(workdir)
    upstream.script = Steps(
        [
            run_step("seq 1 60000"),
            run_step("cat app.log"),
            run_step("grep -n ERROR app.log"),
            run_step("cat notes/cut.txt"),
            follow_marker,
            run_step("wc -l app.log"),
            run_step("ls"),
            run_step("head -3 app.log"),
            run_step("grep -c INFO app.log"),
            run_step("echo finished"),
        ],
        final="All done.",
    )
    run = run_codex(
        codex, agent_base_url, "Look into app.log.", cwd=workdir, home=client_home, config=BIG_OUTPUT
    )
    assert run.returncode == 0, run.describe()
    events = events_of(run)
    assert events[-1]["type"] == "turn.completed", run.describe()
    messages = [
        e["item"]["text"]
        for e in events
        if e.get("type") == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages == ["All done."]

    turns = upstream.turns()
    assert len(turns) == 11, [(r.method, r.path, r.answer) for r in upstream.requests]
    assert_all_valid(upstream.conversation_requests())
    assert {r.answer for r in upstream.requests} == {"turn"}

    last = turns[-1].body
    calls = calls_of(last)
    assert len(calls) == 10
    results = outputs(last)
    texts = [results[c["call_id"]] for c in calls]
    # Through the proxy an old result may have aged into a one-line summary that keeps its key.
    assert all("Process exited with code 0" in t or whole_or_cut(hop, t, len(t) + 1) for t in texts), texts
    assert whole_or_cut(hop, texts[0], 340_000) and whole_or_cut(hop, texts[1], 200_000)
    followed = orjson.loads(calls[4]["arguments"])["cmd"]
    if not hop.faithful and "/tool-results/" in followed:
        # The script followed the first marker among the results: the proxy's, on `seq 1 60000`,
        # and the file it names holds that output whole.
        assert "Output:\n1\n2\n3\n" in texts[4] and texts[4].rstrip().endswith("59999\n60000")
    else:
        assert followed.endswith(f"archive/{KEY}.txt")
    if hop.faithful:
        assert texts[0].rstrip().endswith("59999\n60000")
        assert texts[2].count("ERROR") == 100
        assert SENTINEL in texts[4]
        assert turns[-1].size >= 600_000


def test_what_codex_sends(
    codex: Client, upstream: Upstream, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    """The paths, headers and body fields a proxy sees from this version (see the module docstring)."""
    upstream.script = Steps([run_step("echo hi")], final="Bye.")
    run = run_codex(codex, agent_base_url, "Say hi.", cwd=workdir, home=client_home)
    assert run.returncode == 0, run.describe()
    thread = next(e["thread_id"] for e in events_of(run) if e.get("type") == "thread.started")
    requests = upstream.conversation_requests("openai-responses")
    assert len(requests) == 2
    assert len(upstream.requests) == 2  # no model list, no WebSocket upgrade, nothing else
    for recorded in requests:
        assert (recorded.method, recorded.path, dict(recorded.query)) == ("POST", "/v1/responses", {})
        headers = recorded.headers
        assert headers["authorization"] == "<redacted>" and "x-api-key" not in headers
        assert headers["session-id"] == thread
        assert headers["thread-id"] == thread
        assert headers["x-client-request-id"] == thread
        assert headers["x-codex-window-id"] == f"{thread}:0"
        assert orjson.loads(headers["x-codex-turn-metadata"])["session_id"] == thread
        assert headers["originator"] == "codex_exec"
        assert headers["user-agent"].startswith(f"codex_exec/{codex.version} ")
        assert headers["accept"] == "text/event-stream"
        assert recorded.content_encoding is None
        body = recorded.body
        assert body["prompt_cache_key"] == thread
        assert body["stream"] is True
        assert body["store"] is False
        assert "previous_response_id" not in body  # the full input every turn over HTTP
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body["client_metadata"]["x-codex-window-id"] == f"{thread}:0"
    # The second request carries the whole first one again, then the call and its output.
    first, second = (r.body["input"] for r in requests)
    assert second[: len(first)] == first
    assert [i["type"] for i in second[len(first) :]] == ["function_call", "function_call_output"]


@pytest.mark.parametrize("in_stream", [False, True], ids=["http-400", "response-failed"])
def test_codex_on_context_overflow(
    codex: Client, upstream: Upstream, workdir: Path, client_home: Path, in_stream: bool
) -> None:
    """``context_length_exceeded`` (as a 400 or inside the stream) ends the turn at once: no retry.

    The client's own answer to the provider's error, so straight at the upstream."""
    upstream.script = Steps([run_step("seq 1 20000")], final="Done.")
    upstream.context_limit = 15_000  # the first request fits (about 10,000); with the output it does not
    upstream.overflow_in_stream = in_stream
    run = run_codex(codex, upstream.url, "Count.", cwd=workdir, home=client_home, config=BIG_OUTPUT)
    assert run.returncode == 1, run.describe()
    events = events_of(run)
    assert events[-1] == {"type": "turn.failed", "error": {"message": OUT_OF_ROOM}}
    assert [r.answer for r in upstream.requests] == ["turn", "overflow"]
    assert upstream.requests[1].status == (200 if in_stream else 400)
    assert_all_valid(upstream.conversation_requests())


def test_codex_falls_back_from_a_refused_websocket(
    codex: Client, upstream: Upstream, hop: Hop, agent_base_url: str, workdir: Path, client_home: Path
) -> None:
    """With ``supports_websockets = true`` Codex asks for a WebSocket first; refused, it uses SSE.

    A hop may refuse the upgrade itself; the upstream then sees only the POSTs."""
    upstream.script = Steps([run_step("echo hi")], final="Bye.")
    run = run_codex(
        codex,
        agent_base_url,
        "Say hi.",
        cwd=workdir,
        home=client_home,
        provider={"supports_websockets": True},
    )
    assert run.returncode == 0, run.describe()
    assert "failed to connect to Responses WebSocket" in run.stderr
    upgrades = [r for r in upstream.requests if r.method == "GET"]
    if hop.faithful:
        assert len(upgrades) == 2
    for attempt in upgrades:
        assert attempt.path == "/v1/responses" and attempt.answer == "unknown"
        assert attempt.headers["upgrade"] == "websocket"
        assert attempt.headers["openai-beta"].startswith("responses_websockets=")
    assert [r.answer for r in upstream.requests if r.method == "POST"] == ["turn", "turn"]


def test_codex_compacts_by_itself_past_its_limit(
    codex: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    """Past ``model_auto_compact_token_limit`` Codex asks the model for a summary (a request
    with no tools) and goes on from it: the call and its big output leave the history.

    It decides on the usage the upstream reports, so straight at the upstream: a hop that
    shrinks the history would move the point where it compacts."""
    upstream.script = Steps([run_step("seq 1 20000"), run_step("echo hi")], final="Done.")
    upstream.side_text = "Summary: counted to 20000."
    config = {**BIG_OUTPUT, "model_auto_compact_token_limit": 15_000, "model_context_window": 50_000}
    run = run_codex(codex, upstream.url, "Count.", cwd=workdir, home=client_home, config=config)
    assert run.returncode == 0, run.describe()
    assert [r.answer for r in upstream.requests] == ["turn", "side", "turn", "turn"]
    assert_all_valid(upstream.conversation_requests())
    compaction, after = upstream.requests[1].body, upstream.requests[2].body
    assert compaction["tools"] == []
    ask = compaction["input"][-1]["content"][0]["text"]
    assert ask.startswith("You are performing a CONTEXT CHECKPOINT COMPACTION.")
    assert [i["type"] for i in compaction["input"][-3:-1]] == ["function_call", "function_call_output"]
    assert not calls_of(after)
    handoff = after["input"][-1]["content"][0]["text"]
    assert handoff.startswith("Another language model started to solve this problem")
    assert "Summary: counted to 20000." in handoff
    keys = {r.body["prompt_cache_key"] for r in upstream.requests}
    assert len(keys) == 1  # one conversation id before and after
    kinds = [orjson.loads(r.headers["x-codex-turn-metadata"])["request_kind"] for r in upstream.requests]
    assert kinds == ["turn", "compaction", "turn", "turn"]
    # The window id counts compactions: a proxy keying its cache on it starts afresh there.
    windows = [r.headers["x-codex-window-id"].rsplit(":", 1)[1] for r in upstream.requests]
    assert windows == ["0", "0", "1", "1"]
