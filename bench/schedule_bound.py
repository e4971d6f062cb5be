"""Benchmark: the best any compaction schedule can guarantee when a session may end at any request.

A schedule decides at each request from the history so far; the client
resends that history unchanged, so the schedule's choices up to request k are
the same whether the session ends at k or goes on. A session cut after request
k is a session too (the agent finished there). So the per-session target "at
most 2% above the cheaper of unmanaged and eager" can only be met on every
session if one sequence of choices meets it at every request k of a session,
against that prefix's own unmanaged and eager costs.

For each shared session with few compactable results, this script searches
every schedule exactly: at each request, every combination of levels each
result may have at its age (none, preview, summary; un-compacting included).
Bodies are rendered by the real pipeline and billed as ``bench/cache.py``
bills them (common prefix with the previous request read at 0.1, the rest
written at 1.25). A Pareto search over (cost so far, worst ratio so far) finds
the smallest worst-over-prefixes ratio any schedule reaches: the *bound*. A
bound above 1.02 means no schedule can meet the target on every session that
starts like this one. The same numbers for toolbudget's cache-aware schedule
are printed beside it.

The bound of a session is reached by a path chosen knowing where the session
ends. A schedule cannot know that: at request j it sees the same bytes
whether the session ends there or goes on. ``online slack`` is the least
margin over the bound that one path keeps on the session *and on every one
of its prefixes at once* (each against its own bound), found exactly by
bisection over feasibility. It is the least any schedule that decides from
the history can be above the bound on this session or on one of the sessions
it was at an earlier request; a slack above 0.02 means no such schedule is
within 0.02 of the bound everywhere on this session's requests.

``--show TEXT`` prints, for each session whose name contains TEXT, one line per
request: the levels of the compactable results on one best schedule's path and
on toolbudget's, and each one's bill so far against the cheaper of unmanaged
and eager.

    python bench/schedule_bound.py [--max-slots 5] [--show TEXT] [--out bench/results/schedule_bound.json]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from _shared import REPO, add_paths, conversations, require_trajectories, write_result
from cache import toolbudget_manager
from toolbudget import to_request, wire
from toolbudget.compaction import LEVEL_NONE, Schedule, SlotInfo, eager_levels, turn_starts
from toolbudget.model import Conversation, Request, Text, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import (
    PRICE_READ,
    PRICE_WRITE,
    ReplayTotals,
    common_prefix,
    prompt_text,
    replay_requests,
    requests_of,
    tokens,
)
from toolbudget.session import Session

State = tuple[int, ...]


class Forced(Schedule):
    """A schedule that applies the levels it is told, and remembers what it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.state: State = ()
        self.eligible: list[int] = []
        self.allowed: list[int] = []

    def levels(
        self, request: Request, slots: Sequence[SlotInfo], sizes: Sequence[int], policy: Policy
    ) -> list[int]:
        self.fired_now = False
        self.eligible = [k for k, s in enumerate(slots) if s.eligible]
        ages = eager_levels(slots, len(turn_starts(request.messages)), policy)
        self.allowed = [ages[k] for k in self.eligible]
        levels = [LEVEL_NONE] * len(slots)
        for k, level in zip(self.eligible, self.state, strict=False):
            levels[k] = level
        return levels


