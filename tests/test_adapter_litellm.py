"""The LiteLLM adapter: the proxy's pre-call hook and the SDK's managed ``acompletion``.

The ten-turn agent here is a client loop, as an agent behind a LiteLLM proxy
is: each request goes through ``async_pre_call_hook`` (what the proxy does
before routing) and then to ``litellm.acompletion``, answered by LiteLLM's own
mock (``mock_response`` / ``mock_tool_calls``) with the shared script's step.
"""

from __future__ import annotations

import asyncio
import copy
import json
import runpy
from pathlib import Path
from typing import Any

import litellm
import pytest
from litellm.exceptions import ContextWindowExceededError

from adapter_agent import (
    FINAL,
    KEY_LINE,
    SEARCHES,
    TOOL,
    import_error_without,
    llama_url,
    marker_keys,
    next_step,
    run_example,
    search_output,
)
from toolbudget import MARKER_RE, RECALL_TOOL, CallReport, Policy, Report, Session, Sessions, validate
from toolbudget.adapters.litellm import ToolbudgetLogger, acompletion, completion

__all__ = ["llama_url"]  # the fixture, used by name

# LiteLLM's own modules make pydantic warn about a TypedDict of theirs when they load; nothing of ours.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* using the `ReadOnly` qualifier:UserWarning")

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": TOOL,
        "description": "Search the logs.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def session(name: str, policy: Policy | None = None) -> Session:
    return Session(name, store="memory:", policy=policy or Policy())


def tool_texts(messages: list[dict[str, Any]], name: str | None = None) -> list[str]:
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    return [
        str(m["content"])
        for m in messages
        if m.get("role") == "tool" and (name is None or names.get(m["tool_call_id"]) == name)
    ]


