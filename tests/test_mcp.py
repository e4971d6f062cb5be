"""``toolbudget mcp``: the recall tool over MCP, tried with the real ``mcp`` client SDK.

In process, over stdio (the command a coding agent registers) and over
streamable HTTP, against archives a real session wrote to a real store.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from toolbudget import MARKER_RE, Session
from toolbudget.store import open_store

mcp = pytest.importorskip("mcp")
from mcp import Client, StdioServerParameters  # noqa: E402

from toolbudget.mcpserver import RecallServer, build_server  # noqa: E402

TENANT_A, TENANT_B = "0123456789abcdef", "fedcba9876543210"


def build_log(n: int) -> str:
    return "".join(f"[{i:05d}] compiling module_{i}.c ... ok\n" for i in range(n))


def cut(session: Session, text: str) -> str:
    """The key of the marker ``session`` puts on ``text``, cut at its source."""
    import re

    shown = session.cut_result("Bash", text, call_id="c1")
    found = re.search(MARKER_RE, shown)
    assert found is not None and found.group("key")
    return found.group("key")


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content)


def call(server: Any, tool: str, arguments: dict[str, Any]) -> str:
    async def go() -> str:
        async with Client(server) as client:
            return text_of(await client.call_tool(tool, arguments))

    return asyncio.run(go())


def test_the_tools_are_two_and_never_change_with_the_archive(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'a.db'}"

    async def tools() -> list[Any]:
        with open_store(url) as store:
            async with Client(build_server(RecallServer(store))) as client:
                return list((await client.list_tools()).tools)

    before = asyncio.run(tools())
    with Session("grow", store=url) as session:
        for n in (3000, 5000, 7000):
            cut(session, build_log(n))
    after = asyncio.run(tools())
    assert [t.name for t in before] == ["recall", "stats"]
    assert [t.model_dump() for t in after] == [t.model_dump() for t in before]
    recall = before[0]
    assert recall.input_schema["required"] == ["key"]
    assert set(recall.input_schema["properties"]) == {"key", "lines", "grep", "chars"}
    assert "1-based" in recall.input_schema["properties"]["lines"]["description"]
    assert recall.annotations.read_only_hint and recall.annotations.idempotent_hint


@pytest.mark.parametrize("backend", ["dir", "sqlite"])
def test_recall_answers_a_key_without_its_session_as_the_session_would(tmp_path: Path, backend: str) -> None:
    url = f"{backend}:{tmp_path / 'store'}"
    log = build_log(4000)
    with Session("agent-1", store=url) as session:
        key = cut(session, log)
        expected = session.handle_recall({"key": key, "lines": "100:140"})
        whole = session.handle_recall({"key": key, "grep": "module_3999"})
    with open_store(url) as store:
        server = build_server(RecallServer(store))
        assert call(server, "recall", {"key": key, "lines": "100:140"}) == expected
        assert call(server, "recall", {"key": f"<<tb:{key}>>", "grep": "module_3999"}) == whole
        assert "not found" in call(server, "recall", {"key": "0" * 32})
        assert "lines" in call(
            server, "recall", {"key": key, "lines": "zero:ten"}
        )  # the model's input, answered
        stats = call(server, "stats", {"session": "agent-1"})
    assert '"entries":1' in stats and f'"chars":{len(log)}' in stats


def test_a_tenant_or_a_session_reaches_only_its_own_entries(tmp_path: Path) -> None:
    url = f"dir:{tmp_path / 'store'}"
    with Session(f"{TENANT_A}-chat", store=url) as a, Session(f"{TENANT_B}-chat", store=url) as b:
        key_a, key_b = cut(a, build_log(3000)), cut(b, build_log(3500))
    with open_store(url) as store:
        only_a = build_server(RecallServer(store, tenant=TENANT_A))
        assert "[00001]" in call(only_a, "recall", {"key": key_a})
        assert "not found" in call(only_a, "recall", {"key": key_b})
        one = build_server(RecallServer(store, tenant=TENANT_B, session="chat"))
        assert "[00001]" in call(one, "recall", {"key": key_b})
        assert "not found" in call(one, "recall", {"key": key_a})
        assert "only for session" in call(one, "stats", {"session": "other"})


def toolbudget_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolbudget", *args]


def test_over_stdio_as_a_coding_agent_starts_it(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'a.db'}"
    with Session("stdio", store=url) as session:
        key = cut(session, build_log(3000))
        expected = session.handle_recall({"key": key})

    async def go() -> str:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolbudget", "mcp", "--store", url], env=dict(os.environ)
        )
        async with Client(params) as client:
            return text_of(await client.call_tool("recall", {"key": key}))

    assert asyncio.run(go()) == expected


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_over_streamable_http(tmp_path: Path) -> None:
    url = f"dir:{tmp_path / 'store'}"
    with Session("http", store=url) as session:
        key = cut(session, build_log(3000))
        expected = session.handle_recall({"key": key, "lines": "5:9"})
    port = free_port()
    command = toolbudget_command("mcp", "--store", url, "--transport", "streamable-http", "--port", str(port))
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        async def go() -> str:
            deadline = time.monotonic() + 30
            while True:
                try:
                    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                        return text_of(await client.call_tool("recall", {"key": key, "lines": "5:9"}))
                except Exception:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await asyncio.sleep(0.3)

        assert asyncio.run(go()) == expected
    finally:
        server.terminate()
        server.wait(timeout=10)
        assert server.stderr is not None
        server.stderr.close()


def test_bad_options_get_one_line_and_exit_2(tmp_path: Path) -> None:
    command = toolbudget_command("mcp", "--tenant", "Not-Hex")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--tenant" in done.stderr