def continued(conversation: Conversation, turns: int) -> Conversation:
    """The session going on for ``turns`` more turns whose tool results are a word each.

    Each turn is the session's last tool call again (fresh ids), answered ``done``:
    an agent still at work whose commands print little, so no result is added
    that could be compacted, and the search stays exact. The session itself is
    a prefix of what this gives.
    """
    messages = list(conversation.messages)
    if messages and any(isinstance(p, ToolCall) for p in messages[-1].parts):
        messages.pop()  # a last call never answered: no request of the session holds it
    last = next(
        (
            i
            for i in range(len(messages) - 1, 0, -1)
            if any(isinstance(p, ToolCall) for p in messages[i].parts)
        ),
        None,
    )
    if last is None or last + 1 >= len(messages):
        return conversation
    call, answer = messages[last], messages[last + 1]
    for n in range(turns):
        ids = {p.id: f"{p.id}-more{n}" for p in call.parts if isinstance(p, ToolCall) and p.id}
        messages.append(
            replace(
                call,
                parts=tuple(
                    replace(p, id=ids[p.id]) if isinstance(p, ToolCall) and p.id else p for p in call.parts
                ),
            )
        )
        messages.append(
            replace(
                answer,
                parts=tuple(
                    replace(p, call_id=ids.get(p.call_id or "", p.call_id), content=(Text("done"),))
                    if isinstance(p, ToolResult)
                    else p
                    for p in answer.parts
                ),
            )
        )
    return replace(conversation, id=f"{conversation.id}+{turns}", messages=tuple(messages))


def step_cost(previous: str, text: str) -> float:
    prefix = common_prefix(previous, text) if previous else 0
    return PRICE_READ * tokens(prefix) + PRICE_WRITE * (tokens(len(text)) - tokens(prefix))


def cumulative(totals: ReplayTotals) -> list[float]:
    out, total = [], 0.0
    for turn in totals.turns:
        total += PRICE_READ * turn.prefix_tokens + PRICE_WRITE * (turn.tokens - turn.prefix_tokens)
        out.append(total)
    return out


def rendered_states(
    name: str, conversation: Any, policy: Policy, max_slots: int
) -> tuple[list[dict[State, str]], list[State]] | None:
    """For every request, the prompt text under every combination of allowed levels, and eager's levels.

    ``None`` when more than ``max_slots`` results may be compacted (the search grows as 3^slots).
    """
    forced = Forced()
    session = Session(f"bound-{name}", store="memory:", policy=policy)
    session._schedule = forced
    out: list[dict[State, str]] = []
    tops: list[State] = []
    with session:
        for prefix in requests_of(conversation):
            request = wire.parse(to_request(prefix, "anthropic", model="replay"), "anthropic")
            forced.state = ()
            session.manage_request(request)  # learns which results may be compacted, and how far
            if len(forced.eligible) > max_slots:
                return None
            tops.append(tuple(forced.allowed))
            choices = [range(a + 1) for a in forced.allowed]
            texts: dict[State, str] = {}
            for state in itertools.product(*choices):
                forced.state = state
                fixed, _ = session.manage_request(request)
                texts[state] = prompt_text(fixed)
            out.append(texts)
    return out, tops


def bound(texts: list[dict[State, str]], best: list[float]) -> tuple[float, float]:
    """(smallest worst-over-prefixes ratio of any schedule, smallest final cost of any schedule)."""
    _memo_for(texts)
    labels: dict[State, list[tuple[float, float]]] = {
        s: [(step_cost("", t), step_cost("", t) / best[0])] for s, t in texts[0].items()
    }
    for j in range(1, len(texts)):
        labels = _advance(labels, texts[j - 1], texts[j], best[j], float("inf"))
    final = [label for pareto in labels.values() for label in pareto]
    return min(w for _, w in final), min(c for c, _ in final)


def prefix_bounds(texts: list[dict[State, str]], best: list[float]) -> list[float]:
    """The bound of every prefix: entry j is the bound of the session cut after request j.

    A Pareto label at request j holds a schedule's cost and worst ratio up to
    j, which nothing later changes, so the smallest worst among the labels at
    j is the bound of the session that ends there.
    """
    _memo_for(texts)
    out = [min(step_cost("", t) / best[0] for t in texts[0].values())]
    labels: dict[State, list[tuple[float, float]]] = {
        s: [(step_cost("", t), step_cost("", t) / best[0])] for s, t in texts[0].items()
    }
    for j in range(1, len(texts)):
        labels = _advance(labels, texts[j - 1], texts[j], best[j], float("inf"))
        out.append(min(w for pareto in labels.values() for _, w in pareto))
    return out


