"""Property tests: random valid histories, random damage, then repair, for every API."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import DAMAGES, Drawn, conversations, damage, family_of, lost_results, signatures
from toolbudget import repair, to_request, validate, wire
from toolbudget.model import Message, Part, Request, Role, Text, ToolCall, ToolDef, ToolResult
from toolbudget.pairing import plainly_paired
from toolbudget.pairing.check import check, thinking_enabled
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
def _turns(draw: st.DrawFn, carrier: str) -> list[Message]:
    """Turns of a history: mostly the shapes agents send, often a little off."""
    out: list[Message] = []
    for _ in range(draw(st.integers(1, 3))):
        calls = draw(st.lists(_IDS, max_size=3))
        lead: list[Part] = [Text("thinking aloud")] if draw(st.booleans()) else []
        out.append(Message("assistant", (*lead, *(ToolCall(i, "run", {}) for i in calls))))
        answered = draw(st.permutations(calls)) if draw(st.booleans()) else draw(st.lists(_IDS, max_size=3))
        results = [ToolResult(i, (Text("out"),), name="run") for i in answered]
        if carrier == "tool-messages":
            carriers: list[Role] = ["tool", "tool", "user"]
            out += [Message(draw(st.sampled_from(carriers)), (r,)) for r in results]
            if draw(st.integers(0, 3)) == 0:
                after: Role = draw(st.sampled_from(["user", "system"]))
                out.append(Message(after, (Text("next"),)))
            continue
        note: list[Part] = [Text("and then")] if draw(st.integers(0, 3)) == 0 else []
        parts: list[Part] = [*note, *results] if draw(st.booleans()) else [*results, *note]
        if draw(st.integers(0, 5)) == 0:
            parts.append(ToolCall("toolu_z", "run", {}))
        role: Role = draw(st.sampled_from(["user", "user", "user", "assistant", "system"]))
        out.append(Message(role, tuple(parts)))
    return out if draw(st.integers(0, 6)) else out[:-1]


@pytest.mark.parametrize("api", ["anthropic", "openai-chat", "gemini", "bedrock-converse"])
@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_a_plainly_paired_history_is_one_the_check_passes(api: str, data: st.DataObject) -> None:
    """The shortcut says "valid" only where the whole check finds nothing: for an appended run of
    turns (after a closed history) and for a whole history."""
    rules = rules_for(api)
    turns = data.draw(_turns(rules.carrier))
    tools = (ToolDef("run", "", {}),) if data.draw(st.booleans()) else ()
    opening = [Message("user", (Text("."),))] if data.draw(st.integers(0, 4)) else []
    messages = (*opening, *turns)
    if plainly_paired(messages, rules, bool(tools)):
        assert check(Request(api, messages, tools=tools), rules) == []
    if plainly_paired(turns, rules, bool(tools)):
        assert check(Request(api, (Message("user", (Text("."),)), *turns), tools=tools), rules) == []


@pytest.mark.parametrize("api", wire.APIS)
@SETTINGS
@given(data=st.data())
def test_the_shortcut_agrees_with_the_check_on_drawn_and_damaged_histories(
    api: str, data: st.DataObject
) -> None:
    conversation = data.draw(conversations(family_of(api)))
    request = wire.parse(to_request(conversation, api, model="m"), api)
    damaged = damage(request, data.draw(st.sampled_from(DAMAGES)), Drawn(data)) or request
    for one in (request, damaged):
        rules = rules_for(api)
        if plainly_paired(one.messages, rules, bool(one.tools)) and not thinking_enabled(one):
            assert check(one, rules) == []
