"""Price models as data: chosen per request, overridable, and the same one schedules, replays and bills."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from bash_history import bash_history
from histories import bash_turns
from toolbudget import load_transcript, to_request, wire
from toolbudget.cli import main
from toolbudget.errors import InputError
from toolbudget.measure import prompt_text
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.prices import (
    ANTHROPIC_1H,
    ANTHROPIC_5M,
    GEMINI,
    NAMED,
    NONE,
    OPENAI,
    PriceModel,
    load_price,
    price_for,
)
from toolbudget.replay import (
    arrivals_for,
    replay_requests,
    replay_session,
    requests_of,
    tally,
    transcript_arrivals,
)
from toolbudget.session import Session


def session_of(turns: int, size: int = 12_000) -> Conversation:
    return bash_history(turns, size)


def test_the_named_models_bill_as_the_providers_state() -> None:
    assert {n: (p.write, p.read) for n, p in NAMED.items()} == {
        "anthropic-5m": (1.25, 0.1),
        "anthropic-1h": (2.0, 0.1),
        "openai": (1.0, 0.1),
        "gemini": (1.0, 0.25),
        "none": (1.0, 1.0),
    }
    assert ANTHROPIC_1H.ttl == 3600 and ANTHROPIC_5M.ttl == 300 and NONE.ttl is None
    assert ANTHROPIC_5M.bill(100, 150) == pytest.approx(0.1 * 100 + 1.25 * 50)
    assert NONE.bill(100, 150) == 150
    assert ANTHROPIC_5M.cold_after(301) and not ANTHROPIC_5M.cold_after(299) and not NONE.cold_after(1e9)


def test_the_price_model_is_chosen_from_the_api_model_and_cache_control() -> None:
    policy = Policy()
    assert price_for(policy, "anthropic", "claude-sonnet-4-5") is ANTHROPIC_5M
    assert price_for(policy, "openai-chat", "gpt-5") is OPENAI
    assert price_for(policy, "openai-responses", "gpt-5") is OPENAI
    assert price_for(policy, "gemini", "gemini-2.5-pro") is GEMINI
    assert price_for(policy, "bedrock-converse", "anthropic.claude-sonnet-4") is ANTHROPIC_5M
    body = to_request(session_of(1), "anthropic", model="claude-sonnet-4-5")
    body["system"] = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    request = wire.parse(body, "anthropic")
    assert price_for(policy, "anthropic", request.model, request) is ANTHROPIC_1H
    # The policy's choice comes first.
    assert price_for(replace(policy, cache_price="none"), "anthropic", None, request) is NONE


def test_a_one_hour_mark_in_an_old_message_holds_for_every_later_request() -> None:
    # The schedule checks only the messages a request appends; an old mark must still count,
    # and a history whose marked message changed is checked again from its start.
    requests = list(requests_of(session_of(6, size=4_000)))

    def body_of(n: int, marked: bool = True) -> dict[str, Any]:
        body = to_request(requests[n], "anthropic", model="claude-sonnet-4-5")
        if marked:
            body["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
        return body

    with Session("hour", store="memory:", policy=Policy()) as session:
        for n in range(1, len(requests)):
            session.manage(body_of(n), "anthropic")
            assert session._schedule._frame[2] is ANTHROPIC_1H, n
        session.manage(body_of(len(requests) - 1, marked=False), "anthropic")
        assert session._schedule._frame[2] is ANTHROPIC_5M


def test_a_price_file_is_read_and_a_bad_one_is_one_input_error(tmp_path: Path) -> None:
    good = tmp_path / "negotiated.json"
    good.write_bytes(orjson.dumps({"write": 1.1, "read": 0.05, "ttl": 600}))
    assert load_price(str(good)) == PriceModel("negotiated", 1.1, 0.05, 600)
    (tmp_path / "nocache.json").write_bytes(orjson.dumps({"write": 1, "read": 1, "ttl": None}))
    assert not load_price(str(tmp_path / "nocache.json")).cached
    for text in (b"[1]", b"{", b'{"write": -1, "read": 0.1}', b'{"write": 1, "read": 0.1, "x": 1}'):
        bad = tmp_path / "bad.json"
        bad.write_bytes(text)
        with pytest.raises(InputError):
            load_price(str(bad))
    with pytest.raises(InputError):
        load_price("anthropic-10m")
    with pytest.raises(InputError):
        Policy(cache_price="anthropic-10m")


def test_without_a_cache_the_schedule_compacts_as_soon_as_eager_does() -> None:
    """No cache: no rewrite costs anything, so cache-aware bills no more than eager."""
    conversation = session_of(12, size=5_000)
    totals = {}
    for mode in ("eager", "cache-aware"):
        policy = Policy(compaction=mode, cache_price="none")
        with Session(mode, store="memory:", policy=policy) as session:

            def manage(body: dict[str, Any], live: Session = session) -> tuple[dict[str, Any], int]:
                managed = live.manage(body, "anthropic")
                return managed.body, managed.report.results_cut

            totals[mode] = replay_requests(conversation, "anthropic", manage, price=NONE)
    assert totals["cache-aware"].billed <= totals["eager"].billed
    assert totals["cache-aware"].billed == totals["cache-aware"].tokens_sent


def test_the_schedule_weighs_rewrites_with_the_requests_price() -> None:
    """A rewrite that does not pay at Anthropic's write price pays where writing costs 1x."""
    conversation = session_of(14, size=3_600)
    events = {}
    for name in ("anthropic-5m", "openai", "none"):
        policy = Policy(cache_price=name, compact_clear_at_least=0)
        with Session(name, store="memory:", policy=policy) as session:
            events[name] = sum(
                session.manage(to_request(p, "anthropic", model="m"), "anthropic").report.compaction_event
                for p in requests_of(conversation)
            )
    assert events["none"] >= events["openai"] >= events["anthropic-5m"]
    assert events["none"] > events["anthropic-5m"]