_steps: dict[tuple[int, int, State, State], tuple[dict[State, str], dict[State, str], float]] = {}
_steps_of: list[list[dict[State, str]]] = []
"""The session whose moves ``_steps`` holds: the memo is dropped when a search of another begins."""


def _memo_for(texts: list[dict[State, str]]) -> None:
    """Keep ``_steps`` for ``texts`` alone, so that no other session's renderings stay alive."""
    if not _steps_of or _steps_of[0] is not texts:
        _steps.clear()
        _steps_of[:] = [texts]


def _step(before: dict[State, str], texts: dict[State, str], old: State, new: State) -> float:
    """``step_cost`` of one move, remembered: the bisection walks the same moves many times.

    Keyed by the identity of the two requests' renderings, and kept with them: an id is
    reused once its object is gone, and a cost remembered for a session since dropped
    would otherwise be taken for a move of a new one (it made a search of made-up
    sessions wrong, now and then, depending on where the allocator put them)."""
    key = (id(before), id(texts), old, new)
    known = _steps.get(key)
    if known is not None and known[0] is before and known[1] is texts:
        return known[2]
    cost = step_cost(before[old], texts[new])
    _steps[key] = (before, texts, cost)
    return cost


def _advance(
    labels: dict[State, list[tuple[float, float]]],
    before: dict[State, str],
    texts: dict[State, str],
    best: float,
    ceiling: float,
) -> dict[State, list[tuple[float, float]]]:
    """One request further: every state's Pareto front of (cost, worst), dropping worsts over ``ceiling``."""
    fresh: dict[State, list[tuple[float, float]]] = {}
    for new in texts:
        candidates = []
        for old, pareto in labels.items():
            step = _step(before, texts, old, new)
            for cost, worst in pareto:
                total = cost + step
                ratio = max(worst, total / best)
                if ratio <= ceiling:
                    candidates.append((total, ratio))
        candidates.sort()
        kept: list[tuple[float, float]] = []
        for cost, worst in candidates:
            if not kept or worst < kept[-1][1]:
                kept.append((cost, worst))
        if kept:
            fresh[new] = kept
    return fresh


def online_slack(texts: list[dict[State, str]], best: list[float], bounds: list[float]) -> float:
    """The least slack any schedule that decides from the history alone needs on this session.

    Such a schedule makes the same choices up to request j whether the
    session ends at j or goes on: it cannot tell the two apart, because the
    client sends it the same bytes. So it is within ``slack`` of the bound on
    this session *and on every one of its prefixes* only if one path keeps
    its worst ratio up to every request j within ``bounds[j] + slack``. This
    finds the smallest such slack (to 1e-4) by bisection over feasibility.
    A value above 0.02 means: whatever a schedule does at the requests where
    this session and one of its prefixes look the same, it is more than 0.02
    above the bound on one of the two.
    """
    _memo_for(texts)

    def feasible(slack: float) -> bool:
        labels: dict[State, list[tuple[float, float]]] = {}
        for state, text in texts[0].items():
            cost = step_cost("", text)
            if cost / best[0] <= bounds[0] + slack + 1e-12:
                labels[state] = [(cost, cost / best[0])]
        for j in range(1, len(texts)):
            if not labels:
                return False
            labels = _advance(labels, texts[j - 1], texts[j], best[j], bounds[j] + slack + 1e-12)
        return bool(labels)

    low, high = 0.0, 0.05
    while not feasible(high):
        low, high = high, high * 2
    while high - low > 1e-4:
        middle = (low + high) / 2
        if feasible(middle):
            high = middle
        else:
            low = middle
    return high


