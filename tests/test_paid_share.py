"""An event waits until its changes have paid, by waiting, for a share of their rewrite.

The horizon of the cost model guesses how many more requests a compaction
serves; under prices where a cached read costs a quarter of a write (Gemini's)
that guess fires an event for nearly every change, one or two turns apart, and
the prefix changes on too many requests. Asking that a change has also cost
part of its rewrite already (read again at every request since its age allowed
it) batches the changes of several turns into one event. On the shared sessions
over 50k tokens this is what brings Gemini's prices to 90% prefix-stable at no
more than per-turn aging bills.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from toolbudget import compaction, load_transcript
from toolbudget.compaction import LEVEL_PREVIEW, SlotInfo, _best_cut, size_at
from toolbudget.policy import Policy
from toolbudget.prices import ANTHROPIC_5M, GEMINI
from toolbudget.replay import replay_requests
from toolbudget.session import Session


def _history(tail_turns: int) -> tuple[SlotInfo, list[int]]:
    """A 10,000-character result after a short task, then ``tail_turns`` turns of 1,500 characters."""
    sizes = [500, 200, 10_000, *([300, 1_200] * tail_turns)]
    cum = [0]
    for size in sizes:
        cum.append(cum[-1] + size)
    return SlotInfo(2, 0, 10_000, True, False), cum


def test_a_change_just_due_with_a_long_tail_waits_until_waiting_has_paid() -> None:
    policy = Policy()
    big, cum = _history(20)
    targets = [LEVEL_PREVIEW]
    reclaim = big.size - size_at(big, LEVEL_PREVIEW, policy)
    rewrite = (GEMINI.write - GEMINI.read) * (cum[-1] - cum[big.msg])
    horizon = compaction.FREE_WRITE_HORIZON_MIN
    assert reclaim * (GEMINI.read * horizon + GEMINI.write) > rewrite  # the horizon alone would fire
    # Just due (age 2): what it saves here is less than the share of its rewrite asked for.
    due = policy.microcompact_truncate_turns + 1
    assert GEMINI.write * reclaim < compaction.PAID_SHARE * rewrite
    assert _best_cut([big], [big.size], targets, [0], due, cum[-1], cum, policy, price=GEMINI) is None
    # Some requests later, what it has cost by waiting makes up the rest: the same cut is taken.
    later = next(
        t
        for t in range(due, due + 40)
        if GEMINI.write * reclaim + GEMINI.read * reclaim * (t - due) >= compaction.PAID_SHARE * rewrite
    )
    assert later > due
    assert _best_cut([big], [big.size], targets, [0], later - 1, cum[-1], cum, policy, price=GEMINI) is None
    assert _best_cut([big], [big.size], targets, [0], later, cum[-1], cum, policy, price=GEMINI) == big.msg


def test_without_the_share_the_same_change_fires_as_soon_as_it_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = Policy()
    big, cum = _history(20)
    due = policy.microcompact_truncate_turns + 1
    monkeypatch.setattr(compaction, "PAID_SHARE", 0.0)
    assert (
        _best_cut([big], [big.size], [LEVEL_PREVIEW], [0], due, cum[-1], cum, policy, price=GEMINI) == big.msg
    )


def test_under_a_write_premium_the_change_does_not_wait() -> None:
    """Anthropic's prices keep the horizon alone: the small sessions' exhaustive search favours it."""
    policy = Policy()
    big, cum = _history(6)
    turns = 40
    big = SlotInfo(big.msg, turns - 1 - (policy.microcompact_truncate_turns), big.size, True, False)
    targets = [LEVEL_PREVIEW]
    reclaim = big.size - size_at(big, LEVEL_PREVIEW, policy)
    tail = cum[-1] - cum[big.msg]
    assert reclaim * (ANTHROPIC_5M.read * turns / 2 + ANTHROPIC_5M.write) > 1.15 * tail  # pays
    assert GEMINI.write * reclaim < compaction.PAID_SHARE * (GEMINI.write - GEMINI.read) * tail
    assert (
        _best_cut([big], [big.size], targets, [0], turns, cum[-1], cum, policy, price=ANTHROPIC_5M) == big.msg
    )
    assert _best_cut([big], [big.size], targets, [0], turns, cum[-1], cum, policy, price=GEMINI) is None


# The shared sessions whose final context exceeds 50k tokens (``bench/cache.py --over 50000``).
_BIG = (
    "claude-code/tests/integration/session/fixtures/session-196820da.jsonl",
    "claude-code/tests/integration/session/fixtures/session-624a4a58.jsonl",
    "codex-cli/src/agents/plugins/codex/__tests__/fixtures/"
    "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
    *(
        f"mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/{name}/{name}.traj.json"
        for name in (
            "django__django-15629",
            "psf__requests-1142",
            "pylint-dev__pylint-6528",
            "pytest-dev__pytest-6197",
        )
    ),
)


@pytest.mark.shared
def test_under_gemini_prices_cache_aware_is_stable_and_no_dearer_than_eager(trajectories: Path) -> None:
    ratios: dict[str, list[float]] = {"eager": [], "cache-aware": []}
    stable = {"eager": 0, "cache-aware": 0}
    requests = 0
    for name in _BIG:
        conversation = load_transcript(trajectories / name).conversations[0]
        unmanaged = replay_requests(conversation, "anthropic", None, price=GEMINI)
        assert unmanaged.final_tokens > 50_000
        requests += unmanaged.requests - 1
        for mode, bills in ratios.items():
            policy = Policy(cache_price="gemini", compaction=mode)
            with Session(f"{mode}-{name}", store="memory:", policy=policy) as session:

                def manage(body: dict[str, Any], live: Session = session) -> tuple[dict[str, Any], int]:
                    managed = live.manage(body, "anthropic")
                    return managed.body, managed.report.results_cut

                totals = replay_requests(conversation, "anthropic", manage, price=GEMINI)
            bills.append(totals.billed / unmanaged.billed)
            stable[mode] += totals.stable_requests
    assert statistics.mean(ratios["cache-aware"]) <= statistics.mean(ratios["eager"]), ratios
    assert stable["cache-aware"] >= 0.9 * requests, (stable, requests)
