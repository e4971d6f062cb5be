"""The LangChain middleware: a ten-turn agent with LangChain's fake chat model, deepagents, and a real model.

The fake model is LangChain's own ``GenericFakeChatModel``; it records every
list of messages it is given (what the model saw) and answers from the
shared script, which reads only those messages.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.tools import tool
from pydantic import Field, SecretStr

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
from toolbudget import (
    MARKER_RE,
    RECALL_TOOL,
    CallReport,
    InputError,
    Policy,
    Session,
    Sessions,
    UpstreamError,
    validate,
)
from toolbudget.adapters.langchain import ToolbudgetMiddleware

__all__ = ["llama_url"]  # the fixture, used by name

OVERFLOW = json.dumps(
    {
        "error": {
            "code": 400,
            "message": "request (3031 tokens) exceeds the available context size (1024 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 3031,
            "n_ctx": 1024,
        }
    }
).encode()


class Recording(GenericFakeChatModel):
    """LangChain's fake chat model, keeping what it was shown; its tools are the agent's."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Recording:
        self.bound = [getattr(t, "name", None) or t["function"]["name"] for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted() -> Recording:
    """A fake model that plays the shared ten-turn script on what it is shown."""
    seen: list[list[BaseMessage]] = []

    def answers() -> Iterator[AIMessage]:
        turn = 0
        while True:
            shown = [m.text for m in seen[-1] if isinstance(m, ToolMessage)]
            step = next_step(turn, shown)
            calls = [{"name": step.tool, "args": step.args, "id": f"call_{turn}", "type": "tool_call"}]
            yield AIMessage(content=step.text, tool_calls=calls if step.tool else [])
            turn += 1

    model = Recording(messages=answers())
    model.seen = seen
    return model


@tool(TOOL)
def search_logs(query: str) -> str:
    """Search the logs."""
    return search_output(query)


def wire(messages: list[BaseMessage]) -> dict[str, Any]:
    return {"messages": convert_to_openai_messages(messages)}


def session(name: str) -> Session:
    return Session(name, store="memory:", policy=Policy())


def check_agent_run(model: Recording, state: dict[str, Any], chosen: Session) -> None:
    """Ten turns; results cut in what the model saw and in the state; recall returned the original."""
    assert len(model.seen) == SEARCHES + 2  # eight searches, the recall, the final answer
    assert state["messages"][-1].text == FINAL
    assert RECALL_TOOL in model.bound and TOOL in model.bound
    for shown in model.seen:
        assert validate(wire(shown), api="openai-chat") == []
    last = model.seen[-1]
    results = [m for m in last if isinstance(m, ToolMessage) and m.name == TOOL]
    assert len(results) == SEARCHES
    for message in results:
        assert MARKER_RE.search(message.text), "a search result reached the model whole"
        assert len(message.text) < len(search_output("q0")) // 5
    recalls = [m for m in last if isinstance(m, ToolMessage) and m.name == RECALL_TOOL]
    assert len(recalls) == 1
    assert KEY_LINE.search(recalls[0].text), recalls[0].text[:300]
    key = marker_keys([results[0].text])[0]
    assert chosen.original(key) == search_output("q0")
    # cut at the source: the agent's own state holds the previews, not the originals
    stored = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.name == TOOL]
    assert all(MARKER_RE.search(m.text) for m in stored)


def test_create_agent_ten_turns_cuts_and_recalls() -> None:
    model = scripted()
    reports: list[CallReport] = []
    with session("lc-agent") as chosen:
        agent = create_agent(
            model,
            tools=[search_logs],
            system_prompt="You search logs.",
            middleware=[ToolbudgetMiddleware(chosen, on_report=reports.append)],
        )
        state = agent.invoke({"messages": [HumanMessage("Why do the parser tests fail?")]})
        check_agent_run(model, state, chosen)
        assert len(reports) == SEARCHES + 2
        assert isinstance(model.seen[0][0], SystemMessage)


def test_async_agent_ten_turns_cuts_and_recalls() -> None:
    model = scripted()
    with session("lc-async") as chosen:
        agent = create_agent(model, tools=[search_logs], middleware=[ToolbudgetMiddleware(chosen)])
        state = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Why do the parser tests fail?")]}))
        check_agent_run(model, state, chosen)


def test_deepagents_ten_turns_cuts_and_recalls() -> None:
    from deepagents import create_deep_agent

    model = scripted()
    with session("lc-deep") as chosen:
        agent = create_deep_agent(model=model, tools=[search_logs], middleware=[ToolbudgetMiddleware(chosen)])
        state = agent.invoke({"messages": [HumanMessage("Why do the parser tests fail?")]})
        check_agent_run(model, state, chosen)


def request_of(messages: list[Any], model: Any = None) -> ModelRequest[Any]:
    return ModelRequest(model=model or scripted(), messages=messages, system_message=SystemMessage("sys"))


