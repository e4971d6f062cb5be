"""Benchmark: Session.manage, cold and warm, against a JSON round trip and Headroom's compress().

For the final request body of every shared transcript (as an Anthropic Messages
body), in one run and interleaved:

- ``json``: ``orjson.loads`` + ``orjson.dumps`` of the body's bytes;
- ``cold``: the first ``manage`` of the body in a new session (store writes included);
- ``warm``: ``manage`` of the same body again in that session (the steady state of
  an agent resending its history every turn);
- ``headroom``: ``headroom.compress()`` on the same messages, warm (its first call,
  which loads models, is timed apart), when headroom-ai is installed;
- ``turns``: the session replayed request by request through one session (each
  request is the previous history plus the newest turn), against the JSON round
  trips of the same requests: the steady state of a real agent.

Then the scaling check: the largest history repeated 1x, 4x and 16x, warm.

Targets (issue "Budgets, previews, stores and recall"): warm manage at least 20x
faster than Headroom; warm manage within 3x of the JSON round trip; cost linear in
history size.

    python bench/pipeline.py [--repeat N] [--no-headroom] [--out bench/results/pipeline.json]

Headroom is never a dependency: install it in a separate environment
(``pip install headroom-ai``) next to an editable toolbudget.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from _shared import REPO, conversations, json_round_trip, timed, trajectories
from toolbudget import to_request
from toolbudget.model import Conversation, Message, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import requests_of
from toolbudget.session import Session


def headroom_compress() -> Callable[[list[dict[str, Any]]], Any] | None:
    try:
        from headroom import compress
    except ImportError:
        return None

    def run(messages: list[dict[str, Any]]) -> Any:
        return compress(messages, model="claude-sonnet-4-5-20250929")

    return run


def replay_times(conversation: Conversation, store: str, policy: Policy, n: int) -> tuple[float, float]:
    """Milliseconds to manage every request of the session in turn, and to JSON round-trip them."""
    bodies = [to_request(c, "anthropic", model="m") for c in requests_of(conversation)]
    raws = [orjson.dumps(b) for b in bodies]
    with Session(f"turns-{n}", store=store, policy=policy) as session:
        gc.disable()
        start = time.perf_counter()
        for body in bodies:
            session.manage(body, "anthropic")
        ours = time.perf_counter() - start
        start = time.perf_counter()
        for raw in raws:
            json_round_trip(raw)
        theirs = time.perf_counter() - start
        gc.enable()
    return ours * 1000, theirs * 1000


def repeated(conversation: Conversation, times: int) -> Conversation:
    """The conversation's messages ``times`` over, with call ids made unique per copy."""
    messages: list[Message] = list(conversation.messages[:1])
    for n in range(times):
        for message in conversation.messages[1:]:
            parts = []
            for part in message.parts:
                if isinstance(part, ToolCall) and part.id:
                    part = ToolCall(
                        f"{part.id}_{n}", part.name, part.arguments, part.arguments_json, part.arguments_ok
                    )
                elif isinstance(part, ToolResult) and part.call_id:
                    part = ToolResult(f"{part.call_id}_{n}", part.content, part.is_error, part.name)
                parts.append(part)
            messages.append(Message(message.role, tuple(parts)))
    return Conversation(conversation.id, conversation.source, tuple(messages), conversation.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-headroom", action="store_true")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "pipeline.json"))
    args = parser.parse_args()
    if not (trajectories() / "manifest.json").is_file():
        sys.exit(f"the shared trajectories are not at {trajectories()} (set TOOLBUDGET_SHARED)")
    compress = None if args.no_headroom else headroom_compress()
    policy = Policy()
    rows = []
    headroom_first = None
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, conversation) in enumerate(conversations()):
            body = to_request(conversation, "anthropic", model="claude-sonnet-4-5-20250929")
            raw = orjson.dumps(body)
            session = Session(f"bench-{n}", store=f"dir:{tmp}", policy=policy)
            start = time.perf_counter()
            managed = session.manage(body, "anthropic")
            cold = time.perf_counter() - start
            json_time = timed(partial(json_round_trip, raw), args.repeat)
            warm = timed(partial(session.manage, body, "anthropic"), args.repeat)
            row: dict[str, Any] = {
                "body": name,
                "bytes": len(raw),
                "messages": len(body["messages"]),
                "json_ms": json_time * 1000,
                "cold_ms": cold * 1000,
                "warm_ms": warm * 1000,
                "warm_over_json": warm / json_time,
                "chars_before": managed.report.chars_before,
                "chars_after": managed.report.chars_after,
            }
            if compress is not None:
                messages = body["messages"]
                if headroom_first is None:
                    start = time.perf_counter()
                    compress(messages)
                    headroom_first = time.perf_counter() - start
                head = timed(partial(compress, messages), max(3, args.repeat // 5))
                row["headroom_ms"] = head * 1000
                row["headroom_over_warm"] = head / warm
            turn_ms, turn_json_ms = replay_times(conversation, f"dir:{tmp}", policy, n)
            row["turns_ms"] = turn_ms
            row["turns_json_ms"] = turn_json_ms
            rows.append(row)
            session.close()
        scaling = scale(conversations(), tmp, policy, args.repeat)
    summarise(rows, scaling, headroom_first, Path(args.out))


def scale(
    convs: list[tuple[str, Conversation]], tmp: str, policy: Policy, repeat: int
) -> list[dict[str, Any]]:
    name, base = max(convs, key=lambda c: len(orjson.dumps(to_request(c[1], "anthropic"))))
    out = []
    for times in (1, 4, 16):
        conversation = repeated(base, times)
        body = to_request(conversation, "anthropic", model="m")
        raw = orjson.dumps(body)
        session = Session(f"scale-{times}", store=f"dir:{tmp}", policy=policy)
        session.manage(body, "anthropic")
        warm = timed(partial(session.manage, body, "anthropic"), max(3, repeat // times))
        json_time = timed(partial(json_round_trip, raw), max(3, repeat // times))
        out.append(
            {
                "times": times,
                "source": name,
                "bytes": len(raw),
                "warm_ms": warm * 1000,
                "json_ms": json_time * 1000,
            }
        )
        session.close()
    return out


def summarise(
    rows: list[dict[str, Any]], scaling: list[dict[str, Any]], headroom_first: float | None, out: Path
) -> None:
    big = sorted(rows, key=lambda r: -r["bytes"])[:8]
    print(
        f"{'body':<58} {'KB':>6} {'msgs':>5} {'json':>7} {'cold':>7} {'warm':>7} {'w/json':>7} "
        f"{'headroom':>9} {'hr/warm':>8}"
    )
    for row in big:
        theirs = (
            f"{row['headroom_ms']:>9.2f} {row['headroom_over_warm']:>8.1f}" if "headroom_ms" in row else ""
        )
        print(
            f"{row['body'][-58:]:<58} {row['bytes'] / 1024:>6.0f} {row['messages']:>5} "
            f"{row['json_ms']:>7.2f} {row['cold_ms']:>7.2f} {row['warm_ms']:>7.2f} "
            f"{row['warm_over_json']:>7.2f} {theirs}"
        )
    total = {
        k: sum(r[k] for r in rows) for k in ("json_ms", "cold_ms", "warm_ms", "turns_ms", "turns_json_ms")
    }
    ratios = sorted(r["warm_over_json"] for r in rows)
    summary: dict[str, Any] = {
        "bodies": len(rows),
        "total_json_ms": total["json_ms"],
        "total_cold_ms": total["cold_ms"],
        "total_warm_ms": total["warm_ms"],
        "warm_over_json_total": total["warm_ms"] / total["json_ms"],
        "warm_over_json_median": statistics.median(ratios),
        "warm_over_json_max": ratios[-1],
        "bodies_within_3x_json": sum(r <= 3 for r in ratios),
        "turns_total_ms": total["turns_ms"],
        "turns_json_total_ms": total["turns_json_ms"],
        "turns_over_json_total": total["turns_ms"] / total["turns_json_ms"],
    }
    if all("headroom_ms" in r for r in rows):
        hr = sorted(r["headroom_over_warm"] for r in rows)
        summary.update(
            {
                "headroom_first_call_ms": (headroom_first or 0) * 1000,
                "total_headroom_ms": sum(r["headroom_ms"] for r in rows),
                "headroom_over_warm_total": sum(r["headroom_ms"] for r in rows) / total["warm_ms"],
                "headroom_over_warm_min": hr[0],
                "headroom_over_warm_median": statistics.median(hr),
            }
        )
    print()
    for key, value in summary.items():
        print(f"{key:<28} {value:.2f}" if isinstance(value, float) else f"{key:<28} {value}")
    print("\nscaling (the largest history repeated):")
    for row in scaling:
        per_kb = row["warm_ms"] / (row["bytes"] / 1024)
        print(
            f"  {row['times']:>2}x  {row['bytes'] / 1024:>8.0f} KB  warm {row['warm_ms']:>8.2f} ms  "
            f"json {row['json_ms']:>7.2f} ms  {per_kb * 1000:>6.1f} us/KB"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(
        orjson.dumps({"summary": summary, "scaling": scaling, "rows": rows}, option=orjson.OPT_INDENT_2)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
