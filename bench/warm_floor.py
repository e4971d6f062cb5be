"""Benchmark: the least any ``manage`` must do for an appended turn, against the JSON round trip.

A warm request that only appends a turn still has to read the new entries,
check their pairing, tell that the earlier history is the one it managed last
time, and say what it did. This measures those steps alone, on every request
of the longest shared sessions, each on the state the session was in when the
request came (what the session kept from the request before), and sets them
beside the round trip of the same body (best of three ``orjson.loads`` +
``orjson.dumps``) and beside the whole warm ``manage``:

- ``parse``: the new entries read (``incremental.parse_entries``);
- ``pairing``: their check against the earlier history (``pairing.appends_validly``);
- ``report``: the ``Report`` object built;
- ``prefix``: the history's JSON text checked against the last one's
  (``incremental.entries_after``: one ``orjson.dumps`` of the history and a
  comparison), which grows with the history where the rest do not.

``floor`` is parse + pairing + report; ``floor+prefix`` adds the prefix
check. Each step is timed as the best of ``--repeat`` runs. The p95 of each
over requests is what the warm p95 target (3x the round trip) can be held
against: no ``manage`` that does these steps can beat them.

A request that cuts must also have the new originals its markers name in the
store before it goes out, and a store that hangs must not hang it, so the
write goes to the store's worker thread and is waited for within the
request's bound (:mod:`toolbudget.store.guard`). ``write`` is that alone: the
very originals the warm ``manage`` wrote for the request, written again as
new files of a new session of the same kind of store (best of
``--write-repeat``), through the guard; ``write here`` writes them on the
caller's thread instead, which no store that may hang allows. ``cut floor``
is floor + prefix + write: the p95 of that over requests, and the share of
requests that write at all, say whether any ``manage`` keeping both promises
can meet the target on this machine, whatever its previews cost.

    python bench/warm_floor.py [--sessions 10] [--repeat 50] [--write-repeat 5]
                               [--out bench/results/warm_floor.json]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from _shared import REPO, add_paths, p95, store_scratch
from loop import LARGE, best_round_trip, request_bodies, warmed_sessions
from toolbudget.incremental import Prefix, entries_after, parse_entries
from toolbudget.model import Conversation, Request
from toolbudget.pairing import appends_validly
from toolbudget.policy import Policy
from toolbudget.session import Report, Session
from toolbudget.store._recordlog import MARK
from toolbudget.store.dir import DirStore
from toolbudget.store.guard import Deadline, StoreGuard


def best_of(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def steps(
    prefix: Prefix, body: dict[str, Any], entries: list[Any], request: Request, last: Report, repeat: int
) -> dict[str, float]:
    """The best time of each least step for ``body``, appended to ``prefix``'s history."""
    gc.disable()
    try:
        return {
            "prefix": best_of(lambda: entries_after(prefix, body), repeat),
            "parse": best_of(lambda: parse_entries("anthropic", entries), repeat),
            "pairing": best_of(lambda: appends_validly(request, prefix.count, prefix.calls), repeat),
            "report": best_of(lambda: replace(last, keys_written=(), store_fallbacks=0), repeat),
        }
    finally:
        gc.enable()


def write_floor(root: str, items: dict[str, bytes], repeat: int, tag: str) -> tuple[float, float]:
    """The best time to write ``items`` as new entries through a store guard, and on this thread."""
    store = DirStore(root, sweep=False)
    guard = StoreGuard(store.url)
    try:
        store.hold(f"{tag}-held")  # the session's directory exists; each try writes new files in it
        via_worker = here = float("inf")
        for n in range(repeat):
            renamed = {f"{n:04x}{key[4:]}": data for key, data in items.items()}
            start = time.perf_counter()
            guard.call(Deadline(10.0), store.put_many, f"{tag}-held", renamed)
            via_worker = min(via_worker, time.perf_counter() - start)
            renamed = {f"{n:04x}{key[4:]}": data for key, data in items.items()}
            start = time.perf_counter()
            store.put_many(f"{tag}-here", renamed)
            here = min(here, time.perf_counter() - start)
        return via_worker, here
    finally:
        guard.close()
        store.close()