async def agent_loop(hook: ToolbudgetLogger, chosen: Session) -> tuple[list[list[dict[str, Any]]], str]:
    """Ten turns through the hook and LiteLLM's mock; every managed request is kept."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Why do the parser tests fail?"}]
    seen: list[list[dict[str, Any]]] = []
    for turn in range(SEARCHES + 2):
        data: dict[str, Any] = {"model": "openai/scripted", "messages": messages, "tools": [SEARCH_TOOL]}
        managed = await hook.async_pre_call_hook(None, None, data, "acompletion") or data
        seen.append(managed["messages"])
        step = next_step(turn, tool_texts(managed["messages"]))
        if step.tool is None:
            response = await litellm.acompletion(**managed, mock_response=step.text)
            return seen, str(response.choices[0].message.content)
        function = {"name": step.tool, "arguments": json.dumps(step.args)}
        call: dict[str, Any] = {"id": f"call_{turn}", "type": "function", "function": function}
        response = await litellm.acompletion(**managed, mock_tool_calls=[call])
        (made,) = response.choices[0].message.tool_calls
        args = json.loads(made.function.arguments)
        output = (
            chosen.handle_recall(args) if made.function.name == RECALL_TOOL else search_output(args["query"])
        )
        messages = [
            *messages,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": made.id, "content": output},
        ]
    raise AssertionError("the script did not end")


def test_ten_turns_through_the_pre_call_hook_cut_and_recalled() -> None:
    reports: list[Report] = []
    with session("ll-agent") as chosen:
        hook = ToolbudgetLogger(chosen, recall=True, on_report=reports.append)
        seen, answer = asyncio.run(agent_loop(hook, chosen))
        assert answer == FINAL
        assert len(seen) == SEARCHES + 2 == len(reports)
        for shown in seen:
            assert validate({"messages": shown}, api="openai-chat") == []
        searches = tool_texts(seen[-1], TOOL)
        assert len(searches) == SEARCHES
        assert all(MARKER_RE.search(text) and RECALL_TOOL in text for text in searches)
        assert all(len(text) < len(search_output("q0")) // 5 for text in searches)
        (recalled,) = tool_texts(seen[-1], RECALL_TOOL)
        assert KEY_LINE.search(recalled), recalled[:300]
        assert chosen.original(marker_keys(searches[:1])[0]) == search_output("q0")


def big_request() -> dict[str, Any]:
    return {
        "model": "openai/x",
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": TOOL, "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": search_output("q0")},
        ],
        "metadata": {"user_api_key": "hashed"},
        "proxy_server_request": {"headers": {"x-toolbudget-session": "from-header"}},
    }


def test_hook_keeps_litellm_fields_never_mutates_and_finds_the_session_from_headers() -> None:
    data = big_request()
    before = copy.deepcopy(data)
    with Sessions(store="memory:") as pool:
        hook = ToolbudgetLogger(pool)
        out = asyncio.run(hook.async_pre_call_hook(None, None, data, "acompletion"))
        assert out is not None and out is not data
        assert (
            out["metadata"] is data["metadata"]
            and out["proxy_server_request"] is data["proxy_server_request"]
        )
        assert out["messages"][:2] == data["messages"][:2]
        text = out["messages"][2]["content"]
        assert MARKER_RE.search(text) and RECALL_TOOL not in text  # no recall tool: the marker names no tool
        key = marker_keys([text])[0]
        assert pool.get("from-header").original(key) == search_output("q0")
        assert "tools" not in out  # nothing injected by default
        small = {"model": "openai/x", "messages": [{"role": "user", "content": "hi"}]}
        assert asyncio.run(hook.async_pre_call_hook(None, None, small, "acompletion")) is None
        assert asyncio.run(hook.async_pre_call_hook(None, None, data, "aembedding")) is None
    assert data == before


def test_messages_and_responses_routes_are_managed() -> None:
    anthropic = {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": TOOL, "input": {}}]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": search_output("q1")}],
            },
        ],
    }
    responses = {
        "model": "gpt-x",
        "input": [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": "f1", "name": TOOL, "arguments": "{}"},
            {"type": "function_call_output", "call_id": "f1", "output": search_output("q2")},
        ],
    }
    with session("ll-routes") as chosen:
        hook = ToolbudgetLogger(chosen)
        out = hook.manage(anthropic, "anthropic_messages")
        assert out is not None and validate(out, api="anthropic") == []
        assert MARKER_RE.search(json.dumps(out["messages"][2]))
        out = hook.manage(responses, "aresponses")
        assert out is not None and MARKER_RE.search(out["input"][2]["output"])
        assert hook.manage({"model": "m", "input": "a bare prompt"}, "aresponses") is None


@pytest.mark.slow
def test_real_server_hook_makes_a_refused_request_fit(llama_url: str) -> None:
    """Unmanaged, the real server refuses the history; through the hook it answers."""
    small = Policy(result_max_chars=1500, preview_head_chars=600, preview_tail_chars=200)
    data = {**big_request(), "model": "openai/smollm2", "max_tokens": 16}
    data["messages"] = [*data["messages"], {"role": "user", "content": "Answer in one short sentence."}]
    target = {"api_base": f"{llama_url}/v1", "api_key": "none", "num_retries": 0}
    plain = {k: v for k, v in data.items() if k not in ("metadata", "proxy_server_request")}
    with pytest.raises(ContextWindowExceededError):
        asyncio.run(litellm.acompletion(**plain, **target))
    with session("ll-real-hook", small) as chosen:
        managed = ToolbudgetLogger(chosen).manage(data, "acompletion")
    assert managed is not None
    sent = {k: v for k, v in managed.items() if k not in ("metadata", "proxy_server_request")}
    response = asyncio.run(litellm.acompletion(**sent, **target))
    assert response.choices[0].message.content or response.choices[0].message.tool_calls
    assert response.usage.prompt_tokens < 1024


@pytest.mark.slow
def test_real_server_sdk_acompletion_recovers_from_overflow(llama_url: str) -> None:
    """The cut history is still over the real window; acompletion climbs the ladder and gets an answer."""
    data = big_request()
    messages = [*data["messages"], {"role": "user", "content": "Answer in one short sentence."}]
    reports: list[CallReport] = []
    with session("ll-real-sdk") as chosen:
        response = asyncio.run(
            acompletion(
                chosen,
                on_report=reports.append,
                model="openai/smollm2",
                messages=messages,
                max_tokens=16,
                api_base=f"{llama_url}/v1",
                api_key="none",
                num_retries=0,
            )
        )
    assert response.choices[0].message.content or response.choices[0].message.tool_calls
    (report,) = reports
    assert report.managed.results_cut >= 1
    assert report.recovery.recovered and report.recovery.errors  # the real window refused, then it fit


def test_example_runs_ten_turns_with_markers_and_a_recall() -> None:
    out = run_example("litellm_agent.py")
    assert out.count("[toolbudget: omitted") == SEARCHES
    assert "toolbudget_recall:" in out and "q0 hit 0000" in out
    assert "model calls: 10" in out


def test_without_litellm_the_import_names_the_extra() -> None:
    out = import_error_without("litellm", "litellm")
    assert out == "toolbudget.adapters.litellm needs litellm: pip install 'toolbudget[litellm]'"


def test_the_proxy_config_callback_is_one_the_proxy_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM's proxy calls a logger's pre-call hook only when its own class defines it."""
    from litellm.integrations.custom_logger import CustomLogger

    monkeypatch.setenv("TOOLBUDGET_STORE", "memory:")
    module = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "litellm_callbacks.py"))
    handler = module["handler"]
    assert isinstance(handler, ToolbudgetLogger) and isinstance(handler, CustomLogger)
    assert "async_pre_call_hook" in vars(type(handler))
    assert type(handler).async_pre_call_hook is not CustomLogger.async_pre_call_hook
    config = (Path(__file__).resolve().parents[1] / "examples" / "litellm_proxy_config.yaml").read_text()
    assert "callbacks: litellm_callbacks.handler" in config
    out = asyncio.run(handler.async_pre_call_hook(None, None, big_request(), "acompletion"))
    assert out is not None and MARKER_RE.search(out["messages"][2]["content"])
    handler.source.close()


def test_sdk_takes_litellm_answers_appended_to_the_history() -> None:
    """LiteLLM's own loop appends ``response.choices[0].message`` (a ``Message``) to the history:
    ``completion`` and ``acompletion`` take it as ``litellm.completion`` does, and still cut."""
    call = {"id": "call_0", "type": "function", "function": {"name": TOOL, "arguments": '{"query": "q"}'}}
    messages: list[Any] = [{"role": "user", "content": "Why do the parser tests fail?"}]
    first = litellm.completion(model="openai/scripted", messages=messages, mock_tool_calls=[call])
    answer = first.choices[0].message
    assert not isinstance(answer, dict)
    messages += [answer, {"role": "tool", "tool_call_id": "call_0", "content": search_output("q")}]
    with session("ll-objects") as chosen:
        reports: list[CallReport] = []
        kwargs: dict[str, Any] = {
            "on_report": reports.append,
            "model": "openai/scripted",
            "messages": messages,
            "tools": [SEARCH_TOOL],
            "mock_response": "done",
        }
        for response in (completion(chosen, **kwargs), asyncio.run(acompletion(chosen, **kwargs))):
            assert response.choices[0].message.content == "done"
    assert len(reports) == 2
    for report in reports:
        assert report.managed.results_cut == 1
