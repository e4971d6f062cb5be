"""The scripted upstream itself: its streams parse with the official SDKs, and its checks bite.

The real-client tests trust the upstream to refuse what the provider would
refuse; these tests prove each refusal, wording included, on bodies broken on
purpose, and run in well under a second without any client installed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from realclients import install, responses
from realclients.hops import HOPS, Hop, direct, whole_or_cut
from realclients.script import Steps, Turn, say, use
from realclients.upstream import CREDENTIAL_HEADERS, Upstream
from toolbudget.marker import marker_line

pytest_plugins = ["realclients.fixtures"]

BASH = {
    "name": "Bash",
    "description": "Run a command",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
SHELL = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


def messages_body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": [BASH], "messages": messages, **extra}


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "a.txt"}


def assert_redacted(headers: Mapping[str, str]) -> None:
    """The request carried a credential, and the record keeps none."""
    present = CREDENTIAL_HEADERS & set(headers)
    assert present
    assert {headers[name] for name in present} == {"<redacted>"}
    assert not any("secret-key" in value for value in headers.values())


def post(upstream: Upstream, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(upstream.url + path, json=body, headers={"x-api-key": "secret-key"}, timeout=10)


def test_the_anthropic_sdk_reads_its_stream_and_its_answer(upstream: Upstream) -> None:
    upstream.script = Steps([use("Bash", command="ls -la")], final="Done.")
    client = anthropic.Anthropic(base_url=upstream.url, api_key="secret-key", max_retries=0)
    common: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2048,
        "tools": [BASH],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    with client.messages.stream(messages=[{"role": "user", "content": "list"}], **common) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == ["thinking", "tool_use"]
    assert streamed.stop_reason == "tool_use"
    call = streamed.content[1]
    assert call.type == "tool_use" and call.input == {"command": "ls -la"}
    thinking = streamed.content[0]
    assert thinking.type == "thinking" and thinking.signature.startswith("sig")
    # The signed thinking block goes back unchanged: the request is valid and the script ends.
    history: list[Any] = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [b.model_dump() for b in streamed.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "a.txt"}]},
    ]
    answer = client.messages.create(messages=history, **common)
    assert answer.stop_reason == "end_turn"
    assert [b.type for b in answer.content] == ["thinking", "text"]
    assert [r.answer for r in upstream.requests] == ["turn", "turn"]
    assert all(r.violations == () and r.toolbudget_violations == () for r in upstream.requests)
    assert_redacted(upstream.requests[0].headers)


def test_the_openai_sdk_reads_its_stream_and_its_answer(upstream: Upstream) -> None:
    upstream.script = Steps([use("exec_command", cmd="ls")], final="Done.")
    client = openai.OpenAI(base_url=upstream.url + "/v1", api_key="secret-key", max_retries=0)
    tools: list[Any] = [SHELL]
    with client.responses.stream(model="gpt-5", input="list", tools=tools) as stream:
        streamed = stream.get_final_response()
    call = streamed.output[0]
    assert call.type == "function_call" and call.arguments == '{"cmd":"ls"}'
    answer = client.responses.create(
        model="gpt-5",
        input=[
            {"role": "user", "content": "list"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "a.txt"},
        ],
        tools=tools,
    )
    assert answer.output_text == "Done."
    assert answer.usage is not None and answer.usage.input_tokens > 0
    assert_redacted(upstream.requests[0].headers)


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [tool_use("toolu_1")]},
                {"role": "user", "content": "and?"},
            ],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. "
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        ),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [tool_use("toolu_1")]},
                {"role": "user", "content": [tool_result("toolu_1"), tool_result("toolu_9")]},
            ],
            "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. "
            "Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
        ),
        (
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [tool_use("toolu_1")]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, tool_result("toolu_1")]},
            ],
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. "
            "Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
        ),
    ],
    ids=["missing", "orphan", "not-first"],
)
def test_broken_anthropic_pairing_is_refused_in_the_api_words(
    upstream: Upstream, messages: list[dict[str, Any]], expected: str
) -> None:
    response = post(upstream, "/v1/messages", messages_body(messages))
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": expected},
    }
    recorded = upstream.requests[-1]
    assert recorded.answer == "pairing" and recorded.violations[0] == expected
    assert recorded.toolbudget_violations  # toolbudget sees the same request as broken


def test_a_thinking_block_must_come_back_unchanged(upstream: Upstream) -> None:
    thinking = {"type": "enabled", "budget_tokens": 1024}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "x", "signature": "forged"}, tool_use("toolu_1")],
        },
        {"role": "user", "content": [tool_result("toolu_1")]},
    ]
    response = post(upstream, "/v1/messages", messages_body(history, thinking=thinking))
    assert response.status_code == 400
    assert (
        response.json()["error"]["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"
    )
    history[1]["content"] = [tool_use("toolu_1")]
    response = post(upstream, "/v1/messages", messages_body(history, thinking=thinking))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`."
    )


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (
            [
                {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
                {"role": "user", "content": "and?"},
            ],
            "No tool output found for function call call_1.",
        ),
        (
            [{"type": "function_call_output", "call_id": "call_9", "output": "x"}],
            "No tool call found for function call output with call_id call_9.",
        ),
    ],
    ids=["missing", "orphan"],
)
def test_broken_responses_pairing_is_refused_in_the_api_words(
    upstream: Upstream, items: list[dict[str, Any]], expected: str
) -> None:
    body = {"model": "gpt-5", "tools": [SHELL], "input": [{"role": "user", "content": "go"}, *items]}
    response = post(upstream, "/v1/responses", body)
    assert response.status_code == 400
    assert response.json() == {
        "error": {"message": expected, "type": "invalid_request_error", "param": "input", "code": None}
    }
    assert upstream.requests[-1].toolbudget_violations


def test_a_history_ending_on_unanswered_calls_is_refused(upstream: Upstream) -> None:
    """Stricter than toolbudget.validate, which takes trailing calls as pending: a hop that
    dropped the newest results must not pass."""
    call = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
    body = {"model": "gpt-5", "tools": [SHELL], "input": [{"role": "user", "content": "go"}, call]}
    response = post(upstream, "/v1/responses", body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "No tool output found for function call call_1."
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("toolu_1")]},
    ]
    response = post(upstream, "/v1/messages", messages_body(history))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("messages.1: `tool_use` ids were found without")


def test_overflow_answers_with_each_provider_error(upstream: Upstream) -> None:
    assert responses.OVERFLOW_MESSAGE == (
        "Your input exceeds the context window of this model. Please adjust your input and try again."
    )
    upstream.context_limit = 100
    big = [{"role": "user", "content": "x" * 2000}]
    response = post(upstream, "/v1/messages", messages_body(big))
    tokens = upstream.requests[-1].tokens
    assert tokens == upstream.requests[-1].size // 4 > 100
    assert response.status_code == 400
    assert response.json()["error"] == {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {tokens} tokens > 100 maximum",
    }
    response = post(upstream, "/v1/responses", {"model": "gpt-5", "input": "x" * 2000})
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": responses.OVERFLOW_MESSAGE,
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
    upstream.overflow_in_stream = True
    response = post(upstream, "/v1/responses", {"model": "gpt-5", "input": "x" * 2000, "stream": True})
    assert response.status_code == 200
    assert "event: response.failed" in response.text and '"code":"context_length_exceeded"' in response.text
    assert [r.answer for r in upstream.requests] == ["overflow"] * 3


def test_the_script_reads_the_last_results_and_side_requests_do_not_advance_it(upstream: Upstream) -> None:
    def echo(turn: Turn) -> Any:
        return say(f"{turn.number}: saw {turn.results[0].text}")

    upstream.script = Steps([use("Bash", command="ls"), echo])
    first = post(upstream, "/v1/messages", messages_body([{"role": "user", "content": "go"}])).json()
    call_id = first["content"][0]["id"]
    side = post(
        upstream,
        "/v1/messages",
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "title?"}]},
    )
    assert side.json()["content"] == [{"type": "text", "text": "ok"}]
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [tool_result(call_id)]},
    ]
    second = post(upstream, "/v1/messages", messages_body(history)).json()
    assert second["content"] == [{"type": "text", "text": "1: saw a.txt"}]
    assert [r.answer for r in upstream.requests] == ["turn", "side", "turn"]


def test_every_hop_reaches_the_upstream_and_the_direct_one_is_it(
    upstream: Upstream, hop: Hop, agent_base_url: str
) -> None:
    assert (agent_base_url == upstream.url) == (hop is HOPS["direct"])
    assert httpx.head(agent_base_url + "/", timeout=5).status_code == 200
    assert httpx.get(agent_base_url + "/v1/models", timeout=5).json()["data"]
    assert [r.answer for r in upstream.requests] == ["probe", "models"]


def test_a_missing_client_skips_on_a_laptop_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REALCLIENTS_DIR", str(tmp_path / "nothing"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("REALCLIENTS_REQUIRED", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"@anthropic-ai/claude-code@2\.1\.332 is not installed"):
        install.require_client("claude")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run the real clients"):
        install.require_client("codex")
    monkeypatch.delenv("CI")
    monkeypatch.setenv("REALCLIENTS_REQUIRED", "1")
    with pytest.raises(pytest.fail.Exception):
        install.require_client("claude")


def test_a_large_result_is_whole_through_a_faithful_hop_and_may_be_cut_through_another() -> None:
    faithful = Hop(direct, faithful=True)
    cutting = Hop(direct, faithful=False)
    whole = "x" * 1000
    cut = "x" * 100 + "\n" + marker_line(900, 1000, key="a" * 16, path="/tmp/a.txt") + "\n"
    assert whole_or_cut(faithful, whole, 1000) and whole_or_cut(cutting, whole, 1000)
    assert not whole_or_cut(faithful, cut, 1000)
    assert whole_or_cut(cutting, cut, 1000)
    assert not whole_or_cut(cutting, "x" * 100, 1000)  # shortened without saying so
