"""A conversation's id from the head of its history: the whole parse's id, for a fraction of its cost."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolbudget import Sessions, to_request, wire
from toolbudget.errors import ShapeError
from toolbudget.model import Conversation
from toolbudget.session import conversation_id
from toolbudget.sessions import _without_billing, derived_id

_HISTORY = {
    "anthropic": "messages",
    "openai-chat": "messages",
    "openai-responses": "input",
    "gemini": "contents",
    "bedrock-converse": "messages",
}


def _whole_parse_id(body: dict[str, Any], api: str) -> str:
    """The id as it was found before: the whole body parsed, the attribution block left out."""
    return conversation_id(_without_billing(wire.parse(body, api)))


def _variants(body: dict[str, Any], api: str) -> list[dict[str, Any]]:
    """The body, and edits that move the id's parts around: a system message deep in the history,
    a task run over several messages, Claude Code's changing attribution block."""
    key = _HISTORY[api]
    out = [body]
    entries = body.get(key)
    if not isinstance(entries, list) or len(entries) < 3:
        return out
    if api in ("openai-chat", "openai-responses"):
        late = {"role": "developer", "content": "a late instruction"}
        out.append({**body, key: [*entries[:-1], late, entries[-1]]})
    first = next(
        (e for e in entries if isinstance(e, dict) and e.get("role") not in ("system", "developer")), None
    )
    if first is not None:
        at = entries.index(first)
        out.append({**body, key: [*entries[: at + 1], copy.deepcopy(first), *entries[at + 1 :]]})
    if api == "anthropic":
        system = body.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system or [])
        billing = {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.90; cch=a1b2;"}
        out.append({**body, "system": [billing, *blocks]})
    return out


@pytest.mark.parametrize("api", wire.APIS)
def test_the_derived_id_is_the_whole_parse_s_id_on_every_real_conversation(
    api: str, real: list[tuple[str, Conversation]]
) -> None:
    checked = 0
    for name, conversation in real:
        for body in _variants(to_request(conversation, api), api):
            assert derived_id(body, api) == (_whole_parse_id(body, api), None), name
            checked += 1
    assert checked > len(real)


def test_a_run_longer_than_the_head_is_read_to_its_end() -> None:
    task = [{"role": "user", "content": f"part {i}"} for i in range(9)]
    body = {"messages": [*task, {"role": "assistant", "content": "done"}]}
    shorter = {"messages": [*task[:5], {"role": "assistant", "content": "done"}]}
    assert derived_id(body, "openai-chat")[0] == _whole_parse_id(body, "openai-chat")
    assert derived_id(body, "openai-chat")[0] != derived_id(shorter, "openai-chat")[0]


def test_a_body_the_head_cannot_read_is_parsed_whole_and_that_parse_handed_over() -> None:
    head = [{"role": "user", "content": "t"}, {"role": "assistant", "content": "a"}]
    with pytest.raises(ShapeError, match=r"messages\.2"):
        derived_id({"messages": [*head, 7]}, "anthropic")  # the whole parse's error, with its place
    with pytest.raises(ShapeError):
        derived_id({"messages": "not a list"}, "anthropic")
    text = {"model": "m", "instructions": "be brief", "input": "do the task"}
    sid, request = derived_id(text, "openai-responses")
    assert request is not None and sid == _whole_parse_id(text, "openai-responses")


def test_a_derived_id_parses_only_the_head_of_a_long_history(
    monkeypatch: pytest.MonkeyPatch, real: list[tuple[str, Conversation]]
) -> None:
    """The pool derives the id without the whole parse: no parser call sees more than the head."""
    seen: list[int] = []
    module = wire.module("anthropic")
    whole = module.parse

    def counting(body: Any, cache: Any = None) -> Any:
        seen.append(len(body["messages"]))
        return whole(body, cache)

    monkeypatch.setattr(module, "parse", counting)
    long = max((to_request(c, "anthropic") for _, c in real[:40]), key=lambda b: len(b["messages"]))
    assert len(long["messages"]) > 20
    with Sessions(store="memory:") as pool:
        session = pool.for_request(long, api="anthropic")
        parsed = list(seen)
        assert session.id == _whole_parse_id(long, "anthropic")
        assert parsed and max(parsed) <= 4, parsed


def test_one_conversation_gets_one_derived_id_on_every_api(real: list[tuple[str, Conversation]]) -> None:
    """A Codex rollout's several system blocks are one ``instructions`` string on the Responses
    API, and a Bedrock body of a conversation the agent opened begins with a placeholder turn:
    neither changes the id, so a conversation's archive is the same whichever API carries it."""
    several_blocks = opened_by_agent = 0
    for name, conversation in real:
        ids = {api: derived_id(to_request(conversation, api), api)[0] for api in wire.APIS}
        assert len(set(ids.values())) == 1, (name, ids)
        several_blocks += len(conversation.system) > 1
        opened_by_agent += bool(conversation.messages) and conversation.messages[0].role == "assistant"
    assert several_blocks and opened_by_agent  # both cases were met


def test_the_system_prompt_s_blocks_and_the_bedrock_placeholder_do_not_change_the_id() -> None:
    from toolbudget.model import Message, Text, ToolCall, ToolResult

    conversation = Conversation(
        "c",
        "test",
        (
            Message("assistant", (ToolCall("c1", "ls", {}),)),
            Message("tool", (ToolResult("c1", (Text("a b"),)),)),
        ),
        (Text("You are an agent."), Text("Be brief.")),
    )
    ids = {api: derived_id(to_request(conversation, api), api)[0] for api in wire.APIS}
    assert len(set(ids.values())) == 1, ids
    one_block = Conversation("c", "test", conversation.messages, (Text("You are an agent.\nBe brief."),))
    assert derived_id(to_request(one_block, "anthropic"), "anthropic")[0] == ids["anthropic"]
    other_task = Conversation(
        "c", "test", (Message("user", (Text("another task"),)), *conversation.messages), conversation.system
    )
    assert derived_id(to_request(other_task, "bedrock-converse"), "bedrock-converse")[0] != ids["anthropic"]


def test_tasks_of_an_agent_that_speaks_first_get_their_own_ids() -> None:
    """A support agent greets every user with the same words (all fifty tasks of a tau2 run did):
    the user's first words after the greeting are the task, so each task gets its own archive,
    with the same id on every API and from the head as from the whole parse."""
    from toolbudget.model import Message, Text, ToolCall, ToolResult

    def conversation(task: str) -> Conversation:
        return Conversation(
            task,
            "test",
            (
                Message("assistant", (Text("Hi! How can I help you today?"),)),
                Message("user", (Text(task),)),
                Message("assistant", (ToolCall("c1", "get_flight", {}),)),
                Message("tool", (ToolResult("c1", (Text("on time"),)),)),
                Message("assistant", (Text("It is on time."),)),
            ),
            (Text("You are an airline agent."),),
        )

    seen: dict[str, str] = {}
    for task in ("Where is flight 1?", "Cancel my booking."):
        ids = set()
        for api in wire.APIS:
            body = to_request(conversation(task), api)
            sid, _ = derived_id(body, api)
            assert sid == _whole_parse_id(body, api), api
            ids.add(sid)
        assert len(ids) == 1, (task, ids)
        seen[task] = ids.pop()
    assert len(set(seen.values())) == 2, seen
