"""Benchmark: validate + repair against orjson.loads + orjson.dumps of the same body.

Target (issue "Foundation"): on the largest real request body, validate + repair
costs at most 2x a plain JSON round trip. Both sides are timed in the same run,
interleaved, and reported as a ratio, because this machine is shared and noisy.

Bodies are the final requests of the shared transcripts, converted to every
wire API; the largest by size is the one the target names, and the one with
the most messages is reported too. A damaged copy (one result dropped) is timed
as well, since that is the path that rebuilds and renders.

    python bench/pairing.py [--repeat N] [--out bench/results/pairing.json]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from _shared import REPO, add_paths, conversations, require_trajectories, timed, write_result
from toolbudget import repair, to_request, validate, wire
from toolbudget.model import ToolResult


def bodies(api: str, paths: Sequence[str] = ()) -> list[tuple[str, bytes]]:
    return [
        (name, orjson.dumps(to_request(conversation, api, model="bench")))
        for name, conversation in conversations(paths)
    ]


def history_length(body: dict[str, Any]) -> int:
    history = body.get("messages") or body.get("input") or body.get("contents") or []
    return len(history) if isinstance(history, list) else 1


def damaged(raw: bytes, api: str) -> dict[str, Any]:
    request = wire.parse(orjson.loads(raw), api)
    messages = list(request.messages)
    for i, message in enumerate(messages):
        kept = tuple(p for p in message.parts if not isinstance(p, ToolResult))
        if len(kept) != len(message.parts):
            if kept:
                messages[i] = replace(message, parts=kept)
            else:
                del messages[i]
            break
    return wire.render(replace(request, messages=tuple(messages)))


def measure(raw: bytes, api: str, repeat: int) -> dict[str, Any]:
    body = orjson.loads(raw)
    broken = damaged(raw, api)
    base = timed(lambda: orjson.dumps(orjson.loads(raw)), repeat)
    ours = timed(lambda: (validate(body, api), repair(body, api)), repeat)
    ours_broken = timed(lambda: (validate(broken, api), repair(broken, api)), repeat)
    return {
        "bytes": len(raw),
        "messages": history_length(body),
        "json_roundtrip_ms": base * 1000,
        "validate_repair_ms": ours * 1000,
        "validate_repair_damaged_ms": ours_broken * 1000,
        "ratio": ours / base,
        "ratio_damaged": ours_broken / base,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "pairing.json"))
    add_paths(parser)
    args = parser.parse_args()
    require_trajectories(args.paths)
    results: dict[str, Any] = {}
    print(
        f"{'api':<18} {'body':<10} {'KB':>7} {'msgs':>5} "
        f"{'json ms':>8} {'ours ms':>8} {'ratio':>6} {'damaged':>8}"
    )
    for api in wire.APIS:
        all_bodies = bodies(api, args.paths)
        largest = max(all_bodies, key=lambda b: len(b[1]))
        longest = max(all_bodies, key=lambda b: history_length(orjson.loads(b[1])))
        for label, (name, raw) in (("largest", largest), ("most-msgs", longest)):
            row = measure(raw, api, args.repeat)
            row["source"] = name
            results[f"{api}/{label}"] = row
            print(
                f"{api:<18} {label:<10} {row['bytes'] / 1024:>7.0f} {row['messages']:>5} "
                f"{row['json_roundtrip_ms']:>8.2f} {row['validate_repair_ms']:>8.2f} "
                f"{row['ratio']:>6.2f} {row['ratio_damaged']:>8.2f}"
            )
    target = max(r["ratio"] for k, r in results.items() if k.endswith("/largest"))
    print(f"worst ratio on the largest body: {target:.2f}x (target <= 2x)")
    results["target"] = {"worst_largest_ratio": target, "limit": 2.0, "met": target <= 2.0}
    write_result(args.out, results)


if __name__ == "__main__":
    main()
