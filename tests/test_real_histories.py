"""Every shared real transcript, converted to every wire API: exact round trips, valid after repair."""

from __future__ import annotations

import copy

import pytest

from histories import DAMAGES, Seeded, damage, lost_results, rebuilt
from toolbudget import repair, to_request, validate, wire
from toolbudget.model import Conversation, ToolCall


@pytest.mark.parametrize("api", wire.APIS)
def test_round_trip_is_exact_on_every_real_transcript(api: str, real: list[tuple[str, Conversation]]) -> None:
    for name, conversation in real:
        body = to_request(conversation, api, model="m")
        before = copy.deepcopy(body)
        request = wire.parse(body, api)
        assert wire.render(request) is body, name
        assert wire.render(rebuilt(request)) == body, name
        assert body == before, name


@pytest.mark.parametrize("api", wire.APIS)
def test_every_real_transcript_is_valid_after_repair(api: str, real: list[tuple[str, Conversation]]) -> None:
    repaired_some = 0
    for name, conversation in real:
        body = to_request(conversation, api, model="m")
        repaired = repair(body, api)
        assert validate(repaired.body, api) == [], name
        assert repair(repaired.body, api).body is repaired.body, name
        calls = sum(isinstance(p, ToolCall) for m in conversation.messages for p in m.parts)
        fixed = wire.parse(repaired.body, api)
        # Nothing the agent saw is lost: every call is still there, and answered unless still pending.
        assert sum(isinstance(p, ToolCall) for m in fixed.messages for p in m.parts) <= calls, name
        repaired_some += repaired.changed
    if api in ("anthropic", "bedrock-converse", "openai-responses"):
        # These refuse ids reused across turns, which the shared tau-bench data holds.
        assert repaired_some > 0


@pytest.mark.parametrize("api", wire.APIS)
@pytest.mark.parametrize("kind", DAMAGES)
def test_damaged_real_histories_are_repaired(
    api: str, kind: str, real: list[tuple[str, Conversation]]
) -> None:
    damaged_some = 0
    for name, conversation in real:
        request = wire.parse(repair(to_request(conversation, api, model="m"), api).body, api)
        damaged = damage(request, kind, Seeded(f"{name}/{kind}"))
        if damaged is None:
            continue
        body = wire.render(damaged)
        damaged_some += bool(validate(body, api))
        repaired = repair(body, api)
        assert validate(repaired.body, api) == [], (name, [str(r) for r in repaired.repairs])
        assert repair(repaired.body, api).body is repaired.body, name
        assert lost_results(damaged, wire.parse(repaired.body, api)) == [], name
    if (api, kind) in NOT_A_FAULT:
        assert damaged_some == 0
    else:
        assert damaged_some > 0


# In Responses every call and output is its own item and an output may come anywhere after
# its call, so user text between them breaks nothing, and there is no batch to split.
NOT_A_FAULT = {("openai-responses", "interleave_user_text"), ("openai-responses", "split_batch")}
