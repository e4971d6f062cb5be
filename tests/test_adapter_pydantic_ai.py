"""The pydantic-ai capability: a ten-turn agent on pydantic-ai's ``FunctionModel``, and a real model.

``FunctionModel`` calls a function with the messages the model is given, so
the script sees exactly what a model would, and every request is recorded.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

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
from toolbudget import MARKER_RE, RECALL_TOOL, CallReport, Policy, Session, Sessions, UpstreamError, validate
from toolbudget.adapters.pydantic_ai import Toolbudget, _wire

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


def session(name: str) -> Session:
    return Session(name, store="memory:", policy=Policy())


def tool_texts(messages: list[ModelMessage], name: str | None = None) -> list[str]:
    return [
        part.model_response_str()
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and (name is None or part.tool_name == name)
    ]


class Script:
    """The shared ten-turn script as a ``FunctionModel`` function, keeping every request it was given."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.tools: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        self.tools = [t.name for t in info.function_tools]
        turn = len(self.seen) - 1
        step = next_step(turn, tool_texts(messages))
        if step.tool is None:
            return ModelResponse(parts=[TextPart(step.text)])
        return ModelResponse(parts=[ToolCallPart(step.tool, step.args, f"call_{turn}")])


def agent_with(model: Any, capability: Toolbudget) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, capabilities=[capability])

    @agent.tool_plain(name=TOOL)
    def search_logs(query: str) -> str:
        """Search the logs."""
        return search_output(query)

    return agent


def run(agent: Agent[None, str], prompt: str, **kwargs: Any) -> AgentRunResult[str]:
    """``agent.run`` on a fresh event loop that is closed after (``run_sync`` leaves its loop open)."""
    return asyncio.run(agent.run(prompt, **kwargs))


def test_ten_turns_cut_and_recalled_every_request_valid() -> None:
    script = Script()
    reports: list[CallReport] = []
    with session("pai-agent") as chosen:
        agent = agent_with(FunctionModel(script), Toolbudget(chosen, on_report=reports.append))
        result = run(agent, "Why do the parser tests fail?")
        assert result.output == FINAL
        assert len(script.seen) == SEARCHES + 2
        assert len(reports) == SEARCHES + 2
        assert RECALL_TOOL in script.tools and TOOL in script.tools
        for shown in script.seen:
            assert validate({"messages": _wire(shown)[0]}, api="openai-chat") == []
        last = script.seen[-1]
        searches = tool_texts(last, TOOL)
        assert len(searches) == SEARCHES
        assert all(MARKER_RE.search(text) for text in searches)
        assert all(len(text) < len(search_output("q0")) // 5 for text in searches)
        (recalled,) = tool_texts(last, RECALL_TOOL)
        assert KEY_LINE.search(recalled), recalled[:300]
        assert chosen.original(marker_keys(searches[:1])[0]) == search_output("q0")
        # cut at the source: the run's own history holds the previews
        assert all(MARKER_RE.search(text) for text in tool_texts(result.all_messages(), TOOL))


def test_given_history_is_managed_untouched_messages_are_the_callers_own() -> None:
    """A whole result given in the history reaches the model cut; every other message is the given object."""
    asked = ModelRequest(parts=[UserPromptPart("go")])
    called = ModelResponse(parts=[ToolCallPart(TOOL, {"query": "q0"}, "c1")])
    returned = ModelRequest(parts=[ToolReturnPart(TOOL, search_output("q0"), "c1")])
    answered = ModelResponse(parts=[TextPart("noted")])
    history: list[ModelMessage] = [asked, called, returned, answered]
    before = copy.deepcopy(history)
    seen: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart("ok")])

    with session("pai-history") as chosen:
        agent = agent_with(FunctionModel(answer), Toolbudget(chosen))
        assert run(agent, "and now?", message_history=history).output == "ok"
        (shown,) = seen
        assert shown[0] is asked and shown[1] is called and shown[3] is answered
        (text,) = tool_texts(shown[2:3])
        assert MARKER_RE.search(text)
        assert chosen.original(marker_keys([text])[0]) == search_output("q0")
    assert validate({"messages": _wire(shown)[0]}, api="openai-chat") == []
    assert history == before


def test_overflow_recovered_through_on_model_request_error() -> None:
    """The model refuses a history over its window; the capability retries the step with one that fits."""
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("task " * 40)])]
    for i in range(12):
        history.append(ModelResponse(parts=[ToolCallPart(TOOL, {"query": str(i)}, f"c{i}")]))
        history.append(ModelRequest(parts=[ToolReturnPart(TOOL, f"result {i} " + "y" * 3000, f"c{i}")]))
    sizes: list[int] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        size = sum(len(m["content"] or "") for m in _wire(messages)[0])
        sizes.append(size)
        if size > 8000:
            raise UpstreamError(400, {"content-type": "application/json"}, OVERFLOW)
        return ModelResponse(parts=[TextPart("fits")])

    reports: list[CallReport] = []
    with session("pai-overflow") as chosen:
        agent = agent_with(FunctionModel(answer), Toolbudget(chosen, on_report=reports.append))
        assert run(agent, "summarise", message_history=history).output == "fits"
    assert len(sizes) >= 2 and sizes[0] > 8000 >= sizes[-1]
    assert reports[0].recovery.recovered


