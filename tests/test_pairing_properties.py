"""Property tests: random valid histories, random damage, then repair, for every API."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import DAMAGES, Drawn, conversations, damage, family_of, lost_results, signatures
from toolbudget import repair, to_request, validate, wire
from toolbudget.model import Message, Request, Text, ToolCall, ToolDef, ToolResult
from toolbudget.pairing import answered_turn
from toolbudget.pairing.check import check
from toolbudget.pairing.rules import rules_for

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("api", wire.APIS)
@SETTINGS
@given(data=st.data())
def test_valid_history_is_untouched(api: str, data: st.DataObject) -> None:
    conversation = data.draw(conversations(family_of(api)))
    body = to_request(conversation, api, model="m")
    assert validate(body, api) == []
    before = copy.deepcopy(body)
    repaired = repair(body, api)
    assert repaired.body is body
    assert repaired.repairs == ()
    assert body == before


@pytest.mark.parametrize("api", wire.APIS)
@pytest.mark.parametrize("kind", DAMAGES)
@SETTINGS
@given(data=st.data())
def test_damage_is_repaired(api: str, kind: str, data: st.DataObject) -> None:
    conversation = data.draw(conversations(family_of(api)))
    request = wire.parse(to_request(conversation, api, model="m"), api)
    damaged_request = damage(request, kind, Drawn(data))
    if damaged_request is None:
        return
    body = wire.render(damaged_request)
    before = copy.deepcopy(body)
    repaired = repair(body, api)
    assert body == before, "repair mutated its input"
    assert validate(repaired.body, api) == [], [str(r) for r in repaired.repairs]
    again = repair(repaired.body, api)
    assert again.body is repaired.body, "repairing twice changed the result"

    damaged = wire.parse(body, api)
    fixed = wire.parse(repaired.body, api)
    assert signatures(fixed) == signatures(damaged), "a thinking block was lost"
    assert lost_results(damaged, fixed) == [], "a result that answered a call was deleted"


_IDS = st.sampled_from(["toolu_a", "toolu_b", "call_c", "bad id!", None])


@st.composite
def _tails(draw: st.DrawFn, carrier: str) -> tuple[Message, ...]:
    """A turn appended after a closed history: mostly the shapes agents send, often a little off."""
    calls = draw(st.lists(_IDS, max_size=3))
    lead = [Text("thinking aloud")] if draw(st.booleans()) else []
    assistant = Message("assistant", (*lead, *(ToolCall(i, "run", {}) for i in calls)))
    answered = draw(st.permutations(calls)) if draw(st.booleans()) else draw(st.lists(_IDS, max_size=3))
    results = [ToolResult(i, "out", name="run") for i in answered]
    if carrier == "tool-messages":
        after = [Message(draw(st.sampled_from(["tool", "tool", "user"])), (r,)) for r in results]
        if draw(st.integers(0, 4)) == 0:
            after.append(Message("user", (Text("next"),)))
        return (assistant, *after)
    note = [Text("and then")] if draw(st.integers(0, 3)) == 0 else []
    parts = [*note, *results] if draw(st.booleans()) else [*results, *note]
    if draw(st.integers(0, 5)) == 0:
        parts.append(ToolCall("toolu_z", "run", {}))
    tail: tuple[Message, ...] = (
        assistant,
        Message(draw(st.sampled_from(["user", "user", "assistant"])), tuple(parts)),
    )
    return tail if draw(st.integers(0, 6)) else tail[:1]


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "gemini", "bedrock-converse"])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_an_answered_turn_is_one_the_check_passes(api: str, data: st.DataObject) -> None:
    """The shortcut for an appended turn says "valid" only where the whole check finds nothing."""
    rules = rules_for(api)
    tail = data.draw(_tails(rules.carrier))
    tools = data.draw(st.booleans())
    request = Request(
        api, (Message("user", (Text("."),)), *tail), tools=(ToolDef("run", "", {}),) if tools else ()
    )
    if answered_turn(tail, rules, tools):
        assert check(request, rules) == []


def test_an_agents_appended_turns_take_the_shortcut() -> None:
    """The shape the shortcut knows is the one real agents send: most appended turns take it."""
    body = {
        "model": "m",
        "max_tokens": 10,
        "tools": [{"name": "run", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
        ],
    }
    request = wire.parse(body, "anthropic")
    assert answered_turn(request.messages[1:], rules_for("anthropic"), True)
    assert not answered_turn(request.messages[1:], rules_for("anthropic"), False)  # tools are required
