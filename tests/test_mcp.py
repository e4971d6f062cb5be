"""``toolbudget mcp``: the recall tool over MCP, tried with the real ``mcp`` client SDK.

In process, over stdio (the command a coding agent registers) and over
streamable HTTP, against archives a real session wrote to a real store.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from toolbudget import MARKER_RE, Policy, Session
from toolbudget.budget import record_key
from toolbudget.store import DirStore, SqliteStore, _recordlog, open_store

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


def search_output(n: int) -> str:
    return "".join(f"src/mod_{i}.py:{i}: match {i}\n" for i in range(n))


def two_tools(url: str, name: str, now: float | None = None) -> dict[str, Any]:
    """Cut, through ``manage``, two Bash outputs and one search_logs output of an Anthropic history.

    Anthropic's results carry no tool name: each is named by the call it answers. Returns
    what ``stats`` must say of the session.
    """
    bash = [build_log(3000), build_log(3500)]
    search = search_output(4000)
    outputs = [("Bash", bash[0]), ("search_logs", search), ("Bash", bash[1])]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "why does the build fail?"}]
    for n, (tool, text) in enumerate(outputs):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": {"q": str(n)}}
        messages.append({"role": "assistant", "content": [call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": text}
        messages.append({"role": "user", "content": [result]})
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    with Session(name, store=url) as session:
        managed = session.manage(body, "anthropic", now=now)
        assert {cut.tool for cut in managed.report.cuts} == {"Bash", "search_logs"}
        assert len(managed.report.cuts) == 3
    return {
        "session": name,
        "entries": 3,
        "chars": sum(map(len, bash)) + len(search),
        "tools": {
            "Bash": {"entries": 2, "chars": sum(map(len, bash))},
            "search_logs": {"entries": 1, "chars": len(search)},
        },
    }


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content)


def as_served(page: str) -> str:
    """A session's recall page as the MCP server gives it: the next page is asked of its ``recall``."""
    return page.replace("\n[more follows: call toolbudget_recall with", "\n[more follows: call recall with")


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


def test_answers_are_plain_text_never_structured_content(tmp_path: Path) -> None:
    """A client given structured content hands the model escaped JSON, longer than the page it caps."""
    url = f"dir:{tmp_path / 'store'}"
    with Session("plain", store=url) as session:
        key = cut(session, build_log(4000))
        page = session.handle_recall({"key": key, "lines": "1:50"})

    async def go() -> tuple[list[Any], Any, Any]:
        with open_store(url) as store:
            async with Client(build_server(RecallServer(store))) as client:
                listed = list((await client.list_tools()).tools)
                recalled = await client.call_tool("recall", {"key": key, "lines": "1:50"})
                told = await client.call_tool("stats", {"session": "plain"})
                return listed, recalled, told

    listed, recalled, told = asyncio.run(go())
    assert [t.output_schema for t in listed] == [None, None]
    assert recalled.structured_content is None and told.structured_content is None
    assert text_of(recalled) == page
    assert text_of(told).startswith('{"session":"plain"')


def test_answers_name_the_tool_this_server_serves(tmp_path: Path) -> None:
    """The next page and a refusal say to call ``recall``, the tool the model called, not the library's."""
    url = f"dir:{tmp_path / 'store'}"
    with Session("named", store=url) as session:
        key = cut(session, build_log(4000))
    with open_store(url) as store:
        server = build_server(RecallServer(store))
        page = call(server, "recall", {"key": key})
        missing = call(server, "recall", {"key": "0" * 32})
    assert re.search(f'\n\\[more follows: call recall with key "{key}", lines "\\d+:"\\]$', page), page[-200:]
    assert len(page) <= Policy().recall_max_chars
    assert missing.startswith("recall: not found")
    assert "toolbudget_recall" not in page + missing


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


