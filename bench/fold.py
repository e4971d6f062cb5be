"""Benchmark: folding a long streamed answer into its reply, for every wire API.

A watched stream shows every event to its API's folder (``toolbudget.wire``),
so folding sits on the caller's path while the answer streams in. Each API's
stream here is one answer of ``--deltas`` text pieces of 20 characters, as
dicts (the SSE ``data:`` JSON). Reported per API: the time per event, and how
much longer four times the events take (4.0 is linear; text appended to a
string in place would make it about 16).

    python bench/fold.py [--deltas N] [--repeat N] [--out bench/results/fold.json]
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from _shared import REPO, timed, write_result
from toolbudget import wire
from toolbudget.clients._observe import Tap

PIECE = "twenty characters.. "


def anthropic(n: int) -> list[dict[str, Any]]:
    start = {"type": "message_start", "message": {"id": "m", "role": "assistant", "content": [], "usage": {}}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": PIECE}}
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}
    return [start, block, *([delta] * n), {"type": "content_block_stop", "index": 0}, end]


def chat(n: int) -> list[dict[str, Any]]:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": PIECE}}],
    }
    return [chunk] * n


def responses(n: int) -> list[dict[str, Any]]:
    item = {"type": "message", "id": "msg", "role": "assistant", "status": "in_progress", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    return [
        {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", "output_index": 0, "content_index": 0, "part": part},
        *[{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": PIECE}] * n,
    ]


def gemini(n: int) -> list[dict[str, Any]]:
    return [{"candidates": [{"content": {"role": "model", "parts": [{"text": PIECE}]}, "index": 0}]}] * n


def bedrock(n: int) -> list[dict[str, Any]]:
    delta = {"contentBlockDelta": {"delta": {"text": PIECE}, "contentBlockIndex": 0}}
    return [
        {"messageStart": {"role": "assistant"}},
        *([delta] * n),
        {"messageStop": {"stopReason": "end_turn"}},
    ]


STREAMS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "anthropic": anthropic,
    "openai-chat": chat,
    "openai-responses": responses,
    "gemini": gemini,
    "bedrock-converse": bedrock,
}


def fold(api: str, events: list[dict[str, Any]]) -> None:
    answers: list[Any] = []
    tap = Tap(api, lambda answer, _finished: answers.append(answer))
    for event in events:
        tap.see(event)
    tap.end(True)
    assert answers[0] is not None and wire.dialect(api).units(answers[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "fold.json"))
    args = parser.parse_args()
    rows = {}
    for api, make in STREAMS.items():
        small, large = make(args.deltas), make(4 * args.deltas)
        one = timed(functools.partial(fold, api, small), args.repeat)
        four = timed(functools.partial(fold, api, large), args.repeat)
        print(f"{api:17} {one / len(small) * 1e6:6.2f} us/event; 4x the events: {four / one:4.1f}x the time")
        rows[api] = {"us_per_event": one / len(small) * 1e6, "four_times_the_events": four / one}
    write_result(args.out, {"deltas": args.deltas, "apis": rows})


if __name__ == "__main__":
    main()
