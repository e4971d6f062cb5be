"""Property tests: random valid histories, random damage, then repair, for every API."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histories import DAMAGES, Drawn, conversations, damage, family_of, lost_results, signatures
from toolbudget import repair, to_request, validate, wire

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