def test_dangling_call_is_repaired_and_caller_messages_untouched() -> None:
    """A history with a call left unanswered reaches the model valid; the request's own objects are reused."""
    asked = HumanMessage("go")
    dangling = AIMessage(content="", tool_calls=[{"name": TOOL, "args": {"query": "x"}, "id": "c1"}])
    later = HumanMessage("and now?")
    messages: list[BaseMessage] = [asked, dangling, later]
    before = copy.deepcopy(messages)
    assert validate(wire(messages), api="openai-chat") != []
    sent: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        sent.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    with session("lc-repair") as chosen:
        ToolbudgetMiddleware(chosen).wrap_model_call(request_of(messages), handler)
    (request,) = sent
    assert request.system_message is not None
    assert validate(wire([request.system_message, *request.messages]), api="openai-chat") == []
    assert request.messages[0] is asked and request.messages[1] is dangling
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c1" for m in request.messages)
    assert messages == before


def test_overflow_is_recovered_through_the_handler() -> None:
    """The handler refuses a history over its window; the middleware calls it again with one that fits."""
    history: list[BaseMessage] = [HumanMessage("task " * 40)]
    for i in range(12):
        history.append(
            AIMessage(content="", tool_calls=[{"name": TOOL, "args": {"q": str(i)}, "id": f"c{i}"}])
        )
        history.append(ToolMessage(content=f"result {i} " + "y" * 3000, tool_call_id=f"c{i}", name=TOOL))
    history.append(HumanMessage("summarise"))
    sizes: list[int] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        size = sum(len(m.text) for m in request.messages)
        sizes.append(size)
        if size > 8000:
            raise UpstreamError(400, {"content-type": "application/json"}, OVERFLOW)
        return ModelResponse(result=[AIMessage("fits")])

    reports: list[CallReport] = []
    with session("lc-overflow") as chosen:
        middleware = ToolbudgetMiddleware(chosen, on_report=reports.append)
        response = middleware.wrap_model_call(request_of(history), handler)
    assert response.result[0].text == "fits"
    assert len(sizes) >= 2 and sizes[0] > 8000 >= sizes[-1]
    assert reports[0].recovery.recovered


@pytest.mark.slow
def test_real_model_through_chat_openai(llama_url: str) -> None:
    """The managed request reaches the real llama.cpp server; its overflow is recovered; it answers."""
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(
        base_url=f"{llama_url}/v1",
        api_key=SecretStr("none"),
        model="smollm2",
        max_completion_tokens=16,
        max_retries=0,
    )
    history: list[BaseMessage] = [
        HumanMessage("Why do the parser tests fail?"),
        AIMessage(content="", tool_calls=[{"name": TOOL, "args": {"query": "q0"}, "id": "call_0"}]),
        ToolMessage(content=search_output("q0"), tool_call_id="call_0", name=TOOL),
        HumanMessage("Answer in one short sentence."),
    ]
    reports: list[CallReport] = []
    with session("lc-real") as chosen:
        agent = create_agent(
            model, tools=[search_logs], middleware=[ToolbudgetMiddleware(chosen, on_report=reports.append)]
        )
        state = agent.invoke({"messages": history}, {"recursion_limit": 6})  # type: ignore[call-overload]
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert final.text or final.tool_calls
    assert final.response_metadata.get("model_provider") == "openai"
    first = reports[0]
    assert first.managed.results_cut >= 1
    assert first.recovery.recovered and first.recovery.errors  # the real window refused, then it fit


def test_example_runs_ten_turns_with_markers_and_a_recall() -> None:
    out = run_example("langchain_agent.py")
    assert out.count("search_logs:") == SEARCHES
    assert out.count("[toolbudget: omitted") == SEARCHES
    assert "toolbudget_recall:" in out and "q0 hit 0000" in out
    assert "model calls: 10" in out


def test_without_langchain_the_import_names_the_extra() -> None:
    out = import_error_without("langchain", "langchain")
    assert out == "toolbudget.adapters.langchain needs langchain: pip install 'toolbudget[langchain]'"


def test_a_pool_gives_each_thread_its_session() -> None:
    """With a Sessions pool, the LangGraph thread id names the session; without one, a one-line error."""
    with Sessions(store="memory:") as pool:
        model = scripted()
        agent = create_agent(model, tools=[search_logs], middleware=[ToolbudgetMiddleware(pool)])
        state = agent.invoke(
            {"messages": [HumanMessage("Why do the parser tests fail?")]},
            {"configurable": {"thread_id": "thread-7"}},
        )
        check_agent_run(model, state, pool.get("thread-7"))
        with pytest.raises(InputError, match="thread id"):
            create_agent(scripted(), tools=[search_logs], middleware=[ToolbudgetMiddleware(pool)]).invoke(
                {"messages": [HumanMessage("again")]}
            )