def test_other_errors_pass_through_unchanged() -> None:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise KeyError("not an overflow")

    with session("pai-error") as chosen:
        agent = agent_with(FunctionModel(answer), Toolbudget(chosen))
        with pytest.raises(KeyError, match="not an overflow"):
            run(agent, "hi")


@pytest.mark.slow
def test_real_model_through_openai_chat_model(llama_url: str) -> None:
    """The managed request reaches the real llama.cpp server; its overflow is recovered; it answers."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Why do the parser tests fail?")]),
        ModelResponse(parts=[ToolCallPart(TOOL, {"query": "q0"}, "call_0")]),
        ModelRequest(parts=[ToolReturnPart(TOOL, search_output("q0"), "call_0")]),
    ]
    reports: list[CallReport] = []

    async def run(chosen: Session) -> AgentRunResult[str]:
        client = AsyncOpenAI(base_url=f"{llama_url}/v1", api_key="none", max_retries=0)
        model = OpenAIChatModel("smollm2", provider=OpenAIProvider(openai_client=client))
        try:
            agent = agent_with(model, Toolbudget(chosen, on_report=reports.append))
            return await agent.run(
                "Answer in one short sentence.", message_history=history, model_settings={"max_tokens": 16}
            )
        finally:
            await client.close()

    with session("pai-real") as chosen:
        result = asyncio.run(run(chosen))
    assert isinstance(result.output, str) and result.output.strip()
    assert result.all_messages()[-1].model_name  # type: ignore[union-attr]
    first = reports[0]
    assert first.managed.results_cut >= 1
    assert first.recovery.recovered and first.recovery.errors  # the real window refused, then it fit


def test_example_runs_ten_turns_with_markers_and_a_recall() -> None:
    out = run_example("pydantic_ai_agent.py")
    assert out.count("[toolbudget: omitted") == SEARCHES
    assert "toolbudget_recall:" in out and "q0 hit 0000" in out
    assert "model calls: 10" in out


def test_without_pydantic_ai_the_import_names_the_extra() -> None:
    out = import_error_without("pydantic_ai", "pydantic_ai")
    assert out == "toolbudget.adapters.pydantic_ai needs pydantic_ai: pip install 'toolbudget[pydantic-ai]'"


def test_a_pool_gives_each_conversation_its_session() -> None:
    script = Script()
    with Sessions(store="memory:") as pool:
        agent = agent_with(FunctionModel(script), Toolbudget(pool))
        assert run(agent, "Why do the parser tests fail?", conversation_id="conv-7").output == FINAL
        searches = tool_texts(script.seen[-1], TOOL)
        assert pool.get("conv-7").original(marker_keys(searches[:1])[0]) == search_output("q0")


def test_a_changed_message_keeps_what_pydantic_ai_knows_of_it() -> None:
    """Folded turns leave their marker in the first kept response, and a call interrupted before
    its result gets one: the response is still the given one (model name, timestamp, provider
    details), with the marker; the result names its tool."""
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("fix the bug")])]
    for i in range(40):
        call = ToolCallPart(TOOL, {"query": f"q{i}"}, f"c{i}")
        history.append(ModelResponse(parts=[TextPart(f"step {i}"), call], model_name="m-1"))
        history.append(ModelRequest(parts=[ToolReturnPart(TOOL, search_output(f"q{i}")[:12_000], f"c{i}")]))
    history.append(ModelResponse(parts=[ToolCallPart(TOOL, {"query": "late"}, "late")], model_name="m-1"))
    history.append(ModelRequest(parts=[UserPromptPart("go on")]))
    seen: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart("ok")])

    with Session("pai-fold", store="memory:", policy=Policy(context_window_tokens=8_000)) as chosen:
        agent = agent_with(FunctionModel(answer), Toolbudget(chosen))
        assert run(agent, "and now?", message_history=history).output == "ok"
    (shown,) = seen
    assert validate({"messages": _wire(shown)[0]}, api="openai-chat") == []
    folded = [m for m in shown if isinstance(m, ModelResponse) and MARKER_RE.search(m.text or "")]
    assert len(folded) == 1 and len(shown) < len(history)
    (head,) = folded
    given = next(
        m
        for m in history
        if isinstance(m, ModelResponse) and any(p in m.parts for p in head.parts if isinstance(p, TextPart))
    )
    assert head is not given and head.model_name == "m-1" and head.timestamp == given.timestamp
    assert [p.tool_call_id for p in head.parts if isinstance(p, ToolCallPart)] == [
        p.tool_call_id for p in given.parts if isinstance(p, ToolCallPart)
    ]
    synthesized = [
        part
        for m in shown
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, ToolReturnPart) and part.tool_call_id == "late"
    ]
    assert [part.tool_name for part in synthesized] == [TOOL]
