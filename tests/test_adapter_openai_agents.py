"""The OpenAI Agents SDK adapter: a ten-turn agent on the SDK's own ``ScriptedModel``, and a real model.

``agents.testing.ScriptedModel`` records every call at the ``Model`` boundary
(what the model was given) and answers each from a responder, here the
shared script, which reads only that input.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

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
from toolbudget import MARKER_RE, RECALL_TOOL, CallReport, Policy, Session, UpstreamError, validate
from toolbudget.adapters.openai_agents import Toolbudget

__all__ = ["llama_url"]  # the fixture, used by name

OVERFLOW = json.dumps(
    {
        "error": {
            "code": 400,
            "message": "request (3031 tokens) exceeds the available context size (1024 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
        }
    }
).encode()
QUIET = RunConfig(tracing_disabled=True)


def session(name: str) -> Session:
    return Session(name, store="memory:", policy=Policy())


@function_tool(name_override=TOOL)
def search_logs(query: str) -> str:
    """Search the logs."""
    return search_output(query)


def outputs(items: Any, calls: dict[str, str] | None = None, name: str | None = None) -> list[str]:
    """The text of every tool output among ``items``; with ``name``, only that tool's."""
    names = {
        i["call_id"]: i["name"] for i in items if isinstance(i, dict) and i.get("type") == "function_call"
    }
    return [
        str(i["output"])
        for i in items
        if isinstance(i, dict)
        and i.get("type") == "function_call_output"
        and (name is None or names.get(i["call_id"]) == name)
    ]


def scripted() -> ScriptedModel:
    def respond(call: ModelCall) -> Any:
        turn = len(model.calls) - 1
        step = next_step(turn, outputs(call.input))
        if step.tool is None:
            return [assistant_message(step.text)]
        return [function_call(step.tool, step.args, call_id=f"call_{turn}")]

    model = ScriptedModel([ModelStep.respond(respond) for _ in range(SEARCHES + 2)])
    return model


def body_of(call: ModelCall) -> dict[str, Any]:
    return {"input": call.input, "instructions": call.system_instructions}


def test_ten_turns_cut_and_recalled_every_request_valid() -> None:
    model = scripted()
    reports: list[CallReport] = []
    with session("oa-agent") as chosen:
        budget = Toolbudget(chosen, on_report=reports.append)
        agent = Agent(
            name="searcher",
            instructions="You search logs.",
            model=budget.model(model),
            tools=budget.tools([search_logs]),
        )
        result = asyncio.run(
            Runner.run(
                agent, "Why do the parser tests fail?", run_config=budget.run_config(tracing_disabled=True)
            )
        )
        assert result.final_output == FINAL
        model.assert_complete()
        assert len(model.calls) == SEARCHES + 2 == len(reports)
        assert {t.name for t in model.calls[0].tools} == {TOOL, RECALL_TOOL}
        for call in model.calls:
            assert validate(body_of(call), api="openai-responses") == []
        last = model.calls[-1].input
        searches = outputs(last, name=TOOL)
        assert len(searches) == SEARCHES
        assert all(MARKER_RE.search(text) for text in searches)
        assert all(len(text) < len(search_output("q0")) // 5 for text in searches)
        (recalled,) = outputs(last, name=RECALL_TOOL)
        assert KEY_LINE.search(recalled), recalled[:300]
        assert chosen.original(marker_keys(searches[:1])[0]) == search_output("q0")
        # cut at the source: the run's own items hold the previews
        assert all(MARKER_RE.search(text) for text in outputs(result.to_input_list(), name=TOOL))


def history() -> list[Any]:
    items: list[Any] = [{"role": "user", "content": "task " * 40}]
    for i in range(12):
        items.append({"type": "function_call", "call_id": f"c{i}", "name": TOOL, "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{i}", "output": f"r{i} " + "y" * 3000})
    items.append({"role": "user", "content": "summarise"})
    return items


def refusing(sizes: list[int]) -> ScriptedModel:
    """A model that refuses any input over 8,000 characters as the llama.cpp server does."""

    def respond(call: ModelCall) -> Any:
        size = len(json.dumps(call.input))
        sizes.append(size)
        if size > 9000:
            return UpstreamError(400, {"content-type": "application/json"}, OVERFLOW)
        return [assistant_message("fits")]

    return ScriptedModel([ModelStep.respond(respond) for _ in range(6)])


def test_overflow_recovered_by_the_model_wrapper() -> None:
    sizes: list[int] = []
    reports: list[CallReport] = []
    with session("oa-overflow") as chosen:
        budget = Toolbudget(chosen, on_report=reports.append)
        agent = Agent(name="a", model=budget.model(refusing(sizes)))
        given = history()
        before = copy.deepcopy(given)
        result = asyncio.run(Runner.run(agent, given, run_config=QUIET))
    assert result.final_output == "fits"
    assert len(sizes) >= 2 and sizes[0] > 9000 >= sizes[-1]
    assert reports[0].recovery.recovered
    assert given == before


def test_streamed_overflow_recovered_before_the_first_event() -> None:
    sizes: list[int] = []
    reports: list[CallReport] = []

    async def run(agent: Agent[Any]) -> str:
        streamed = Runner.run_streamed(agent, history(), run_config=QUIET)
        async for _event in streamed.stream_events():
            pass
        return str(streamed.final_output)

    with session("oa-stream") as chosen:
        budget = Toolbudget(chosen, on_report=reports.append)
        assert asyncio.run(run(Agent(name="a", model=budget.model(refusing(sizes))))) == "fits"
    assert len(sizes) >= 2 and reports[0].recovery.recovered and reports[0].stream


def test_input_filter_manages_and_keeps_untouched_items() -> None:
    """The filter alone: a whole result is cut; every other item is the very object given."""
    items: list[Any] = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": TOOL, "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": search_output("q0")},
    ]
    before = copy.deepcopy(items)
    with session("oa-filter") as chosen:
        budget = Toolbudget(chosen)
        agent = Agent(name="a", tools=budget.tools([search_logs]))
        data = CallModelData(
            model_data=ModelInputData(input=items, instructions="sys"), agent=agent, context=None
        )
        out = budget.input_filter(data)
        assert out.input[0] is items[0] and out.input[1] is items[1]
        (text,) = outputs(out.input)
        assert MARKER_RE.search(text) and f"recall it with {RECALL_TOOL}" in text
        assert chosen.original(marker_keys([text])[0]) == search_output("q0")
        assert out.instructions == "sys"
        # nothing to change: the very input data comes back
        small = ModelInputData(input=items[:1], instructions=None)
        assert budget.input_filter(CallModelData(model_data=small, agent=agent, context=None)) is small
    assert items == before


