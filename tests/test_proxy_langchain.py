"""A real agent framework's chat client pointed at the proxy: LangChain's ``ChatOpenAI`` with
``base_url`` at it, its own tool binding and messages, streaming and not.

The scripted upstream plays the model over OpenAI Chat Completions: it asks for a build whose log is
large, sees the proxy's marker in the tool message that comes back, asks to read lines from the middle
of the cut log by the path the marker names, and stops once it has them. The test plays the loop
around ``ChatOpenAI`` (as any LangChain agent does), so every request is one LangChain built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from proxy_upstream import Received, ScriptedUpstream, upstream
from toolbudget import MARKER_RE
from toolbudget.pairing import check_request
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import RunningProxy, running
from toolbudget.wire import parse

langchain_openai = pytest.importorskip("langchain_openai")
messages_mod = pytest.importorskip("langchain_core.messages")

BUILD_LOG = "".join(f"{i:05d} compiling module_{i}.c with -O2 and a few flags\n" for i in range(1, 12_001))
MIDDLE = 6_000


def bash(command: str) -> str:
    """Run a shell command."""
    return BUILD_LOG


def read(file_path: str, offset: int, limit: int) -> str:
    """Read ``limit`` lines of a file from line ``offset``."""
    lines = Path(file_path).read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(lines[offset - 1 : offset - 1 + limit])


TOOLS: dict[str, Callable[..., str]] = {"bash": bash, "read": read}


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


def _decide(body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    """The model: build, then read the middle of the cut log by its marker's path, then stop."""
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    if not tools:
        return None, [_call("call_1", "bash", {"command": "make"})]
    if len(tools) == 1:
        marker = MARKER_RE.search(tools[0]["content"])
        assert marker is not None and marker["path"], tools[0]["content"][-300:]
        return None, [_call("call_2", "read", {"file_path": marker["path"], "offset": MIDDLE, "limit": 3})]
    return "built: " + tools[1]["content"].split("\n", 1)[0], []


def chat_model(got: Received) -> Any:
    body = got.json()
    text, calls = _decide(body)
    finish = "tool_calls" if calls else "stop"
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    usage = {
        "prompt_tokens": len(got.body) // 4,
        "completion_tokens": 3,
        "total_tokens": len(got.body) // 4 + 3,
    }
    if body.get("stream") is not True:
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return 200, orjson.dumps(answer)

    async def stream(request: web.Request, _got: Received) -> web.StreamResponse:
        head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
        delta: dict[str, Any] = {"role": "assistant", "content": text or ""}
        if calls:
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
        chunks = [
            {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": usage},
        ]
        answer = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        for chunk in chunks:
            await answer.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        await answer.write(b"data: [DONE]\n\n")
        await answer.write_eof()
        return answer

    return stream


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ScriptedUpstream, RunningProxy]]:
    with upstream(ScriptedUpstream(model=chat_model)) as (up, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            yield up, proxy


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "stream"])
def test_langchain_chat_openai_through_the_proxy_reads_a_cut_back_by_its_path(
    served: tuple[ScriptedUpstream, RunningProxy], streaming: bool
) -> None:
    up, proxy = served
    llm = langchain_openai.ChatOpenAI(
        model="gpt-4o",
        base_url=proxy.url + "/v1",
        api_key="sk-test",
        max_retries=0,
        streaming=streaming,
        stream_usage=True,
    ).bind_tools(list(TOOLS.values()))
    history: list[Any] = [messages_mod.HumanMessage("Build it and tell me about module 6000.")]
    for _ in range(4):
        reply = llm.invoke(history)
        history.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            output = TOOLS[call["name"]](**call["args"])
            history.append(messages_mod.ToolMessage(output, tool_call_id=call["id"]))
    assert history[-1].content == f"built: {MIDDLE:05d} compiling module_{MIDDLE}.c with -O2 and a few flags"

    chats = [r for r in up.received if r.path_qs == "/v1/chat/completions"]
    assert len(chats) == 3
    for got in chats:
        body = got.json()
        assert (body.get("stream") is True) is streaming
        assert check_request(parse(body, "openai-chat")) == []
    # The build log LangChain sent whole reached the upstream cut, with a path the read tool opened.
    cut = chats[1].json()["messages"][2]["content"]
    assert MARKER_RE.search(cut) is not None and len(cut) < len(BUILD_LOG) / 4
    assert f"{MIDDLE:05d} compiling" not in cut
