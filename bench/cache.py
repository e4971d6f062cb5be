"""Benchmark: what each way of shrinking old tool results costs under prefix caching.

Every shared session is replayed request by request (the whole history before
each assistant turn, as Anthropic Messages bodies) under:

- ``unmanaged``: the history as the agent sent it;
- ``eager``: toolbudget with the seeds' per-turn aging (``TOOLBUDGET_COMPACTION=eager``);
- ``cache-aware``: toolbudget's default schedule;
- ``headroom``: Headroom's ``compress()`` on each request, when headroom-ai is installed;
- ``clear_tool_uses``: Anthropic's server-side context editing with its defaults (trigger
  100,000 input tokens, keep the 3 most recent tool uses), simulated on the client.

Each request's cached prefix is its common prefix with the previous request; billed
input is cache reads and writes at the prices of one price model of ``toolbudget.prices``
(``--price``, Anthropic's 5-minute cache by default; ``--price all`` runs each named
one), and toolbudget's schedule weighs its rewrites with the same model. Targets
(issue "Progressive microcompaction"): on every session cache-aware is at most 2% above
the cheaper of unmanaged and eager; over sessions whose final context exceeds 50k
tokens it averages at least 25% below unmanaged; its prefix is stable on at least
90% of requests; and no context exceeds the window while eligible results remain.

``--llama`` also replays two real sessions through the real llama.cpp server (the
window and caps scaled down to fit its small model) and reports the server's own
cached-token counts for eager and cache-aware.

``--timestamps`` measures instead the idle-gap point of issue "Cache economics": every
transcript with its own clock (Claude Code, Codex, Gemini CLI) billed with its real arrival
times, cache-aware not told them against cache-aware told them, under each price model; for
each request after a gap longer than the TTL, the context there against the low watermark and
how many results per-turn aging has compacted further than the schedule (what "compact
everything eligible" has to do there).

    python bench/cache.py [--no-headroom] [--llama] [--price NAME|FILE|all] [--over TOKENS]
                          [--timestamps] [--out bench/results/cache.json]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from _shared import REPO, add_paths, conversations, require_trajectories, transcript_files, write_result

sys.path.insert(0, str(REPO / "tests"))

from toolbudget import ToolbudgetError, load_transcript, to_request, wire
from toolbudget.budget import result_text
from toolbudget.measure import CHARS_PER_TOKEN, prompt_text
from toolbudget.model import Text, ToolCall, ToolResult
from toolbudget.models import context_window
from toolbudget.policy import Policy
from toolbudget.prices import NAMED, PriceModel, load_price
from toolbudget.replay import (
    ReplayTotals,
    arrivals_for,
    replay_requests,
    request_count,
    requests_of,
    transcript_arrivals,
)
from toolbudget.session import Session

MODES = ("unmanaged", "eager", "cache-aware", "cache-aware+idle", "headroom", "clear_tool_uses")
CLEAR_TRIGGER_TOKENS = 100_000
CLEAR_KEEP = 3
CLEARED = "[cleared]"

Manager = Callable[[dict[str, Any]], tuple[dict[str, Any], int]]


def toolbudget_manager(
    policy: Policy, name: str, api: str = "anthropic", arrivals: Sequence[float] | None = None
) -> tuple[Manager, Session]:
    """A session's manager; with ``arrivals``, the session is told when each request arrives."""
    session = Session(name, store="memory:", policy=policy)
    count = [0]

    def manage(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        now = arrivals[count[0]] if arrivals is not None else None
        count[0] += 1
        managed = session.manage(body, api, now=now)
        return managed.body, managed.report.results_cut

    return manage, session


def clear_tool_uses(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Anthropic's clear_tool_uses_20250919 with its defaults, applied as the server would."""
    request = wire.parse(body, "anthropic")
    if len(prompt_text(request)) / CHARS_PER_TOKEN <= CLEAR_TRIGGER_TOKENS:
        return body, 0
    calls = [p.id for m in request.messages for p in m.parts if isinstance(p, ToolCall)]
    keep = set(calls[-CLEAR_KEEP:])
    cleared = 0
    messages = []
    for message in request.messages:
        parts = []
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id not in keep:
                part = replace(part, content=(Text(CLEARED),))
                cleared += 1
            parts.append(part)
        messages.append(replace(message, parts=tuple(parts)))
    return wire.render(replace(request, messages=tuple(messages))), cleared


def headroom_manager() -> Manager | None:
    try:
        from headroom import compress
    except ImportError:
        return None

    def manage(body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        result = compress(body["messages"], model="claude-sonnet-4-5-20250929")
        out = {**body, "messages": result.messages}
        try:
            wire.parse(out, "anthropic")
        except ToolbudgetError:
            # Headroom may hand back OpenAI-shaped messages; lay them out as Anthropic again.
            chat = wire.parse({"model": body.get("model"), "messages": result.messages}, "openai-chat")
            out = {**body, "messages": wire.render(chat, "anthropic")["messages"]}
        return out, 0

    return manage


def run_all(
    use_headroom: bool,
    paths: Sequence[str] = (),
    price: str = "anthropic-5m",
    over: int = 0,
    idle: float | None = None,
    every: int = 10,
) -> list[dict[str, Any]]:
    """Every session billed under ``price`` (scheduled under it too); only those whose final
    unmanaged context exceeds ``over`` tokens. With ``idle``, requests arrive 10 s apart with
    a gap of ``idle`` seconds before every ``every``-th, every mode is billed with those gaps,
    and ``cache-aware+idle`` is the schedule told the arrival times."""
    headroom = headroom_manager() if use_headroom else None
    rows = []
    model: PriceModel = load_price(price)
    base = Policy(cache_price=price)
    for n, (name, conversation) in enumerate(conversations(paths)):
        row: dict[str, Any] = {"session": name}
        arrivals = arrivals_for(request_count(conversation), idle, every)
        unmanaged = replay_requests(conversation, "anthropic", None, price=model, arrivals=arrivals)
        if unmanaged.final_tokens <= over:
            continue
        totals: dict[str, ReplayTotals] = {"unmanaged": unmanaged}
        runs: list[tuple[str, str, list[float] | None]] = [
            ("eager", "eager", None),
            ("cache-aware", "cache-aware", None),
        ]
        if arrivals is not None:
            runs.append(("cache-aware+idle", "cache-aware", arrivals))
        for label, mode, told in runs:
            manage, session = toolbudget_manager(
                replace(base, compaction=mode), f"{label}-{n}", arrivals=told
            )
            with session:
                totals[label] = replay_requests(
                    conversation, "anthropic", manage, price=model, arrivals=arrivals
                )
        totals["clear_tool_uses"] = replay_requests(
            conversation, "anthropic", clear_tool_uses, price=model, arrivals=arrivals
        )
        if headroom is not None:
            totals["headroom"] = replay_requests(
                conversation, "anthropic", headroom, price=model, arrivals=arrivals
            )
        for mode, total in totals.items():
            row[mode] = total.as_dict()
        rows.append(row)
    return rows


def _tokens(body: dict[str, Any]) -> int:
    return round(len(prompt_text(wire.parse(body, "anthropic"))) / CHARS_PER_TOKEN)


def _further(eager: dict[str, Any], scheduled: dict[str, Any]) -> int:
    """How many results per-turn aging has shorter than the schedule in the same request."""
    texts = []
    for body in (eager, scheduled):
        request = wire.parse(body, "anthropic")
        texts.append(
            [result_text(p) or "" for m in request.messages for p in m.parts if isinstance(p, ToolResult)]
        )
    return sum(len(a) < len(b) for a, b in zip(*texts, strict=True))


def timestamped(paths: Sequence[str], price: str) -> list[dict[str, Any]]:
    """Each transcript with its own clock, billed with its real arrivals: cache-aware blind and told."""
    model = load_price(price)
    rows = []
    for name, path in transcript_files(paths):
        for conversation in load_transcript(path).conversations:
            arrivals = transcript_arrivals(path, conversation)
            if arrivals is None:
                continue
            gaps = [b - a for a, b in itertools.pairwise(arrivals)]
            cold = [n + 1 for n, gap in enumerate(gaps) if model.cold_after(gap)]
            bodies: dict[str, dict[int, dict[str, Any]]] = {}
            billed = {}
            for label, mode, told in (
                ("blind", "cache-aware", None),
                ("told", "cache-aware", arrivals),
                ("eager", "eager", None),
            ):
                policy = Policy(cache_price=price, compaction=mode)
                manage, session = toolbudget_manager(policy, f"{label}-{name}", arrivals=told)
                kept = bodies[label] = {}
                count = [0]

                def keep(
                    body: dict[str, Any],
                    manage: Manager = manage,
                    kept: dict[int, Any] = kept,
                    count: list[int] = count,
                    cold: list[int] = cold,
                ) -> Any:
                    out = manage(body)
                    if count[0] in cold:
                        kept[count[0]] = out[0]
                    count[0] += 1
                    return out

                with session:
                    billed[label] = replay_requests(
                        conversation, "anthropic", keep, price=model, arrivals=arrivals
                    ).billed
            low = Policy().compact_low_watermark * context_window(Policy(), "claude-sonnet-4-5")
            points = [
                {
                    "request": n,
                    "gap_s": round(gaps[n - 1]),
                    "context_tokens": _tokens(bodies["blind"][n]),
                    "low_watermark_tokens": round(low),
                    "eager_compacts_further": _further(bodies["eager"][n], bodies["blind"][n]),
                    "told_compacts_further": _further(bodies["told"][n], bodies["blind"][n]),
                }
                for n in cold
            ]
            rows.append(
                {
                    "session": f"{name}#{conversation.id}",
                    "requests": len(arrivals),
                    "longest_gap_s": round(max(gaps, default=0.0)),
                    "billed_without_timing": round(billed["blind"]),
                    "billed_with": round(billed["told"]),
                    "difference": round(billed["told"] - billed["blind"]),
                    "cold_requests": points,
                }
            )
    return rows


def print_timestamped(rows: list[dict[str, Any]]) -> None:
    print(f"{'session':<60}{'reqs':>5}{'longest gap':>12}{'billed blind':>14}{'billed told':>13}{'diff':>10}")
    for row in rows:
        print(
            f"{row['session'][-60:]:<60}{row['requests']:>5}{row['longest_gap_s']:>11}s"
            f"{row['billed_without_timing']:>14,}{row['billed_with']:>13,}{row['difference']:>10,}"
        )
        for point in row["cold_requests"]:
            print(
                f"    cold request {point['request']} after {point['gap_s']} s: context "
                f"{point['context_tokens']:,} tokens (low watermark {point['low_watermark_tokens']:,}); "
                f"results eager has compacted further: {point['eager_compacts_further']}, "
                f"the told schedule: {point['told_compacts_further']}"
            )


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    modes = [m for m in MODES if m in rows[0]]
    big = [r for r in rows if r["unmanaged"]["final_tokens"] > 50_000]

    def billed(row: dict[str, Any], mode: str) -> float:
        return float(row[mode]["billed_equivalent"])

    over = []
    for row in rows:
        best = min(billed(row, "unmanaged"), billed(row, "eager"))
        ratio = billed(row, "cache-aware") / best if best else 1.0
        over.append((ratio, row["session"]))
    over.sort(reverse=True)
    requests = sum(r["cache-aware"]["requests"] - 1 for r in rows)
    summary: dict[str, Any] = {
        "sessions": len(rows),
        "big_sessions": len(big),
        "worst_cache_aware_over_best_of_unmanaged_and_eager": over[0][0],
        "worst_session": over[0][1],
        "sessions_over_2_percent": sum(1 for ratio, _ in over if ratio > 1.02),
        "sessions_over_5_percent": sum(1 for ratio, _ in over if ratio > 1.05),
        "prefix_stability": {
            mode: sum(r[mode]["prefix_stable_requests"] for r in rows) / requests if requests else None
            for mode in modes
        },
        # A user's own few sessions may have no request after the first, or none over 50k tokens.
        "min_session_stability_cache_aware": min(
            (r["cache-aware"]["prefix_stability"] for r in rows if r["cache-aware"]["requests"] > 1),
            default=None,
        ),
        "big_average_billed_vs_unmanaged": {
            mode: statistics.mean(billed(r, mode) / billed(r, "unmanaged") for r in big) if big else None
            for mode in modes
        },
        "all_total_billed_vs_unmanaged": {
            mode: sum(billed(r, mode) for r in rows) / sum(billed(r, "unmanaged") for r in rows)
            for mode in modes
        },
    }
    return summary


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    modes = [m for m in MODES if m in rows[0]]
    print(f"{'session (final context > 50k tokens)':<52}" + "".join(f"{m:>17}" for m in modes))
    for row in rows:
        if row["unmanaged"]["final_tokens"] <= 50_000:
            continue
        base = row["unmanaged"]["billed_equivalent"]
        cells = "".join(
            f"{row[m]['billed_equivalent'] / base:>10.3f} ({row[m]['prefix_stability']:>4.0%})" for m in modes
        )
        print(f"{row['session'][-52:]:<52}{cells}")
    print()
    for key, value in summary.items():
        print(f"{key:<52} {value}")


def llama_runs(names: list[str]) -> dict[str, Any]:
    """Two real sessions through the real llama.cpp server: its own cached-token counts."""
    import httpx

    from llama_server import llama_server

    n_ctx = 8192
    policy = Policy(
        # The model's tokenizer needs about 1.6 tokens per estimated token on code and JSON:
        # an estimated window of 3,500 keeps real prompts inside the server's 8,192.
        context_window_tokens=3_500,
        result_max_chars=4_000,
        turn_budget_chars=12_000,
        tool_caps={},
        preview_head_chars=800,
        preview_tail_chars=200,
        microcompact_min_chars=800,
        microcompact_head_chars=400,
        microcompact_tail_chars=100,
        compact_clear_at_least=800,
    )
    out: dict[str, Any] = {}
    convs = dict(conversations())
    with llama_server(n_ctx=n_ctx) as url, httpx.Client(base_url=url, timeout=600) as client:
        for name in names:
            conversation = convs[name]
            for mode in ("eager", "cache-aware"):
                manage, session = toolbudget_manager(
                    replace(policy, compaction=mode), f"llama-{mode}", "openai-chat"
                )
                cached = processed = sent = errors = 0
                with session:
                    for prefix in requests_of(conversation):
                        body, _ = manage(to_request(prefix, "openai-chat", model="m"))
                        body = {**body, "max_tokens": 1, "stream": False, "cache_prompt": True}
                        reply = client.post("/v1/chat/completions", json=body)
                        if reply.status_code != 200:
                            errors += 1
                            continue
                        data = reply.json()
                        timings = data.get("timings", {})
                        cached += int(timings.get("cache_n", 0))
                        processed += int(timings.get("prompt_n", 0))
                        sent += int(data["usage"]["prompt_tokens"])
                out[f"{name}/{mode}"] = {
                    "prompt_tokens_sent": sent,
                    "cached_tokens": cached,
                    "processed_tokens": processed,
                    "cache_share": cached / sent if sent else 0.0,
                    "errors": errors,
                }
                print(
                    f"llama.cpp {name[-50:]:<50} {mode:<12} sent {sent:>8} cached {cached:>8} "
                    f"processed {processed:>8} ({cached / max(sent, 1):.0%} from cache) errors {errors}"
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--no-headroom", action="store_true")
    parser.add_argument("--llama", action="store_true", help="also replay two sessions through llama.cpp")
    parser.add_argument("--only-llama", action="store_true", help="only the llama.cpp part (keeps the rest)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "cache.json"))
    parser.add_argument(
        "--price", default="anthropic-5m", help=f"price model: {', '.join(NAMED)}, a JSON file, or all"
    )
    parser.add_argument("--over", type=int, default=0, help="only sessions whose final context exceeds this")
    parser.add_argument("--idle", type=float, help="a gap of this many seconds every --idle-every requests")
    parser.add_argument("--idle-every", type=int, default=10)
    parser.add_argument(
        "--timestamps", action="store_true", help="the transcripts' own clocks: cache-aware blind and told"
    )
    add_paths(parser)
    args = parser.parse_args()
    if args.timestamps:
        require_trajectories(args.paths)
        timed: dict[str, Any] = {}
        for price in list(NAMED) if args.price == "all" else [args.price]:
            print(f"--- price model {price}")
            timed[price] = timestamped(args.paths, price)
            print_timestamped(timed[price])
        write_result(args.out, timed)
        return
    # The llama.cpp part replays two named shared sessions, so it needs them whatever was given.
    require_trajectories(() if args.llama or args.only_llama else args.paths)
    out = Path(args.out)
    if args.only_llama:
        result: dict[str, Any] = orjson.loads(out.read_bytes()) if out.is_file() else {}
    else:
        prices = list(NAMED) if args.price == "all" else [args.price]
        result = {}
        for price in prices:
            print(f"--- price model {price}")
            rows = run_all(not args.no_headroom, args.paths, price, args.over, args.idle, args.idle_every)
            summary = summarise(rows)
            print_table(rows, summary)
            result[price] = {"summary": summary, "sessions": rows}
        if len(prices) == 1:
            result = result[prices[0]]
    if args.llama or args.only_llama:
        # Two real sessions whose prompts, without their tool results, fit the small model's window.
        result["llama"] = llama_runs(
            [
                "mini-swe-agent/swebench_results/20251118_gemini-3-pro-74pct/trajs/pallets__flask-5014/pallets__flask-5014.traj.json#pallets__flask-5014",
                "tau-bench/historical_trajectories/gpt-4o-airline.json#task-33-trial-0",
            ]
        )
    write_result(out, result)


if __name__ == "__main__":
    main()