def test_recall_tool_answers_bad_arguments_in_one_line() -> None:
    with session("oa-recall") as chosen:
        tool = Toolbudget(chosen).recall_tool()
        assert isinstance(tool, FunctionTool) and tool.name == RECALL_TOOL
        answer: str = asyncio.run(tool.on_invoke_tool(None, '{"nope": 1}'))  # type: ignore[arg-type]
        assert "\n" not in answer and "unknown argument" in answer


@pytest.mark.slow
def test_real_model_through_chat_completions(llama_url: str) -> None:
    """The managed request reaches the real llama.cpp server; its overflow is recovered; it answers."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    reports: list[CallReport] = []
    given: list[Any] = [
        {"role": "user", "content": "Why do the parser tests fail?"},
        {"type": "function_call", "call_id": "call_0", "name": TOOL, "arguments": '{"query": "q0"}'},
        {"type": "function_call_output", "call_id": "call_0", "output": search_output("q0")},
        {"role": "user", "content": "Answer in one short sentence."},
    ]

    async def run(chosen: Session) -> Any:
        client = AsyncOpenAI(base_url=f"{llama_url}/v1", api_key="none", max_retries=0)
        try:
            budget = Toolbudget(chosen, on_report=reports.append)
            model = budget.model(OpenAIChatCompletionsModel(model="smollm2", openai_client=client))
            agent = Agent(name="a", model=model, tools=budget.tools([search_logs]))
            from agents import ModelSettings

            agent.model_settings = ModelSettings(max_tokens=16)
            return await Runner.run(
                agent, given, run_config=budget.run_config(tracing_disabled=True), max_turns=3
            )
        finally:
            await client.close()

    with session("oa-real") as chosen:
        result = asyncio.run(run(chosen))
    assert isinstance(result.final_output, str) and result.final_output.strip()
    first = reports[0]
    assert first.managed.results_cut >= 1
    assert first.recovery.recovered and first.recovery.errors  # the real window refused, then it fit


def test_example_runs_ten_turns_with_markers_and_a_recall() -> None:
    out = run_example("openai_agents_agent.py")
    assert out.count("[toolbudget: omitted") == SEARCHES
    assert "toolbudget_recall:" in out and "q0 hit 0000" in out
    assert "model calls: 10" in out


def test_without_the_sdk_the_import_names_the_extra() -> None:
    out = import_error_without("agents", "openai_agents")
    assert out == "toolbudget.adapters.openai_agents needs agents: pip install 'toolbudget[openai-agents]'"


def test_a_model_name_is_a_model_as_for_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Agent(model=...)`` takes a name, and so does ``tb.model(...)``: it is resolved as the SDK
    resolves an agent's model name, not kept as a string that fails on the run's first call."""
    from agents import Model
    from agents.models.openai_responses import OpenAIResponsesModel

    monkeypatch.setenv("OPENAI_API_KEY", "none")  # the client is made, never called here
    with session("oa-name") as chosen:
        wrapped = Toolbudget(chosen).model("gpt-5-mini")
    assert isinstance(wrapped.inner, Model) and isinstance(wrapped.inner, OpenAIResponsesModel)
    assert wrapped.inner.model == "gpt-5-mini"
