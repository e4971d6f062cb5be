"""A ten-turn pydantic-ai agent whose tool returns 60,000 characters, with toolbudget's capability.

    pip install 'toolbudget[pydantic-ai]'
    python examples/pydantic_ai_agent.py                     # a scripted FunctionModel, offline
    python examples/pydantic_ai_agent.py --base-url http://127.0.0.1:8080/v1 --model NAME
                                                             # any OpenAI-compatible server
                                                             # (needs pydantic-ai-slim[openai])

The scripted model searches eight times, recalls a page of the first result
through the marker's key, and answers. It prints what the model was shown for
each result: the preview and its marker, never the 60,000 characters.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolbudget
from toolbudget.adapters.pydantic_ai import Toolbudget


def results(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Eight searches, a recall of the first marker the model was shown, then an answer."""
    shown = results(messages)
    if len(shown) < 8:
        return ModelResponse(
            parts=[ToolCallPart("search_logs", {"query": f"q{len(shown)}"}, f"c{len(shown)}")]
        )
    if len(shown) == 8:
        found = toolbudget.MARKER_RE.search(shown[0].model_response_str())
        assert found is not None
        args = {"key": found["key"], "lines": "1:3"}
        return ModelResponse(parts=[ToolCallPart(toolbudget.RECALL_TOOL, args, "r")])
    return ModelResponse(parts=[TextPart("The parser modules fail; see the recalled lines.")])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of the scripted model")
    parser.add_argument("--model", default="gpt-5-mini")
    args = parser.parse_args()
    model: Any
    if args.base_url:
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        model = OpenAIChatModel(args.model, provider=OpenAIProvider(base_url=args.base_url))
    else:
        model = FunctionModel(script)

    with toolbudget.Session("pydantic-ai-example", store="memory:") as session:
        reports: list[toolbudget.CallReport] = []
        agent: Agent[None, str] = Agent(model, capabilities=[Toolbudget(session, on_report=reports.append)])

        @agent.tool_plain
        def search_logs(query: str) -> str:
            """Search the build logs for a pattern."""
            return "\n".join(
                f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR" for i in range(1200)
            )

        result = agent.run_sync("Why do the parser tests fail?")
        for part in results(result.all_messages()):
            text = part.model_response_str()
            marker = toolbudget.MARKER_RE.search(text)
            print(
                f"{part.tool_name}: {len(text):>5} chars shown: {marker.group(0) if marker else text[:120]!r}"
            )
        print("answer:", result.output)
        print("model calls:", len(reports))


if __name__ == "__main__":
    main()
