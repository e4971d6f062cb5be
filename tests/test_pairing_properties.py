"""Property tests: random valid histories, random damage, then repair, for every API."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import DAMAGES, conversations, damage, family_of, signatures
from toolbudget import repair, to_request, validate, wire
from toolbudget.model import ToolCall, ToolResult, text_of

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
    damaged_request = damage(request, kind, data)
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
    # Every call keeps a result; every result that answered a call is still there.
    calls = {p.id for m in damaged.messages for p in m.parts if isinstance(p, ToolCall)}
    kept = {text_of(p.content) for m in fixed.messages for p in m.parts if isinstance(p, ToolResult)}
    answered: set[str | None] = set()
    for message in damaged.messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id in calls and part.call_id not in answered:
                answered.add(part.call_id)  # a second result for the same call may go
                assert text_of(part.content) in kept, f"result of {part.call_id} was deleted"