def best_path(texts: list[dict[State, str]], best: list[float]) -> list[State]:
    """The levels, request by request, of one schedule that reaches the bound (at the least cost)."""
    Label = tuple[float, float, tuple[State, int] | None]
    labels: dict[State, list[Label]] = {
        s: [(step_cost("", t), step_cost("", t) / best[0], None)] for s, t in texts[0].items()
    }
    history = [labels]
    for j in range(1, len(texts)):
        fresh: dict[State, list[Label]] = {}
        for new, text in texts[j].items():
            candidates: list[Label] = []
            for old, pareto in labels.items():
                step = step_cost(texts[j - 1][old], text)
                for n, (cost, worst, _) in enumerate(pareto):
                    candidates.append((cost + step, max(worst, (cost + step) / best[j]), (old, n)))
            candidates.sort(key=lambda c: (c[0], c[1]))
            kept: list[Label] = []
            for label in candidates:
                if not kept or label[1] < kept[-1][1]:
                    kept.append(label)
            fresh[new] = kept
        labels = fresh
        history.append(labels)
    state, n = min(
        ((s, n) for s, pareto in labels.items() for n in range(len(pareto))),
        key=lambda sn: (labels[sn[0]][sn[1]][1], labels[sn[0]][sn[1]][0]),
    )
    path = [state]
    for j in range(len(texts) - 1, 0, -1):
        back = history[j][state][n][2]
        assert back is not None
        state, n = back
        path.append(state)
    return path[::-1]


