"""A ten-turn OpenAI Agents SDK agent whose tool returns 60,000 characters, with toolbudget.

    pip install 'toolbudget[openai-agents]'
    python examples/openai_agents_agent.py                   # the SDK's ScriptedModel, offline
    python examples/openai_agents_agent.py --base-url http://127.0.0.1:8080/v1 --model NAME
                                                             # any OpenAI-compatible server

The scripted model searches eight times, recalls a page of the first result
through the marker's key, and answers. It prints what the model was shown for
each result: the preview and its marker, never the 60,000 characters.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from agents import Agent, Model, OpenAIChatCompletionsModel, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import toolbudget
from toolbudget.adapters.openai_agents import Toolbudget


@function_tool
def search_logs(query: str) -> str:
    """Search the build logs for a pattern."""
    return "\n".join(f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR" for i in range(1200))


def outputs(items: Any) -> list[str]:
    return [
        str(i["output"]) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]


def respond(call: ModelCall) -> Any:
    """Eight searches, a recall of the first marker the model was shown, then an answer."""
    shown = outputs(call.input)
    if len(shown) < 8:
        return [function_call("search_logs", {"query": f"q{len(shown)}"}, call_id=f"c{len(shown)}")]
    if len(shown) == 8:
        found = toolbudget.MARKER_RE.search(shown[0])
        assert found is not None
        return [function_call(toolbudget.RECALL_TOOL, {"key": found["key"], "lines": "1:3"}, call_id="r")]
    return [assistant_message("The parser modules fail; see the recalled lines.")]


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of the scripted model")
    parser.add_argument("--model", default="gpt-5-mini")
    args = parser.parse_args()
    model: Model
    if args.base_url:
        from openai import AsyncOpenAI

        model = OpenAIChatCompletionsModel(
            model=args.model, openai_client=AsyncOpenAI(base_url=args.base_url)
        )
    else:
        model = ScriptedModel([ModelStep.respond(respond) for _ in range(10)])

    with toolbudget.Session("openai-agents-example", store="memory:") as session:
        reports: list[toolbudget.CallReport] = []
        budget = Toolbudget(session, on_report=reports.append)
        agent = Agent(
            name="searcher",
            instructions="Find why the parser tests fail.",
            model=budget.model(model),  # every call managed, overflow recovered
            tools=budget.tools([search_logs]),  # results cut at the source, plus the recall tool
        )
        result = await Runner.run(
            agent,
            "Why do the parser tests fail?",
            run_config=budget.run_config(tracing_disabled=True),
            max_turns=12,
        )
        items: list[dict[str, Any]] = [dict(i) for i in result.to_input_list()]
        names = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
        for item in items:
            if item.get("type") == "function_call_output":
                text = str(item["output"])
                marker = toolbudget.MARKER_RE.search(text)
                shown = marker.group(0) if marker else text[:120]
                print(f"{names[item['call_id']]}: {len(text):>5} chars shown: {shown!r}")
        print("answer:", result.final_output)
        print("model calls:", len(reports))


if __name__ == "__main__":
    asyncio.run(main())
