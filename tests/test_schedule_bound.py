"""The cache-aware schedule against the best any schedule can do on small sessions.

A session may end at any request, so a schedule is judged at every request
against the cheaper of never compacting and per-turn aging, both billed on the
history so far (``bench/schedule_bound.py`` searches every schedule exactly).
While the history is small and per-turn aging has been losing, a rewrite that
costs its own request more than leaving the history alone waits: on the small
shared sessions where the search finds that never compacting is best, the
schedule then keeps within 2% of that at every request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolbudget import compaction, load_transcript
from toolbudget.compaction import Schedule, SlotInfo, _best_cut, size_at
from toolbudget.model import Conversation, Message, Request, Text, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import ReplayTotals, replay_requests
from toolbudget.session import Session


def _small_history(turns: int = 12) -> tuple[Request, list[SlotInfo], list[int]]:
    """Two 8,000-character results in the first turns, then short turns: under 32,000 characters."""
    policy = Policy()
    messages = [Message("user", (Text("task"),))]
    sizes = [400]
    slots = []
    for t in range(turns):
        messages.append(Message("assistant", (Text("x"),)))
        sizes.append(600)
        if t < 2:
            messages.append(Message("tool", (ToolResult(f"c{t}", (Text("r"),)),)))
            sizes.append(8_000)
            slots.append(SlotInfo(len(messages) - 1, t, 8_000, policy.microcompact_min_chars < 8_000, False))
        else:
            messages.append(Message("user", (Text("note"),)))
            sizes.append(300)
    return Request("anthropic", tuple(messages)), slots, sizes


def test_a_small_history_where_aging_has_lost_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    request, slots, sizes = _small_history()
    policy = Policy()
    schedule = Schedule()
    assert schedule.levels(request, slots, sizes, policy) == [0, 0]
    assert schedule.events == []
    last = schedule._points[-1]
    assert last.eager > (1 + compaction.QUIET_EAGER) * last.unmanaged  # aging has been losing
    # The same history without the rule: the cost model alone rewrites it near its end.
    monkeypatch.setattr(compaction, "QUIET_BELOW_CHARS", 0)
    eager_like = Schedule()
    assert eager_like.levels(request, slots, sizes, policy) != [0, 0]
    assert eager_like.events


def test_a_quiet_decision_still_takes_a_start_that_pays_at_its_own_request() -> None:
    """Compacting a big result near the end of the prompt saves more of that request than it
    rewrites: it is pure saving, and a quiet schedule takes it; an old one it leaves."""
    policy = Policy()
    sizes = [500, 200, 20_000, 200, 300]  # task, call, big result, call, small result
    cum = [0]
    for size in sizes:
        cum.append(cum[-1] + size)
    big = SlotInfo(2, 0, 20_000, True, False)
    present = [big]
    targets = [2]  # old enough for its one-line summary
    cut = _best_cut(present, [big.size], targets, [0], 6, cum[5], cum, policy, quiet=True)
    assert cut == big.msg
    # The same result with a long tail after it: its rewrite costs that request more than it saves.
    long_tail = [500, 200, 20_000, *([200, 900] * 30)]
    cum = [0]
    for size in long_tail:
        cum.append(cum[-1] + size)
    saved_here = big.size - size_at(big, 2, policy)
    assert (1.25 - 0.1) * (cum[-1] - cum[2]) > 1.25 * saved_here
    assert _best_cut(present, [big.size], targets, [0], 40, cum[-1], cum, policy, quiet=True) is None
    assert _best_cut(present, [big.size], targets, [0], 40, cum[-1], cum, policy) == big.msg


# Small shared sessions on which the exhaustive search of bench/schedule_bound.py finds that no
# schedule beats never compacting at every request (their bound is 1.000 or within 0.01 of it).
_NEVER_BEATEN = (
    "tau-bench/historical_trajectories/gpt-4o-airline.json#task-7-trial-0",
    "tau-bench/historical_trajectories/gpt-4o-airline.json#task-7-trial-3",
    "tau-bench/historical_trajectories/gpt-4o-airline.json#task-25-trial-1",
    "tau-bench/historical_trajectories/gpt-4o-airline.json#task-6-trial-1",
    "tau-bench/historical_trajectories/gpt-4o-airline.json#task-46-trial-3",
    "tau2-bench/results/whissle/airline_run1.json#task-16-trial-0",
    "tau2-bench/results/whissle/airline_run1.json#task-35-trial-0",
)


def _cumulative(totals: ReplayTotals) -> list[float]:
    out, total = [], 0.0
    for turn in totals.turns:
        total += 0.1 * turn.prefix_tokens + 1.25 * (turn.tokens - turn.prefix_tokens)
        out.append(total)
    return out


def _billed(conversation: Conversation, mode: str | None, name: str) -> list[float]:
    if mode is None:
        return _cumulative(replay_requests(conversation, "anthropic", None))
    with Session(name, store="memory:", policy=Policy(compaction=mode)) as session:

        def manage(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
            managed = session.manage(body, "anthropic")
            return managed.body, managed.report.results_cut

        return _cumulative(replay_requests(conversation, "anthropic", manage))


@pytest.mark.shared
def test_small_sessions_never_beaten_by_leaving_them_alone_stay_within_two_percent(
    trajectories: Path,
) -> None:
    worst = {}
    for name in _NEVER_BEATEN:
        path, conversation_id = name.split("#")
        conversation = next(
            c for c in load_transcript(trajectories / path).conversations if c.id == conversation_id
        )
        unmanaged = _billed(conversation, None, name)
        eager = _billed(conversation, "eager", name)
        ours = _billed(conversation, "cache-aware", name)
        worst[name] = max(o / min(u, e) for o, u, e in zip(ours, unmanaged, eager, strict=True))
    assert max(worst.values()) <= 1.02, worst