def show(
    name: str, conversation: Any, texts: list[dict[State, str]], best: list[float], policy: Policy
) -> None:
    """One line per request: the bound's path and toolbudget's, with each one's running ratio."""
    path = best_path(texts, best)
    manage, session = toolbudget_manager(replace(policy, compaction="cache-aware"), f"bound-{name}")
    ours: list[State | None] = []
    with session:  # named as the search's session, so the markers' keys are the same text
        for j, prefix in enumerate(requests_of(conversation)):
            body, _ = manage(to_request(prefix, "anthropic", model="replay"))
            text = prompt_text(wire.parse(body, "anthropic"))
            ours.append(next((s for s, t in texts[j].items() if t == text), None))
    print(f"--- {name}")
    print(f"{'request':>7} {'bound path':<18} {'cache-aware':<18} {'bound so far':>14} {'ours so far':>14}")
    bound_cost = ours_cost = 0.0
    for j in range(len(texts)):
        bound_cost += step_cost(texts[j - 1][path[j - 1]] if j else "", texts[j][path[j]])
        mine, before = ours[j], ours[j - 1] if j else ()
        if mine is None or before is None:
            ours_cost = float("nan")
        else:
            ours_cost += step_cost(texts[j - 1][before] if j else "", texts[j][mine])
        ratios = f"{bound_cost / best[j]:>14.3f} {ours_cost / best[j]:>14.3f}"
        print(f"{j:>7} {path[j]!s:<18} {mine!s:<18} {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-slots", type=int, default=5, help="sessions with at most this many results")
    parser.add_argument("--show", help="print both paths for the sessions whose name contains this")
    parser.add_argument(
        "--continue",
        dest="more",
        type=int,
        default=0,
        help="search each session going on for this many more turns of one-word results",
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "schedule_bound.json"))
    add_paths(parser)
    args = parser.parse_args()
    require_trajectories(args.paths)
    base = Policy()
    rows = []
    for name, conversation in conversations(args.paths):
        if args.more:
            conversation = continued(conversation, args.more)
            name = f"{name}+{args.more}"
        found = rendered_states(name, conversation, base, args.max_slots)
        if found is None or not found[0]:
            continue
        texts, tops = found
        slots = len(tops[-1])
        if slots == 0:
            continue
        unmanaged = cumulative(replay_requests(conversation, "anthropic", None))
        runs: dict[str, list[float]] = {}
        for mode in ("eager", "cache-aware"):
            manage, session = toolbudget_manager(replace(base, compaction=mode), f"{mode}-{name}")
            with session:
                runs[mode] = cumulative(replay_requests(conversation, "anthropic", manage))
        # The search renders eager's path too; it must bill exactly as the real eager replay does.
        eager_path = [t[top] for t, top in zip(texts, tops, strict=True)]
        eager_check = sum(step_cost(eager_path[j - 1] if j else "", t) for j, t in enumerate(eager_path))
        if abs(eager_check - runs["eager"][-1]) > 1e-6:
            sys.exit(f"{name}: the search bills eager at {eager_check}, the replay at {runs['eager'][-1]}")
        best = [min(u, e) for u, e in zip(unmanaged, runs["eager"], strict=True)]
        worst_possible, cheapest = bound(texts, best)
        bounds = prefix_bounds(texts, best)
        if abs(bounds[-1] - worst_possible) > 1e-12:
            sys.exit(f"{name}: the whole session's bound is {worst_possible}, its last prefix's {bounds[-1]}")
        slack = online_slack(texts, best, bounds)
        _steps.clear()  # keyed by the ids of this session's texts
        if args.show and args.show in name:
            show(name, conversation, texts, best, base)
        ours = runs["cache-aware"]
        # Toolbudget's own margin over the bound of every prefix: what online_slack is the least of.
        running, ours_slack = 0.0, 0.0
        for cost, b, prefix_bound in zip(ours, best, bounds, strict=True):
            running = max(running, cost / b)
            ours_slack = max(ours_slack, running - prefix_bound)
        row: dict[str, Any] = {
            "session": name,
            "requests": len(texts),
            "compactable_results": slots,
            "cache_aware_final_ratio": ours[-1] / best[-1],
            "cache_aware_worst_prefix_ratio": max(c / b for c, b in zip(ours, best, strict=True)),
            "bound_worst_prefix_ratio": worst_possible,
            "offline_cheapest_final_ratio": cheapest / best[-1],
            "online_slack": slack,
            "cache_aware_prefix_slack": ours_slack,
        }
        rows.append(row)
        print(
            f"{name[-60:]:<60} n={row['requests']:>3} slots={slots} "
            f"ours final {row['cache_aware_final_ratio']:.3f} "
            f"worst-prefix {row['cache_aware_worst_prefix_ratio']:.3f} | bound {worst_possible:.3f} "
            f"offline {row['offline_cheapest_final_ratio']:.3f} | over prefixes' bounds: "
            f"least possible {slack:.3f}, ours {ours_slack:.3f}",
            flush=True,
        )
    over = [r for r in rows if r["bound_worst_prefix_ratio"] > 1.02]
    behind = sorted(
        (r["cache_aware_worst_prefix_ratio"] - r["bound_worst_prefix_ratio"], r["session"]) for r in rows
    )[::-1]
    summary = {
        "sessions_searched": len(rows),
        "sessions_where_no_schedule_meets_2_percent_on_every_prefix": len(over),
        "largest_bound": max((r["bound_worst_prefix_ratio"] for r in rows), default=None),
        "cache_aware_worst_prefix_ratio_max": max(
            (r["cache_aware_worst_prefix_ratio"] for r in rows), default=None
        ),
        "sessions_where_cache_aware_is_more_than_0.02_above_the_bound": sum(1 for d, _ in behind if d > 0.02),
        "furthest_above_the_bound": [f"{name} +{d:.3f}" for d, name in behind[:5]],
        "sessions_where_no_history_bound_schedule_is_within_0.02_of_the_bound_on_it_and_its_prefixes": [
            f"{r['session']} slack {r['online_slack']:.4f}" for r in rows if r["online_slack"] > 0.02
        ],
        "sessions_where_cache_aware_is_more_than_0.02_above_the_least_possible_slack": [
            f"{r['session']} ours {r['cache_aware_prefix_slack']:.3f}, least {r['online_slack']:.3f}"
            for r in rows
            if r["cache_aware_prefix_slack"] > r["online_slack"] + 0.02
        ],
    }
    print()
    for key, value in summary.items():
        print(f"{key:<64} {value}")
    write_result(args.out, {"summary": summary, "sessions": rows})


if __name__ == "__main__":
    main()
