"""A ten-turn LangChain agent whose tool returns 60,000 characters, with toolbudget's middleware.

    pip install 'toolbudget[langchain]'
    python examples/langchain_agent.py                       # a scripted model, offline
    python examples/langchain_agent.py --base-url http://127.0.0.1:8080/v1 --model NAME
                                                             # any OpenAI-compatible server
                                                             # (needs langchain-openai)

The scripted model searches eight times, recalls a page of the first result
through the marker's key, and answers. It prints what the model was shown for
each result: the preview and its marker, never the 60,000 characters.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import toolbudget
from toolbudget.adapters.langchain import ToolbudgetMiddleware


@tool
def search_logs(query: str) -> str:
    """Search the build logs for a pattern."""
    return "\n".join(f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR" for i in range(1200))


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, binding tools like a real one (it ignores them)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def script(state: dict[str, Any]) -> Iterator[AIMessage]:
    """Eight searches, a recall of the first marker the agent's state holds, then an answer."""
    for turn in range(8):
        yield AIMessage(
            "", tool_calls=[{"name": "search_logs", "args": {"query": f"q{turn}"}, "id": f"c{turn}"}]
        )
    shown = [m.text for m in state["messages"] if isinstance(m, ToolMessage)]
    key = next(m["key"] for text in shown for m in toolbudget.MARKER_RE.finditer(text) if m["key"])
    yield AIMessage(
        "", tool_calls=[{"name": toolbudget.RECALL_TOOL, "args": {"key": key, "lines": "1:3"}, "id": "r"}]
    )
    yield AIMessage("The parser modules fail; see the recalled lines.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of the scripted model")
    parser.add_argument("--model", default="gpt-5-mini")
    args = parser.parse_args()
    state: dict[str, Any] = {"messages": []}
    model: Any
    if args.base_url:
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(base_url=args.base_url, model=args.model)
    else:
        model = ScriptedModel(messages=script(state))

    with toolbudget.Session("langchain-example", store="memory:") as session:
        reports: list[toolbudget.CallReport] = []
        agent = create_agent(
            model,
            tools=[search_logs],
            middleware=[ToolbudgetMiddleware(session, on_report=reports.append)],
        )
        # stream the state so the scripted model can read the markers it was shown
        for step in agent.stream(
            {"messages": [HumanMessage("Why do the parser tests fail?")]}, stream_mode="values"
        ):
            state["messages"] = step["messages"]
        for message in state["messages"]:
            if isinstance(message, ToolMessage):
                marker = toolbudget.MARKER_RE.search(message.text)
                shown = marker.group(0) if marker else message.text[:120]
                print(f"{message.name}: {len(message.text):>5} chars shown: {shown!r}")
        print("answer:", state["messages"][-1].text)
        print("model calls:", len(reports))


if __name__ == "__main__":
    main()