def test_recall_takes_the_grammar_of_handle_recall_whatever_json_the_model_sends(tmp_path: Path) -> None:
    """A whole number or ``[A, B]`` for a range, and a key of the wrong type, are answered as
    ``Session.handle_recall`` answers them, not refused by the SDK's argument validation; the tool's
    schema still shows the library's strings."""
    url = f"dir:{tmp_path / 'store'}"
    with Session("agent-1", store=url) as session:
        key = cut(session, build_log(4000))
        asked: list[dict[str, Any]] = [
            {"key": key, "lines": 7},
            {"key": key, "lines": [100, 140]},
            {"key": key, "lines": [3990, None]},
            {"key": key, "chars": [0, 50]},
            {"key": key, "lines": [0, 5]},
            {"key": key, "lines": 1.5},
            {"key": 7},
            {"key": key, "grep": 12},
            {"key": key, "line": "1:5"},  # a name the tool does not take: said, never ignored
            {"key": key, "lines": "1:5", "page": 2},
        ]
        expected = [
            as_served(session.handle_recall(args)).replace("toolbudget_recall:", "recall:") for args in asked
        ]
    with open_store(url) as store:
        server = build_server(RecallServer(store))
        for args, answer in zip(asked, expected, strict=True):
            assert call(server, "recall", args) == answer, args

        async def schema() -> dict[str, Any]:
            async with Client(server) as client:
                (recall, _) = sorted((await client.list_tools()).tools, key=lambda t: t.name)
                return dict(recall.input_schema)

        properties = asyncio.run(schema())["properties"]
    assert properties["key"]["type"] == "string"
    for name in ("lines", "grep", "chars"):
        assert properties[name]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_stats_tells_each_tool_its_cuts_and_characters(tmp_path: Path) -> None:
    url = f"dir:{tmp_path / 'store'}"
    expected = two_tools(url, "tools")
    with open_store(url) as store:
        server = build_server(RecallServer(store))
        assert orjson.loads(call(server, "stats", {"session": "tools"})) == expected
    # Managed again (a resent history, another process): the same records, nothing counted twice.
    assert two_tools(url, "tools") == expected
    with open_store(url) as store:
        assert orjson.loads(RecallServer(store).stats("tools")) == expected


def test_the_records_of_a_timed_session_are_neither_entries_nor_recalled(tmp_path: Path) -> None:
    # A request told when it arrived keeps its arrival with the archive (the cache schedule's
    # record): the session's own record, like the others, never counted or answered as an original.
    url = f"dir:{tmp_path / 'store'}"
    expected = two_tools(url, "timed", now=1_000_000.0)
    with open_store(url) as store:
        own = [
            key
            for key in store.keys("timed")
            if (store.get("timed", key) or b"").startswith(b"\x00toolbudget: arrival")
        ]
        server = build_server(RecallServer(store))
        assert own  # the arrival is there
        assert orjson.loads(call(server, "stats", {"session": "timed"})) == expected
        assert "not found" in call(server, "recall", {"key": own[0]})


def test_folded_turns_are_counted_apart_from_any_tool(tmp_path: Path) -> None:
    url = f"dir:{tmp_path / 'store'}"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for n in range(40):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash", "input": {"command": f"c{n}"}}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"step {n}"}, call]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": build_log(300 + n)}
        messages.append({"role": "user", "content": [result]})
    body = {"model": "m", "max_tokens": 100, "messages": messages}
    with Session("folds", store=url, policy=Policy(context_window_tokens=8_000)) as session:
        managed = session.manage(body, "anthropic")
    fold = next(c for c in managed.report.cuts if c.reason == "compaction_fold")
    with open_store(url) as store:
        stats = orjson.loads(RecallServer(store).stats("folds"))
    assert stats["tools"]["(folded turns)"] == {"entries": 1, "chars": fold.before}
    assert set(stats["tools"]) == {"(folded turns)", "Bash"}
    assert stats["entries"] == 1 + stats["tools"]["Bash"]["entries"]


def test_a_cut_without_its_record_is_of_an_unknown_tool(tmp_path: Path) -> None:
    # As a cut archived before records were kept: its original, without the record beside it.
    url = f"dir:{tmp_path / 'store'}"
    log, other = build_log(3000), build_log(3300)
    with Session("old", store=url) as session:
        key = cut(session, log)
        named = session.cut_result(None, other)  # a shell that does not know the tool
        assert MARKER_RE.search(named)
        record = record_key(session.archive, key)
        store = session.store
        assert isinstance(store, DirStore)
        records = store.workspace("old") / "records"
    # Records are kept in the session's record log: write it again without this one.
    kept = _recordlog.RecordLog(str(records))
    everything = kept.read(kept.held())
    assert record in everything
    records.write_bytes(b"".join(_recordlog.frame(k, data) for k, data in everything.items() if k != record))
    with open_store(url) as store:
        stats = orjson.loads(RecallServer(store).stats("old"))
    assert stats["entries"] == 2 and stats["chars"] == len(log) + len(other)
    assert stats["tools"] == {"(unknown)": {"entries": 2, "chars": len(log) + len(other)}}


