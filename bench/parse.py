"""Benchmark: parsing a whole request body, cold, against orjson.loads + orjson.dumps of it.

A process that meets a session it has not seen (a restarted proxy, a new
pool) parses the whole body: every entry is new to it. This times that parse
for the last request of each shared session (the whole session laid out for
each wire API, as ``toolbudget convert`` writes it), two ways:

- ``parse``: ``wire.parse(body, api)``, no cache;
- ``cold``: ``wire.parse(body, api, EntryCache(measure=message_chars))`` with a
  new cache, which is how a session parses a body (it keys each entry by its
  JSON text and measures each message, for the requests after it).

Each is set beside the round trip of the same body and reported as a ratio,
per API: over all sessions (the sum of the parse times over the sum of the
round trips), at the median and the worst session, and for the largest body.
Every time is the best of ``--repeat`` runs, all of one body's timings
interleaved, with the garbage collector held off. ``--baseline SRC`` times
the ``toolbudget`` of another tree (``src`` of an older commit) beside this
one, in the same process and the same loop, and reports how much faster this
one is.

    python bench/parse.py [--repeat N] [--api API] [--baseline SRC] [--out bench/results/parse.json]
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from _shared import REPO, add_paths, conversations, json_round_trip, require_trajectories, write_result
from toolbudget import to_request, wire


def load_tree(src: str) -> ModuleType:
    """The ``toolbudget`` package of another tree, imported beside this one as ``toolbudget_baseline``."""
    name = "toolbudget_baseline"
    package = Path(src) / "toolbudget"
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        sys.exit(f"no toolbudget package under {src}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def parsers(tree: ModuleType, api: str, body: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    """The two parses of ``body`` by the ``toolbudget`` package ``tree``."""
    parse = tree.wire.parse
    cache = tree.wire.EntryCache
    measure = tree.measure.message_chars
    return {
        "parse": lambda: parse(body, api),
        "cold": lambda: parse(body, api, cache(measure=measure)),
    }


def best_of(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The best time of each of ``fns`` in seconds, over ``repeat`` rounds that run each once, in turn."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.disable()
            start = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - start
            gc.enable()
            best[name] = min(best[name], elapsed)
    return best


def measure_api(
    api: str, sessions: Sequence[tuple[str, Any]], baseline: ModuleType | None, repeat: int
) -> list[dict[str, Any]]:
    """One row per session: the body's size and the best time of each step."""
    import toolbudget

    rows = []
    for name, conversation in sessions:
        raw = orjson.dumps(to_request(conversation, api, model="bench"))
        body = orjson.loads(raw)
        fns: dict[str, Callable[[], Any]] = {"round_trip": functools.partial(json_round_trip, raw)}
        fns.update(parsers(toolbudget, api, body))
        if baseline is not None:
            fns.update({f"baseline_{k}": fn for k, fn in parsers(baseline, api, body).items()})
        times = best_of(fns, repeat)
        rows.append({"source": name, "bytes": len(raw), **{f"{k}_us": v * 1e6 for k, v in times.items()}})
    return rows


def summary(rows: list[dict[str, Any]], steps: Sequence[str]) -> dict[str, Any]:
    """Each step's ratio to the round trip: over all bodies, at the median and worst body, on the largest."""
    largest = max(rows, key=lambda r: r["bytes"])
    total_rt = sum(r["round_trip_us"] for r in rows)
    out: dict[str, Any] = {
        "bodies": len(rows),
        "kb": sum(r["bytes"] for r in rows) / 1024,
        "round_trip_ms": total_rt / 1000,
        "largest": {"source": largest["source"], "kb": largest["bytes"] / 1024},
    }
    for step in steps:
        ratios = [r[f"{step}_us"] / r["round_trip_us"] for r in rows]
        out[step] = {
            "ms": sum(r[f"{step}_us"] for r in rows) / 1000,
            "ratio": sum(r[f"{step}_us"] for r in rows) / total_rt,
            "median_ratio": statistics.median(ratios),
            "worst_ratio": max(ratios),
            "largest_ratio": largest[f"{step}_us"] / largest["round_trip_us"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each timing; the best is kept")
    parser.add_argument("--api", action="append", choices=wire.APIS, help="only this API (repeatable)")
    parser.add_argument("--baseline", metavar="SRC", help="another tree's src, timed beside this one")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "parse.json"))
    add_paths(parser)
    args = parser.parse_args()
    require_trajectories(args.paths)
    baseline = load_tree(args.baseline) if args.baseline else None
    steps = ["parse", "cold"] + (["baseline_parse", "baseline_cold"] if baseline else [])
    sessions = conversations(args.paths)
    results: dict[str, Any] = {"repeat": args.repeat, "baseline": args.baseline, "apis": {}}
    print(
        f"{len(sessions)} sessions; ratios to orjson.loads + orjson.dumps of each body, best of {args.repeat}"
    )
    header = f"{'api':<17} {'MB':>5} {'step':<15} {'all':>6} {'median':>7} {'worst':>6} {'largest':>8}"
    print(header + ("  faster than baseline" if baseline else ""))
    for api in args.api or wire.APIS:
        rows = measure_api(api, sessions, baseline, args.repeat)
        result = summary(rows, steps)
        results["apis"][api] = {**result, "rows": rows}
        for step in steps:
            s = result[step]
            line = (
                f"{api:<17} {result['kb'] / 1024:>5.1f} {step:<15} {s['ratio']:>6.2f} "
                f"{s['median_ratio']:>7.2f} {s['worst_ratio']:>6.2f} {s['largest_ratio']:>8.2f}"
            )
            if baseline and not step.startswith("baseline_"):
                speedup = result[f"baseline_{step}"]["ms"] / s["ms"]
                result[step]["speedup"] = speedup
                line += f"  {speedup:.1f}x"
            print(line)
    write_result(args.out, results)


if __name__ == "__main__":
    main()
