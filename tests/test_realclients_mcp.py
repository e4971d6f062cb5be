"""The real Claude Code runs ``toolbudget mcp`` and calls its recall tool for the model.

Claude Code starts the server from an MCP config (``claude -p --mcp-config``),
lists its tools, and when the scripted upstream answers with a call of
``mcp__toolbudget__recall`` on a key it saw in a marker, runs the call
through the server: the original comes back to the upstream in the next
request. The archive is one a real session cut into a real store.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from realclients.clients import run_claude
from realclients.install import Client
from realclients.script import Reply, Steps, Turn, say, use
from realclients.upstream import Upstream
from toolbudget import Session
from toolbudget.marker import find_markers

pytestmark = pytest.mark.slow
pytest_plugins = ["realclients.fixtures"]
pytest.importorskip("mcp")

RECALL = "mcp__toolbudget__recall"


def build_log(n: int) -> str:
    return "".join(f"[{i:05d}] linking target_{i} ... ok\n" for i in range(n))


def recall_the_marker(turn: Turn) -> Reply:
    """Call the MCP recall tool on the key of the first marker in what the model was sent."""
    text = orjson.dumps(turn.body["messages"]).decode()
    keys = [m.key for m in find_markers(text.replace("\\n", "\n")) if m.key]
    if not keys:
        return say("No marker.")
    return use(turn.tool(RECALL), key=keys[0], lines="2:4")


def test_claude_code_recalls_a_cut_through_toolbudget_mcp(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path, tmp_path: Path
) -> None:
    store = f"sqlite:{tmp_path / 'archive.db'}"
    log = build_log(5000)
    with Session("earlier", store=store) as session:
        shown = session.cut_result("Bash", log, call_id="c0", recall_tool=RECALL)
    config = {
        "mcpServers": {
            "toolbudget": {"command": sys.executable, "args": ["-m", "toolbudget", "mcp", "--store", store]}
        }
    }
    config_file = tmp_path / "mcp.json"
    config_file.write_bytes(orjson.dumps(config))
    upstream.script = Steps([recall_the_marker], final="Recalled.")

    run = run_claude(
        claude,
        upstream.url,
        f"An earlier build printed this:\n{shown}\nWhat do lines 2 to 4 say?",
        cwd=workdir,
        home=client_home,
        tools="Bash",
        extra=["--mcp-config", str(config_file), "--strict-mcp-config", "--allowedTools", f"Bash,{RECALL}"],
        timeout=120,
    )
    assert run.returncode == 0, run.describe()
    turns = upstream.turns()
    assert RECALL in [t["name"] for t in turns[0].body["tools"]]  # Claude Code offered the server's tool
    assert len(turns) == 2
    answer = orjson.dumps(
        [b for b in turns[1].body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    ).decode()
    assert "[00001] linking target_1 ... ok" in answer and "[00003] linking target_3" in answer
    assert "[00004]" not in answer  # the page asked for, from the original
    for recorded in upstream.conversation_requests():
        assert recorded.violations == ()


def test_through_the_proxy_the_model_recalls_a_cut_it_saw(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path, tmp_path: Path
) -> None:
    """Claude Code behind ``toolbudget proxy``; the proxy cuts a big Bash output with a marker naming
    the MCP tool (the request offers it), and the model recalls a page of it through ``toolbudget mcp``."""
    from toolbudget.proxy.config import ProxyConfig, upstreams_of
    from toolbudget.proxy.server import running

    store = f"dir:{tmp_path / 'archive'}"
    config = {
        "mcpServers": {
            "toolbudget": {"command": sys.executable, "args": ["-m", "toolbudget", "mcp", "--store", store]}
        }
    }
    config_file = tmp_path / "mcp.json"
    config_file.write_bytes(orjson.dumps(config))
    upstream.script = Steps(
        [use("Bash", command="seq 1 22000", description="count"), recall_the_marker], final="Recalled."
    )
    with running(ProxyConfig(upstreams=upstreams_of(upstream.url), store=store)) as proxy:
        run = run_claude(
            claude,
            proxy.url,
            "Count.",
            cwd=workdir,
            home=client_home,
            tools="Bash",
            settings={"bashOutputMaxChars": 128000},
            extra=[
                "--mcp-config",
                str(config_file),
                "--strict-mcp-config",
                "--allowedTools",
                f"Bash,{RECALL}",
            ],
            timeout=120,
        )
    assert run.returncode == 0, run.describe()
    turns = upstream.turns()
    assert len(turns) == 3
    seen = orjson.dumps(turns[1].body["messages"][-1]).decode().replace("\\n", "\n")
    markers = [m for m in find_markers(seen) if m.key]
    assert markers and markers[0].tool == RECALL  # the cut names the MCP tool the request offers
    (block,) = [b for b in turns[2].body["messages"][-1]["content"] if b.get("type") == "tool_result"]
    content = block["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    if text.startswith('{"result"'):  # how this Claude Code hands an MCP tool's structured result back
        text = orjson.loads(text.split("\n<system-reminder>", 1)[0])["result"]
    assert "lines 2-4 of 220" in text  # the result as Claude Code sent it: the count and its reminder
    assert text.split("\n")[1:4] == ["2", "3", "4"]  # lines 2-4 of the original, from the store
    for recorded in upstream.conversation_requests():
        assert recorded.violations == ()