def session_floor(
    conversation: Conversation, policy: Policy, root: str, repeat: int, write_repeat: int = 5
) -> dict[str, Any]:
    """Each appended request's steps, its round trip and its warm ``manage`` (seconds)."""
    rows: list[dict[str, float]] = []
    store = DirStore(root)
    written: dict[str, bytes] = {}
    put_each = store._put_each

    def noted(session: str, items: dict[str, bytes]) -> set[str]:
        written.update((key, data) for key, data in items.items() if not data.startswith(MARK))
        return put_each(session, items)

    store._put_each = noted  # type: ignore[method-assign]
    with Session("floor", store=store, policy=policy) as session:
        for k, body in enumerate(request_bodies(conversation)):
            trip = best_round_trip(orjson.dumps(body))
            prefix = session._prefix
            step: dict[str, float] = {}
            if prefix is not None:
                found = entries_after(prefix, body)
                if found is not None and found[0]:
                    entries = found[0]
                    new = parse_entries("anthropic", entries)
                    request = replace(prefix.request, messages=(*prefix.request.messages, *new))
                    last = session.last_report
                    assert last is not None
                    step = steps(prefix, body, entries, request, last, repeat)
            written.clear()
            gc.disable()
            start = time.perf_counter()
            session.manage(body, "anthropic")
            took = time.perf_counter() - start
            gc.enable()
            if step:
                step["write"], step["write_here"] = (
                    write_floor(root, dict(written), write_repeat, f"w{k}") if written else (0.0, 0.0)
                )
                step["trip"] = trip
                step["manage"] = took
                step["bytes"] = float(len(orjson.dumps(body)))
                rows.append(step)
    store.close()
    return {"requests": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--write-repeat", type=int, default=5, help="tries of each request's writes")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "warm_floor.json"))
    add_paths(parser)
    args = parser.parse_args()
    policy, longest = warmed_sessions(args)
    print(
        f"{'session':<40} {'reqs':>4} {'trip us':>8} {'floor us':>8} {'manage us':>9} "
        f"{'p95 floor':>9} {'p95 +prefix':>11} {'p95 manage':>10} {'p95 manage L':>12}"
    )
    out = []
    with store_scratch() as tmp:
        for name, conversation in longest:
            rows = session_floor(conversation, policy, tmp, args.repeat, args.write_repeat)["requests"]
            floor = [r["parse"] + r["pairing"] + r["report"] for r in rows]
            with_prefix = [f + r["prefix"] for f, r in zip(floor, rows, strict=True)]
            cut_floor = [f + r["write"] for f, r in zip(with_prefix, rows, strict=True)]
            cut_here = [f + r["write_here"] for f, r in zip(with_prefix, rows, strict=True)]
            writes = [r["write"] for r in rows if r["write"]]
            writes_here = [r["write_here"] for r in rows if r["write_here"]]
            manage = [r["manage"] / r["trip"] for r in rows]
            large = [m for m, r in zip(manage, rows, strict=True) if r["bytes"] >= LARGE]
            small = [r for r in rows if r["bytes"] < LARGE] or rows
            row = {
                "session": name,
                "requests": len(rows),
                "median_trip_us_small": statistics.median(r["trip"] for r in small) * 1e6,
                "median_floor_us_small": statistics.median(
                    r["parse"] + r["pairing"] + r["report"] for r in small
                )
                * 1e6,
                "median_manage_us_small": statistics.median(r["manage"] for r in small) * 1e6,
                "p95_floor": p95([f / r["trip"] for f, r in zip(floor, rows, strict=True)]),
                "p95_floor_prefix": p95([f / r["trip"] for f, r in zip(with_prefix, rows, strict=True)]),
                "writing_share": len(writes) / len(rows),
                "median_write_us": statistics.median(writes) * 1e6 if writes else None,
                "median_write_here_us": statistics.median(writes_here) * 1e6 if writes_here else None,
                "p95_cut_floor": p95([f / r["trip"] for f, r in zip(cut_floor, rows, strict=True)]),
                "p95_cut_floor_here": p95([f / r["trip"] for f, r in zip(cut_here, rows, strict=True)]),
                "over_3x_cut_floor": sum(f / r["trip"] > 3 for f, r in zip(cut_floor, rows, strict=True))
                / len(rows),
                "p95_manage": p95(manage),
                "p95_manage_large": p95(large) if large else None,
                "median_parts_us_small": {
                    part: statistics.median(r[part] for r in small) * 1e6
                    for part in ("prefix", "parse", "pairing", "report")
                },
                "per_request": rows,
            }
            out.append(row)
            print(
                f"{name.split('#')[-1][-40:]:<40} {len(rows):>4} {row['median_trip_us_small']:>8.1f} "
                f"{row['median_floor_us_small']:>8.1f} {row['median_manage_us_small']:>9.1f} "
                f"{row['p95_floor']:>9.2f} {row['p95_floor_prefix']:>11.2f} {row['p95_manage']:>10.2f} "
                f"{row['p95_manage_large'] or 0:>12.2f}",
                flush=True,
            )
            print(
                "  median us (bodies < 100 KB): "
                + "  ".join(f"{k} {v:.1f}" for k, v in row["median_parts_us_small"].items())
            )
            if writes:
                print(
                    f"  requests writing an original: {row['writing_share']:.0%}, median write "
                    f"{row['median_write_us']:.0f} us via the worker, {row['median_write_here_us']:.0f} us "
                    f"here; p95 cut floor {row['p95_cut_floor']:.2f}x ({row['p95_cut_floor_here']:.2f}x "
                    f"written here); over 3x: {row['over_3x_cut_floor']:.0%} of requests"
                )
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({"rows": out}, option=orjson.OPT_INDENT_2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
