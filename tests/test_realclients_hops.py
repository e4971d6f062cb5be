"""A hop between client and upstream: forwarded faithfully it passes, breaking the history it is caught.

This is what the proxy's acceptance tests will rest on: the relay here is the
smallest hop (:mod:`realclients.relay`), and the checks that catch it
dropping tool results are the upstream's, the same that run on every
real-client test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from realclients.clients import run_claude, run_codex
from realclients.install import Client
from realclients.relay import Relay, relay
from realclients.script import Steps, use
from realclients.upstream import Upstream

pytestmark = pytest.mark.slow
pytest_plugins = ["realclients.fixtures"]


def drop_anthropic_results(path: str, raw: bytes) -> bytes:
    """What a broken hop does: the newest tool results become a note."""
    if path != "/v1/messages":
        return raw
    body: Any = orjson.loads(raw)
    last = body["messages"][-1]
    if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
        last["content"] = [{"type": "text", "text": "(results dropped)"}]
    return orjson.dumps(body)


def drop_responses_outputs(path: str, raw: bytes) -> bytes:
    if path != "/v1/responses":
        return raw
    body: Any = orjson.loads(raw)
    body["input"] = [i for i in body["input"] if i.get("type") != "function_call_output"]
    return orjson.dumps(body)


def test_claude_code_through_a_relay(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    upstream.script = Steps(
        [
            use("Bash", command="seq 1 20000", description="count"),
            use("Bash", command="echo ok", description="ok"),
        ],
        final="All done.",
    )
    hop = Relay(upstream.url).start()
    try:
        run = run_claude(
            claude, hop.url, "Count.", cwd=workdir, home=client_home, settings={"bashOutputMaxChars": 128000}
        )
    finally:
        hop.stop()
    assert run.returncode == 0, run.describe()
    assert orjson.loads(run.stdout)["result"] == "All done."
    assert hop.forwarded == len(upstream.requests) == 3
    assert all(r.violations == () and r.toolbudget_violations == () for r in upstream.requests)
    assert upstream.requests[-1].size > 100_000


def test_codex_through_a_relay(codex: Client, upstream: Upstream, workdir: Path, client_home: Path) -> None:
    upstream.script = Steps([use("exec_command", cmd="seq 1 20000")], final="All done.")
    with relay(upstream.url) as url:
        run = run_codex(
            codex, url, "Count.", cwd=workdir, home=client_home, config={"tool_output_token_limit": 200_000}
        )
    assert run.returncode == 0, run.describe()
    assert [r.answer for r in upstream.requests] == ["turn", "turn"]
    assert all(r.violations == () and r.toolbudget_violations == () for r in upstream.requests)


def test_a_hop_dropping_claude_code_results_is_caught(
    claude: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    upstream.script = Steps([use("Bash", command="echo hi", description="greet")], final="All done.")
    with relay(upstream.url, drop_anthropic_results) as url:
        run = run_claude(claude, url, "Greet.", cwd=workdir, home=client_home)
    assert run.returncode == 1, run.describe()
    result = orjson.loads(run.stdout)
    assert result["is_error"] is True
    refused = [r for r in upstream.requests if r.answer == "pairing"]
    assert refused, [r.answer for r in upstream.requests]
    assert (
        refused[0]
        .violations[0]
        .startswith("messages.1: `tool_use` ids were found without `tool_result` blocks")
    )
    # This version words a pairing 400 its own way. It sends the same request twice more, the
    # last time without `thinking.display`, then gives up.
    assert result["result"] == "API Error: 400 due to tool use concurrency issues."
    assert [r.answer for r in upstream.requests] == ["turn", "pairing", "pairing", "pairing"]
    assert refused[0].body == refused[1].body
    assert "display" in refused[1].body["thinking"] and "display" not in refused[2].body["thinking"]


def test_a_hop_dropping_codex_outputs_is_caught(
    codex: Client, upstream: Upstream, workdir: Path, client_home: Path
) -> None:
    upstream.script = Steps([use("exec_command", cmd="echo hi")], final="All done.")
    with relay(upstream.url, drop_responses_outputs) as url:
        run = run_codex(codex, url, "Greet.", cwd=workdir, home=client_home)
    assert run.returncode == 1, run.describe()
    refused = [r for r in upstream.requests if r.answer == "pairing"]
    assert len(refused) == 1
    assert refused[0].violations[0].startswith("No tool output found for function call call_")
    assert refused[0].violations[0] in run.stdout
