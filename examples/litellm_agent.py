"""A ten-turn agent behind LiteLLM whose tool returns 60,000 characters, with toolbudget's callback.

    pip install 'toolbudget[litellm]'
    python examples/litellm_agent.py                         # LiteLLM's mock responses, offline
    python examples/litellm_agent.py --base-url http://127.0.0.1:8080/v1 --model openai/NAME
                                                             # any OpenAI-compatible server

Each request goes through ``ToolbudgetLogger.async_pre_call_hook``, as a LiteLLM
proxy runs it before routing (see ``litellm_proxy_config.yaml``), then to
``litellm.acompletion``. The scripted replies search eight times, recall a page
of the first result through the marker's key, and answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import litellm

import toolbudget
from toolbudget.adapters.litellm import ToolbudgetLogger

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_logs",
        "description": "Search the build logs for a pattern.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


def search_logs(query: str) -> str:
    return "\n".join(f"{query} hit {i:04d}: src/parser/module_{i % 37}.py:{i} ERROR" for i in range(1200))


def scripted(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The mock reply for this turn: eight searches, a recall of the first marker shown, an answer."""
    shown = [str(m["content"]) for m in messages if m.get("role") == "tool"]
    if len(shown) < 8:
        call = {"name": "search_logs", "arguments": json.dumps({"query": f"q{len(shown)}"})}
        return {"mock_tool_calls": [{"id": f"c{len(shown)}", "type": "function", "function": call}]}
    if len(shown) == 8:
        found = toolbudget.MARKER_RE.search(shown[0])
        assert found is not None
        call = {
            "name": toolbudget.RECALL_TOOL,
            "arguments": json.dumps({"key": found["key"], "lines": "1:3"}),
        }
        return {"mock_tool_calls": [{"id": "r", "type": "function", "function": call}]}
    return {"mock_response": "The parser modules fail; see the recalled lines."}


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint instead of LiteLLM's mock")
    parser.add_argument("--model", default="openai/gpt-5-mini")
    args = parser.parse_args()
    with toolbudget.Session("litellm-example", store="memory:") as session:
        hook = ToolbudgetLogger(session, recall=True)  # recall=True: this client answers the recall tool
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Why do the parser tests fail?"}]
        model_calls = 0
        while model_calls < 10:
            model_calls += 1
            data = {"model": args.model, "messages": messages, "tools": [SEARCH]}
            managed = await hook.async_pre_call_hook(None, None, data, "acompletion") or data
            extra = {"api_base": args.base_url} if args.base_url else scripted(managed["messages"])
            reply = (await litellm.acompletion(**managed, **extra)).choices[0].message
            if not reply.tool_calls:
                print("answer:", reply.content)
                break
            calls = [c.model_dump() for c in reply.tool_calls]
            messages = [*messages, {"role": "assistant", "content": reply.content, "tool_calls": calls}]
            for call in reply.tool_calls:
                arguments = json.loads(call.function.arguments)
                if call.function.name == toolbudget.RECALL_TOOL:
                    output = session.handle_recall(arguments)
                else:
                    output = search_logs(arguments.get("query", ""))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        last = await hook.async_pre_call_hook(
            None, None, {"model": args.model, "messages": messages}, "acompletion"
        )
        names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
        for message in (last or {"messages": messages})["messages"]:
            if message.get("role") == "tool":
                text = str(message["content"])
                marker = toolbudget.MARKER_RE.search(text)
                shown = marker.group(0) if marker else text[:120]
                print(f"{names[message['tool_call_id']]}: {len(text):>5} chars shown: {shown!r}")
        print("model calls:", model_calls)


if __name__ == "__main__":
    asyncio.run(main())
