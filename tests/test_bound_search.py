"""The exact searches of ``bench/schedule_bound.py`` against brute force on small made-up sessions.

The benchmark's claims (the bound of every prefix, and the least margin one
schedule keeps over the bounds of a session and all its prefixes at once) rest
on a Pareto search and a bisection over feasibility. Here every path of a few
requests is enumerated and the same figures computed the slow way.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import schedule_bound


def _session(seed: int) -> tuple[list[dict[tuple[int, ...], str]], list[float]]:
    """Requests that grow, each with a few renderings (a state each) sharing prefixes by chance."""
    rng = random.Random(seed)
    blocks = ["".join(rng.choice("abcdef") for _ in range(rng.randrange(200, 4000))) for _ in range(6)]
    texts: list[dict[tuple[int, ...], str]] = []
    grown = ""
    for _ in range(rng.randrange(3, 6)):
        grown += rng.choice(blocks)
        states: dict[tuple[int, ...], str] = {}
        for s in range(rng.randrange(1, 4)):
            cut = rng.randrange(0, len(grown) // 2 + 1)
            other = grown[:cut] + blocks[s][: rng.randrange(1, 300)] + grown[-300:]
            states[(s,)] = grown if s == 0 else other
        texts.append(states)
    best = []
    total = 0.0
    for j, states in enumerate(texts):
        total += schedule_bound.step_cost(texts[j - 1][(0,)] if j else "", states[(0,)])
        best.append(total * rng.uniform(0.85, 1.0))  # the cheaper of two references, made up
    return texts, best


def _brute(texts: list[dict[tuple[int, ...], str]], best: list[float]) -> tuple[list[float], float]:
    paths = list(itertools.product(*(list(t) for t in texts)))
    worsts = []
    for path in paths:
        cost, worst, running = 0.0, 0.0, []
        for j, state in enumerate(path):
            cost += schedule_bound.step_cost(texts[j - 1][path[j - 1]] if j else "", texts[j][state])
            worst = max(worst, cost / best[j])
            running.append(worst)
        worsts.append(running)
    bounds = [min(w[j] for w in worsts) for j in range(len(texts))]
    least = min(max(w[j] - bounds[j] for j in range(len(texts))) for w in worsts)
    return bounds, least


@pytest.mark.parametrize("seed", range(40))
def test_prefix_bounds_and_the_least_margin_are_what_every_path_says(seed: int) -> None:
    texts, best = _session(seed)
    bounds, least = _brute(texts, best)
    found = schedule_bound.prefix_bounds(texts, best)
    assert found == pytest.approx(bounds, abs=1e-12)
    assert schedule_bound.bound(texts, best)[0] == pytest.approx(bounds[-1], abs=1e-12)
    slack = schedule_bound.online_slack(texts, best, found)
    assert least - 1e-9 <= slack <= least + 1e-4  # bisection to 1e-4, never below the truth


def test_a_move_remembered_for_a_dropped_session_is_never_taken_for_a_new_ones() -> None:
    """The search remembers each move's cost by the identity of the renderings; CPython hands a
    dropped dict's address to the next one made, so without keeping them, a new session's move
    got the cost of an old one (which failed the search of a made-up session now and then)."""
    for _ in range(20):
        old_before: dict[tuple[int, ...], str] = {(0,): "abc" * 50}
        old_texts: dict[tuple[int, ...], str] = {(0,): "abcdef" * 50}
        schedule_bound._step(old_before, old_texts, (0,), (0,))
        del old_texts  # freed in this order, the next two dicts take their addresses
        del old_before
        before: dict[tuple[int, ...], str] = {(0,): "xyz" * 50}
        texts: dict[tuple[int, ...], str] = {(0,): "q" * 900}
        want = schedule_bound.step_cost(before[(0,)], texts[(0,)])
        assert schedule_bound._step(before, texts, (0,), (0,)) == want
