"""Benchmark: the warm loop of this tree beside another tree's, request by request, in one process.

Whole-loop figures of two runs made one after the other on a shared machine
differ by a fifth and more, so a change worth a few percent cannot be told
from them. This runs the loop of ``bench/loop.py`` (each request a new body,
one session seeing requests 1..N in order) with two sessions side by side:
one of this tree's ``toolbudget`` and one of the ``toolbudget`` under
``--baseline SRC`` (``src`` of another commit, imported as
``toolbudget_baseline``, as ``bench/parse.py`` does). Each request goes to
both, each managing it right after its own round trip of the body (so both
meet the processor's caches alike), in an order that alternates from request
to request; each session's loop runs ``--repeat`` times and each request keeps
its best time for each tree. What the machine does meanwhile falls on both.

Per session it prints both trees' whole loop and p95 over the round trip, and
``base/this``: the baseline's whole loop over this tree's, and the median
over requests of the baseline's time over this tree's (above 1: this tree is
faster).

    python bench/loop_ab.py --baseline /path/to/other/src [--sessions 4] [--repeat 5]
                            [--out bench/results/loop_ab.json]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from types import ModuleType
from typing import Any

import orjson

from _shared import REPO, add_paths, conversations, p95, require_trajectories, store_scratch, write_result
from loop import best_round_trip, longest_sessions, request_bodies, settle, warm_up
from parse import load_tree
from toolbudget.model import Conversation
from toolbudget.policy import Policy
from toolbudget.session import Session


def paired_loop(
    name: str, conversation: Conversation, root: str, baseline: ModuleType, repeat: int
) -> dict[str, Any]:
    """Both trees' best time for each request of the session, and its round trip's (seconds)."""
    bodies = [orjson.dumps(body) for body in request_bodies(conversation)]
    ours = [float("inf")] * len(bodies)
    theirs = [float("inf")] * len(bodies)
    trips = [float("inf")] * len(bodies)
    other_policy = baseline.policy.Policy()
    policy = Policy()
    for run in range(repeat):
        this = Session(f"ab-this-{run}", store=f"dir:{root}/this", policy=policy)
        base = baseline.session.Session(f"ab-base-{run}", store=f"dir:{root}/base", policy=other_policy)
        try:
            for k, raw in enumerate(bodies):
                sides = [("this", this), ("base", base)]
                if (k + run) % 2:
                    sides.reverse()
                for side, session in sides:
                    settle(session)
                    body = orjson.loads(raw)  # a body of its own for each: nothing shared by identity
                    trip = best_round_trip(raw)
                    gc.disable()
                    start = time.perf_counter()
                    session.manage(body, "anthropic")
                    took = time.perf_counter() - start
                    gc.enable()
                    trips[k] = min(trips[k], trip)
                    if side == "this":
                        ours[k] = min(ours[k], took)
                    else:
                        theirs[k] = min(theirs[k], took)
        finally:
            this.close()
            base.close()
    return {
        "session": name,
        "requests": len(bodies),
        "this_loop_ratio": sum(ours) / sum(trips),
        "base_loop_ratio": sum(theirs) / sum(trips),
        "this_p95_ratio": p95([o / t for o, t in zip(ours, trips, strict=True)]),
        "base_p95_ratio": p95([b / t for b, t in zip(theirs, trips, strict=True)]),
        "base_over_this_loop": sum(theirs) / sum(ours),
        "base_over_this_median": statistics.median(b / o for b, o in zip(theirs, ours, strict=True)),
        "this_ms": [o * 1000 for o in ours],
        "base_ms": [b * 1000 for b in theirs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the src directory of the tree to compare with")
    parser.add_argument("--sessions", type=int, default=4, help="the longest shared sessions to run")
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs of each loop; each request keeps its best"
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "loop_ab.json"))
    add_paths(parser)
    args = parser.parse_args()
    require_trajectories(args.paths)
    baseline = load_tree(args.baseline)
    warm_up(Policy())
    warm_up(baseline.policy.Policy(), baseline.session.Session)

    chosen = longest_sessions(conversations(args.paths), args.sessions)
    print(
        f"{'session':<44} {'reqs':>5} {'loop':>6} {'base':>6} {'p95':>6} {'base':>6} "
        f"{'base/this':>9} {'median':>7}"
    )
    rows = []
    with store_scratch("bench-ab-") as root:
        for name, conversation in chosen:
            row = paired_loop(name, conversation, root, baseline, args.repeat)
            rows.append(row)
            print(
                f"{name[-44:]:<44} {row['requests']:>5} {row['this_loop_ratio']:>6.2f} "
                f"{row['base_loop_ratio']:>6.2f} {row['this_p95_ratio']:>6.1f} {row['base_p95_ratio']:>6.1f} "
                f"{row['base_over_this_loop']:>9.3f} {row['base_over_this_median']:>7.3f}",
                flush=True,
            )
    write_result(args.out, {"baseline": args.baseline, "rows": rows})


if __name__ == "__main__":
    main()
