"""The proxy in front of a real llama.cpp server: a history too long for its window is answered anyway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from llama_server import llama_server, require_llama_server
from toolbudget.policy import Policy
from toolbudget.proxy import ProxyConfig
from toolbudget.proxy.config import upstreams_of
from toolbudget.proxy.server import RunningProxy, running

pytestmark = pytest.mark.slow

N_CTX = 1024
LOG = "".join(f"{i:04d} warning: unused variable x{i} in file src/m{i % 7}.c\n" for i in range(1500))


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    require_llama_server()
    with llama_server(n_ctx=N_CTX) as url:
        yield url


@pytest.fixture
def proxy(llama_url: str, tmp_path: Path) -> Iterator[RunningProxy]:
    config = ProxyConfig(upstreams=upstreams_of(llama_url), store=f"dir:{tmp_path}", policy=Policy())
    with running(config) as served:
        yield served


def chat_history() -> list[Any]:
    return [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Build it and tell me if it worked."},
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
        {"role": "tool", "tool_call_id": "call_1", "content": LOG},
    ]


def test_a_history_over_the_real_window_is_refused_directly_and_answered_through_the_proxy(
    llama_url: str, proxy: RunningProxy
) -> None:
    tools: Any = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    direct = openai.OpenAI(base_url=llama_url + "/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="context"):
        direct.chat.completions.create(model="smollm2", messages=chat_history(), tools=tools, max_tokens=8)
    through = openai.OpenAI(base_url=proxy.url + "/v1", api_key="none", max_retries=0)
    answer = through.chat.completions.create(
        model="smollm2", messages=chat_history(), tools=tools, max_tokens=8
    )
    assert answer.choices[0].message is not None
    streamed: Any = through.chat.completions.create(
        model="smollm2", messages=chat_history(), tools=tools, max_tokens=8, stream=True
    )
    assert any(chunk.choices for chunk in streamed)


def test_the_anthropic_sdk_streams_through_the_proxy_to_the_real_server(proxy: RunningProxy) -> None:
    client = anthropic.Anthropic(base_url=proxy.url, api_key="none", max_retries=0)
    messages: list[Any] = [
        {"role": "user", "content": "Build it."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "make"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LOG}]},
    ]
    tools: Any = [{"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}]
    with client.messages.stream(model="smollm2", max_tokens=8, messages=messages, tools=tools) as events:
        reply = events.get_final_message()
    assert reply.role == "assistant" and reply.usage.input_tokens > 0
