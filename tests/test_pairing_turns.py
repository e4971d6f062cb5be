"""Two assistant turns in a row: joined only when the evidence says they were one batch.

A chain of steps whose result was lost (``call_1``, ``call_2``, result of
``call_2``) must stay a chain: the synthetic result goes between the turns,
in one repair. Pieces of one response (both answered after the second) are
joined, as before.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from toolbudget import SYNTHETIC_TEXT, repair, validate

# --- one builder per API: a user turn, assistant turns with calls, and results -------------


def _chat(turns: list[list[str]], results: list[str], tail: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for calls in turns:
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": c, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                    for c in calls
                ],
            }
        )
    messages += [{"role": "tool", "tool_call_id": r, "content": f"out {r}"} for r in results]
    if tail:
        messages.append({"role": "assistant", "content": "done"})
    return {"model": "m", "messages": messages}


def _anthropic(turns: list[list[str]], results: list[str], tail: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for calls in turns:
        content = [{"type": "tool_use", "id": c, "name": "bash", "input": {}} for c in calls]
        messages.append({"role": "assistant", "content": content})
    if results:
        content = [{"type": "tool_result", "tool_use_id": r, "content": f"out {r}"} for r in results]
        messages.append({"role": "user", "content": content})
    if tail:
        messages.append({"role": "assistant", "content": "done"})
    tools = [{"name": "bash", "input_schema": {"type": "object"}}]
    return {"model": "m", "max_tokens": 10, "tools": tools, "messages": messages}


def _gemini(turns: list[list[str]], results: list[str], tail: bool) -> dict[str, Any]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "go"}]}]
    for calls in turns:
        parts = [{"functionCall": {"name": "bash", "args": {}, "id": c}} for c in calls]
        contents.append({"role": "model", "parts": parts})
    if results:
        parts = [
            {"functionResponse": {"name": "bash", "response": {"output": f"out {r}"}, "id": r}}
            for r in results
        ]
        contents.append({"role": "user", "parts": parts})
    if tail:
        contents.append({"role": "model", "parts": [{"text": "done"}]})
    return {"contents": contents}


def _bedrock(turns: list[list[str]], results: list[str], tail: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "go"}]}]
    for calls in turns:
        content = [{"toolUse": {"toolUseId": c, "name": "bash", "input": {}}} for c in calls]
        messages.append({"role": "assistant", "content": content})
    if results:
        answers = [{"toolResult": {"toolUseId": r, "content": [{"text": f"out {r}"}]}} for r in results]
        messages.append({"role": "user", "content": answers})
    if tail:
        messages.append({"role": "assistant", "content": [{"text": "done"}]})
    tools = [{"toolSpec": {"name": "bash", "inputSchema": {"json": {"type": "object"}}}}]
    return {"modelId": "m", "toolConfig": {"tools": tools}, "messages": messages}


def _responses(turns: list[list[str]], results: list[str], tail: bool) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for calls in turns:
        items += [{"type": "function_call", "call_id": c, "name": "bash", "arguments": "{}"} for c in calls]
    items += [{"type": "function_call_output", "call_id": r, "output": f"out {r}"} for r in results]
    if tail:
        items.append({"role": "assistant", "content": "done"})
    return {"model": "m", "input": items}


Builder = Callable[[list[list[str]], list[str], bool], dict[str, Any]]
BUILDERS: dict[str, Builder] = {
    "openai-chat": _chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "bedrock-converse": _bedrock,
    "openai-responses": _responses,
}
HISTORY = {"openai-chat": "messages", "anthropic": "messages", "bedrock-converse": "messages"}


def _entries(body: dict[str, Any], api: str) -> list[Any]:
    return list(body[HISTORY.get(api, "contents" if api == "gemini" else "input")])


def _sequence(body: dict[str, Any], api: str) -> list[tuple[str, str]]:
    """The calls and results of a history, in order: ("call", id) and ("result", id or text)."""
    out: list[tuple[str, str]] = []
    for entry in _entries(body, api):
        if api == "openai-chat":
            out += [("call", c["id"]) for c in entry.get("tool_calls") or []]
            if entry["role"] == "tool":
                out.append(("result", entry["tool_call_id"]))
        elif api == "openai-responses":
            if entry.get("type") == "function_call":
                out.append(("call", entry["call_id"]))
            elif entry.get("type") == "function_call_output":
                out.append(("result", entry["call_id"]))
        elif api == "gemini":
            for part in entry["parts"]:
                if "functionCall" in part:
                    out.append(("call", part["functionCall"]["id"]))
                elif "functionResponse" in part:
                    out.append(("result", part["functionResponse"]["id"]))
        else:
            for block in entry["content"] if isinstance(entry["content"], list) else []:
                if block.get("type") == "tool_use" or "toolUse" in block:
                    out.append(("call", block["id"] if "id" in block else block["toolUse"]["toolUseId"]))
                elif block.get("type") == "tool_result":
                    out.append(("result", block["tool_use_id"]))
                elif "toolResult" in block:
                    out.append(("result", block["toolResult"]["toolUseId"]))
    return out


def _synthetic_ids(body: dict[str, Any]) -> int:
    return str(body).count(SYNTHETIC_TEXT[:40])


@pytest.mark.parametrize("api", sorted(BUILDERS))
def test_a_chain_with_a_lost_result_gets_it_between_the_turns_in_one_repair(api: str) -> None:
    body = BUILDERS[api]([["call_1"], ["call_2"]], ["call_2"], True)
    before = copy.deepcopy(body)
    assert validate(body, api) != []
    repaired = repair(body, api)
    assert body == before
    assert [(r.kind, r.call_id) for r in repaired.repairs] == [("synthesized_result", "call_1")]
    assert [str(v) for v in validate(repaired.body, api)] == []
    assert _sequence(repaired.body, api) == [
        ("call", "call_1"),
        ("result", "call_1"),
        ("call", "call_2"),
        ("result", "call_2"),
    ]
    assert _synthetic_ids(repaired.body) == 1


@pytest.mark.parametrize("api", sorted(set(BUILDERS) - {"openai-responses"}))
def test_pieces_of_one_batch_answered_after_the_second_are_joined(api: str) -> None:
    # Both results follow the second turn: the calls were issued together.
    repaired = repair(BUILDERS[api]([["call_1"], ["call_2"]], ["call_1", "call_2"], True), api)
    assert [r.kind for r in repaired.repairs] == ["merged_messages"]
    assert [str(v) for v in validate(repaired.body, api)] == []
    assert _sequence(repaired.body, api) == [
        ("call", "call_1"),
        ("call", "call_2"),
        ("result", "call_1"),
        ("result", "call_2"),
    ]


@pytest.mark.parametrize("api", sorted(BUILDERS))
def test_a_batch_missing_its_second_result_is_joined_and_closed_after_the_real_one(api: str) -> None:
    # The first call is answered after the second turn: one batch, whose second result was lost.
    repaired = repair(BUILDERS[api]([["call_1"], ["call_2"]], ["call_1"], True), api)
    kinds = [(r.kind, r.call_id) for r in repaired.repairs]
    assert ("synthesized_result", "call_2") in kinds
    assert [str(v) for v in validate(repaired.body, api)] == []
    assert _sequence(repaired.body, api) == [
        ("call", "call_1"),
        ("call", "call_2"),
        ("result", "call_1"),
        ("result", "call_2"),
    ]


@pytest.mark.parametrize("api", ["openai-chat", "anthropic", "gemini", "openai-responses"])
def test_trailing_calls_in_a_row_wait_together_and_nothing_is_invented(api: str) -> None:
    body = BUILDERS[api]([["call_1"], ["call_2"]], [], False)
    repaired = repair(body, api)
    assert _synthetic_ids(repaired.body) == 0
    assert [str(v) for v in validate(repaired.body, api)] == []
    closed = repair(body, api, close_pending=True)
    assert sorted(r.call_id or "" for r in closed.repairs if r.kind == "closed_pending_call") == [
        "call_1",
        "call_2",
    ]