def test_a_request_after_the_ttl_reads_nothing_from_the_cache() -> None:
    texts = [("a" * 400, 0), ("a" * 800, 0), ("a" * 1200, 0)]
    warm = tally(texts, ANTHROPIC_5M, [0, 10, 20])
    cold = tally(texts, ANTHROPIC_5M, [0, 10, 400])
    assert warm.cache_read == 100 + 200 and cold.cache_read == 100
    assert cold.billed > warm.billed
    assert tally(texts, ANTHROPIC_1H, [0, 10, 400]).cache_read == 300  # the 1-hour cache survives it
    assert cold.stable_requests == warm.stable_requests == 2
    assert arrivals_for(5, 600, 2) == [0, 10, 610, 620, 1220] and arrivals_for(5, None, 2) is None


def test_replay_session_bills_all_three_modes_under_one_price_and_emits_each(tmp_path: Path) -> None:
    conversation = session_of(8)
    outcome = replay_session(conversation, "anthropic", Policy(cache_price="openai"), emit=tmp_path)
    assert {outcome.managed.price, outcome.eager.price, outcome.unmanaged.price} == {OPENAI}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache-aware", "eager", "unmanaged"]
    count = outcome.managed.requests
    assert all(len(list((tmp_path / m).iterdir())) == count for m in ("cache-aware", "eager", "unmanaged"))
    # The emitted bodies bill again to the same totals.
    texts = []
    for n in range(count):
        body = orjson.loads((tmp_path / "eager" / f"{n:04d}.json").read_bytes())
        texts.append((prompt_text(wire.parse(body, "anthropic")), 0))
    assert tally(texts, OPENAI).billed == pytest.approx(outcome.eager.billed)


def test_replay_price_and_idle_options(tmp_path: Path) -> None:
    # A tau-bench results file (OpenAI chat messages) of one twelve-turn conversation.
    traj = bash_turns(12)
    traj.append({"role": "assistant", "content": "done"})
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps([{"task_id": 0, "trial": 0, "reward": 1.0, "traj": traj}]))
    runner = CliRunner()
    plain = runner.invoke(main, ["replay", str(path), "--price", "none", "--progress", "never"])
    assert plain.exit_code == 0, plain.output
    assert "billed as none" in plain.output
    report = tmp_path / "r.json"
    idle = runner.invoke(
        main,
        [
            "replay",
            str(path),
            "--idle",
            "900",
            "--idle-every",
            "3",
            "--report",
            str(report),
            "--progress",
            "never",
        ],
    )
    assert idle.exit_code == 0, idle.output
    warm = runner.invoke(
        main, ["replay", str(path), "--report", str(tmp_path / "w.json"), "--progress", "never"]
    )
    assert warm.exit_code == 0
    idle_totals = orjson.loads(report.read_bytes())["totals"]
    warm_totals = orjson.loads((tmp_path / "w.json").read_bytes())["totals"]
    # The gaps cost the unmanaged history its cache on every third request.
    assert idle_totals["unmanaged"]["cache_read_tokens"] < warm_totals["unmanaged"]["cache_read_tokens"]
    bad = runner.invoke(main, ["replay", str(path), "--price", "anthropic-10m"])
    assert bad.exit_code == 2 and "price model" in bad.output
    # A tau-bench file has no clock of its own.
    clockless = runner.invoke(main, ["replay", str(path), "--timestamps"])
    assert clockless.exit_code == 2 and "timestamps" in clockless.output


_TIMED = (
    ("claude-code/tests/integration/session/fixtures/session-624a4a58.jsonl", True),
    # Its one long gap comes before the fourth request, when no result is old enough to compact.
    (
        "codex-cli/src/agents/plugins/codex/__tests__/fixtures/"
        "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
        False,
    ),
)


@pytest.mark.shared
@pytest.mark.parametrize(("name", "pending"), _TIMED)
def test_with_the_transcripts_own_clock_idle_gaps_bill_less(
    trajectories: Path, name: str, pending: bool
) -> None:
    """Both sessions have a gap over five minutes: told of it, the schedule compacts there for
    free, so it bills no more, and less where a result was waiting to be compacted."""
    path = trajectories / name
    conversation = load_transcript(path).conversations[0]
    arrivals = transcript_arrivals(path, conversation)
    assert arrivals is not None and len(arrivals) == len(list(requests_of(conversation)))
    assert max(b - a for a, b in itertools.pairwise(arrivals)) > 300
    billed = {}
    for label, told in (("blind", None), ("told", arrivals)):
        with Session(label, store="memory:", policy=Policy()) as session:
            times = iter(told) if told is not None else None

            def manage(
                body: dict[str, Any], live: Session = session, times: Iterator[float] | None = times
            ) -> tuple[dict[str, Any], int]:
                now = next(times) if times is not None else None
                managed = live.manage(body, "anthropic", now=now)
                return managed.body, managed.report.results_cut

            billed[label] = replay_requests(conversation, "anthropic", manage, arrivals=arrivals).billed
    assert billed["told"] <= billed["blind"], billed
    assert (billed["told"] < billed["blind"]) == pending, billed
