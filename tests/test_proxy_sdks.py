"""The real ``anthropic`` and ``openai`` SDKs, streaming and not, pointed at the proxy.

A scripted upstream plays the model: it asks for tool calls, sees the proxy's
markers in what comes back, and asks to read a cut result by the path the
marker names, as Claude Code's ``Read`` would. The test plays the agent's
loop around the SDK, so every request is one the SDK really built.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from proxy_upstream import Received, ScriptedUpstream, anthropic_reply, upstream
from toolbudget import MARKER_RE
from toolbudget.pairing import check_request
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import RunningProxy, running
from toolbudget.wire import parse

BUILD_LOG = "".join(f"{i:05d} compiling module_{i}.c with -O2 and a few flags\n" for i in range(1, 12_001))
TOOLS = [
    {"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object"}},
    {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}},
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ScriptedUpstream, RunningProxy]]:
    with upstream() as (up, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            yield up, proxy


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The agent's tools: ``Bash`` prints a long build log, ``Read`` reads lines of a file."""
    if name == "Bash":
        return BUILD_LOG
    lines = Path(arguments["file_path"]).read_text(encoding="utf-8").splitlines(keepends=True)
    start = int(arguments.get("offset", 1))
    return "".join(lines[start - 1 : start - 1 + int(arguments.get("limit", 2000))])


def claude_like_model(got: Received) -> Any:
    """The model's side: run Bash, then read lines 101-120 of the cut log by its path, then stop."""
    last = got.json()["messages"][-1]
    results = (
        [b for b in last["content"] if b.get("type") == "tool_result"]
        if isinstance(last["content"], list)
        else []
    )
    if not results:
        return anthropic_reply(
            [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}], "tool_use"
        )
    if results[0]["tool_use_id"] == "toolu_1":
        content = results[0]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        marker = MARKER_RE.search(text)
        assert marker is not None and marker["path"], text[-300:]
        read = {"file_path": marker["path"], "offset": 101, "limit": 20}
        return anthropic_reply(
            [{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": read}], "tool_use"
        )
    return anthropic_reply([{"type": "text", "text": "built"}])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_anthropic_sdks_tool_loop_reads_a_cut_result_back_through_its_path(
    served: tuple[ScriptedUpstream, RunningProxy], stream: bool
) -> None:
    up, proxy = served
    up.model = claude_like_model
    client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "build the project"}]
    for _turn in range(5):
        kwargs: dict[str, Any] = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "tools": TOOLS,
            "messages": messages,
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**kwargs)
        sent = up.received[-1].json()
        assert check_request(parse(sent, "anthropic")) == []  # pairing valid on every request
        assert sent["tools"] == TOOLS
        if reply.stop_reason != "tool_use":
            break
        calls = [block for block in reply.content if block.type == "tool_use"]
        messages.append({"role": "assistant", "content": [block.model_dump() for block in reply.content]})
        results = [
            {"type": "tool_result", "tool_use_id": call.id, "content": run_tool(call.name, dict(call.input))}
            for call in calls
        ]
        messages.append({"role": "user", "content": results})
    assert reply.stop_reason == "end_turn" and reply.content[0].type == "text"
    assert len(up.received) == 3
    bash_result = up.received[1].json()["messages"][2]["content"][0]["content"]
    assert len(str(bash_result)) < len(BUILD_LOG) / 4  # the log went up cut
    last = up.received[-1].json()["messages"][-1]["content"][0]["content"]
    assert last == "".join(BUILD_LOG.splitlines(keepends=True)[100:120])  # the original lines, byte-exact


def test_the_openai_chat_sdk_streaming_and_not_gets_the_managed_call(
    served: tuple[ScriptedUpstream, RunningProxy],
) -> None:
    up, proxy = served
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    messages: list[Any] = [
        {"role": "user", "content": "build it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd":"make"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": BUILD_LOG},
    ]
    whole = client.chat.completions.create(model="gpt-4o", messages=messages)
    assert whole.choices[0].message.content == "seen 3 messages"
    assert MARKER_RE.search(up.received[-1].json()["messages"][2]["content"]) is not None
    stream = client.chat.completions.create(
        model="gpt-4o", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "seen 3 messages"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens_details is not None
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 7
    assert len(up.received[-1].body) < len(BUILD_LOG) / 4


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_openai_responses_sdk_gets_the_managed_call(
    served: tuple[ScriptedUpstream, RunningProxy], stream: bool
) -> None:
    up, proxy = served
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    items: list[Any] = [
        {"role": "user", "content": "build it"},
        {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": '{"cmd":"make"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": BUILD_LOG},
    ]
    final: Any
    if stream:
        with client.responses.stream(model="gpt-5", input=items) as events:
            final = events.get_final_response()
    else:
        final = client.responses.create(model="gpt-5", input=items)
    assert final.output_text == "seen 3 messages"
    assert final.usage is not None and final.usage.input_tokens_details.cached_tokens == 7
    output = up.received[-1].json()["input"][2]["output"]
    assert MARKER_RE.search(output if isinstance(output, str) else str(output)) is not None


def test_an_overflow_under_the_anthropic_sdk_stream_is_recovered_before_its_first_byte(
    tmp_path: Path,
) -> None:
    history: list[Any] = []
    for index in range(8):
        history += [
            {"role": "user", "content": f"step {index}: " + "context " * 1500},
            {"role": "assistant", "content": "done"},
        ]
    history.append({"role": "user", "content": "and now?"})
    with upstream(ScriptedUpstream(limit_chars=40_000)) as (up, url):
        config = ProxyConfig(upstreams=upstreams_of(url), store=f"dir:{tmp_path}", policy=Policy())
        with running(config) as proxy:
            client = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
            with client.messages.stream(
                model="claude-sonnet-4-5", max_tokens=100, messages=history
            ) as events:
                reply = events.get_final_message()
    assert reply.stop_reason == "end_turn"
    assert len(up.received) >= 2 and len(up.received[-1].body) <= 40_000