def test_any_tool_name_is_told_even_one_no_utf_8_can_hold(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'a.db'}"
    log = build_log(3000)
    names = ["ツール", "odd\ud800name"]
    with Session("names", store=url) as session:
        for name in names:
            session.cut_result(name, log + name)
    with open_store(url) as store:
        told = json.loads(call(build_server(RecallServer(store)), "stats", {"session": "names"}))
    assert sorted(told["tools"]) == sorted(names)
    assert [told["tools"][n]["chars"] for n in names] == [len(log + n) for n in names]


def test_a_record_is_never_recalled_as_an_original(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'a.db'}"
    with Session("rec", store=url) as session:
        key = cut(session, build_log(3000))
        record = record_key(session.archive, key)
        assert session.store.get("rec", record) is not None  # it is there, beside the original
        assert "not found" in session.handle_recall({"key": record})
        expected = session.handle_recall({"key": key})
    with open_store(url) as store:
        server = build_server(RecallServer(store))
        assert "not found" in call(server, "recall", {"key": record})
        assert call(server, "recall", {"key": key}) == as_served(expected)
        one = build_server(RecallServer(store, session="rec"))
        assert "not found" in call(one, "recall", {"key": record})


def test_records_expire_and_are_cleaned_with_their_originals(tmp_path: Path) -> None:
    class Clock:
        now = 1_000_000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    store = SqliteStore(tmp_path / "a.db", ttl=100, clock=clock)
    log = build_log(3000)
    with Session("ttl", store=store) as session:
        key = cut(session, log)
        clock.now += 90
        cut(session, log)  # the original named again: so is its record
        clock.now += 90  # past the first write's TTL, not the second's
        assert orjson.loads(RecallServer(store).stats("ttl"))["tools"] == {
            "Bash": {"entries": 1, "chars": len(log)}
        }
        assert record_key(session.archive, key) in store.keys("ttl")
        clock.now += 101  # nobody named them for a whole TTL: all of it is gone
        assert store.keys("ttl") == []
    with Session("cleaned", store=f"dir:{tmp_path / 'dir'}") as session:
        cut(session, log)
    command = toolbudget_command("clean", "--session", "cleaned", "--store", f"dir:{tmp_path / 'dir'}")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with open_store(f"dir:{tmp_path / 'dir'}") as opened:
        assert opened.keys("cleaned") == []
    store.close()


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
    stats = two_tools(url, "stdio-tools")

    async def go() -> tuple[str, str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolbudget", "mcp", "--store", url], env=dict(os.environ)
        )
        async with Client(params) as client:
            recalled = text_of(await client.call_tool("recall", {"key": key}))
            return recalled, text_of(await client.call_tool("stats", {"session": "stdio-tools"}))

    recalled, told = asyncio.run(go())
    assert recalled == as_served(expected)
    assert orjson.loads(told) == stats


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
    stats = two_tools(url, "http-tools")
    port = free_port()
    command = toolbudget_command("mcp", "--store", url, "--transport", "streamable-http", "--port", str(port))
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:

        async def go() -> tuple[str, str]:
            deadline = time.monotonic() + 30
            while True:
                try:
                    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                        recalled = text_of(await client.call_tool("recall", {"key": key, "lines": "5:9"}))
                        told = text_of(await client.call_tool("stats", {"session": "http-tools"}))
                        return recalled, told
                except Exception:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await asyncio.sleep(0.3)

        recalled, told = asyncio.run(go())
        assert recalled == expected
        assert orjson.loads(told) == stats
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


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = toolbudget_command(
            "mcp", "--store", f"dir:{tmp_path}", "--transport", "streamable-http", "--port", str(port)
        )
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"toolbudget: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
