"""A ten-turn agent on the google-genai SDK whose tool returns 60,000 characters, with ``toolbudget.wrap``.

    pip install toolbudget google-genai
    python examples/gemini_agent.py                 # a scripted model behind the real SDK, offline
    GEMINI_API_KEY=... python examples/gemini_agent.py --model gemini-2.5-flash

The agent keeps its own list of turns (automatic function calling off, as
``wrap`` asks) and runs the tools itself. The scripted model searches eight
times, recalls a page of the first result through the marker's key, and
answers. It prints what the model was shown for each result: the preview and
its marker, never the 60,000 characters.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import httpx
from google import genai
from google.genai import types

import toolbudget


def search_logs(query: str) -> str:
    return "\n".join(f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR" for i in range(1200))


SEARCH = types.FunctionDeclaration(
    name="search_logs",
    description="Search the build logs for a pattern.",
    parameters_json_schema={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


def scripted(request: httpx.Request) -> httpx.Response:
    """The model: eight searches, a recall of the first marker it was shown, then an answer."""
    body = httpx.Response(200, content=request.content).json()
    asked = sum(1 for c in body["contents"] for p in c["parts"] if "functionCall" in p)
    if asked < 8:
        part: dict[str, Any] = {
            "functionCall": {"id": f"c{asked}", "name": "search_logs", "args": {"query": f"q{asked}"}}
        }
    elif asked == 8:
        shown = str(body["contents"])
        key = re.search(r"<<tb:([a-z0-9]+)>>", shown)
        args = {"key": key.group(1) if key else "", "lines": "1:3"}
        part = {"functionCall": {"id": "c8", "name": toolbudget.RECALL_TOOL, "args": args}}
    else:
        part = {"text": "Every search hit the parser; module_0 is first."}
    answer = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}
    return httpx.Response(200, json=answer)


def run(client: Any, model: str) -> list[str]:
    """The agent loop; returns what the model was shown for each tool result."""
    wrapped = toolbudget.wrap(client, recall=True)  # offers the recall tool, answered by wrapped.toolbudget
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[SEARCH])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        max_output_tokens=512,
    )
    turns: list[Any] = [types.Content(role="user", parts=[types.Part(text="Why does the build fail?")])]
    shown: list[str] = []
    for _ in range(10):
        answer = wrapped.models.generate_content(model=model, contents=turns, config=config)
        content = answer.candidates[0].content
        turns.append(content)
        calls = [p.function_call for p in content.parts or () if p.function_call]
        if not calls:
            print(answer.text)
            break
        replies = []
        for call in calls:
            if call.name == toolbudget.RECALL_TOOL:
                output = wrapped.toolbudget.handle_recall(dict(call.args))
            else:
                output = wrapped.toolbudget.cut_result(call.name, search_logs(**call.args), call_id=call.id)
            shown.append(output)
            response = types.FunctionResponse(id=call.id, name=call.name, response={"output": output})
            replies.append(types.Part(function_response=response))
        turns.append(types.Content(role="user", parts=replies))
    wrapped.toolbudget.close()
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="A Gemini model (reads GEMINI_API_KEY); the scripted model without it."
    )
    args = parser.parse_args()
    if args.model:
        client = genai.Client()
    else:
        http = httpx.Client(transport=httpx.MockTransport(scripted))
        client = genai.Client(api_key="offline", http_options=types.HttpOptions(httpx_client=http))
    for i, text in enumerate(run(client, args.model or "scripted"), 1):
        print(f"--- result {i}: {len(text)} chars shown\n{text[:300]}")


if __name__ == "__main__":
    main()
