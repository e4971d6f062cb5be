"""Benchmark: the least an agent's next request must cost, timed in the loop as ``manage`` is.

``bench/warm_floor.py`` times each least step of an appended turn as the best
of many runs on the same entries, with the machine's caches warm: a bound
that no request of a real loop meets, since a loop runs each request's code
once, on a body it has just been given. This times the same kind of work the
way ``bench/loop.py`` times ``manage``: every request of a session once per
run, right after its round trip (best of three ``orjson.loads`` +
``orjson.dumps``), on a body read from its JSON text just before, with the
state the request before left; each request keeps its best of ``--repeat``
runs. The real ``manage`` runs the same loop in the same process, each run
right after the floor's, its store's worker let finish between requests.

What the floor does for a request that appends to the last one is what any
``manage`` keeping the issue's promises must do for it:

- tell that its history begins with the last one's: the history's JSON text
  (one ``orjson.dumps``) against the last one's, and the body's other fields
  against the last ones' (exact, where ``==`` on dicts is not);
- parse the new entries and check their pairing against the earlier history;
- measure the new messages (the budget needs their sizes);
- check that the store still holds the keys the last answer's markers named
  (``DirStore.missing`` on an unchanged archive holding as many keys as the
  real session's markers named by then: two ``stat`` calls);
- lay out the body to send: the last one's history with the new entries after it.

A session's first request is parsed, checked and measured whole. The floor
decides nothing (no cap, no schedule, no cut) and writes nothing, so it is
below any request that cuts. If its loop and p95 sit inside the targets
(loop within 2x, p95 within 3x), the work the targets ask for does not rule
them out on this machine, and the gap to them is what ``manage`` does beyond
it, which the last columns give (median request, requests after the first two).

    python bench/loop_floor.py [--sessions 10] [--repeat 5] [--out bench/results/loop_floor.json]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from _shared import (
    REPO,
    add_paths,
    json_round_trip,
    p95,
    store_scratch,
    write_result,
)
from loop import best_round_trip, request_bodies, settle, warmed_sessions
from toolbudget import wire
from toolbudget.incremental import fingerprint, head_of, opening, parse_entries
from toolbudget.measure import message_chars
from toolbudget.model import Conversation, Request
from toolbudget.pairing import appends_validly, call_ids, check_request
from toolbudget.policy import Policy
from toolbudget.session import Session
from toolbudget.store.dir import DirStore


class _Floor:
    """The least work of each request, with what the request before left (see the module doc)."""

    def __init__(self, store: DirStore, keys_at: list[list[str]]) -> None:
        self.store = store
        self.keys_at = keys_at
        self.text: memoryview | None = None
        self.head: bytes | None = None
        self.request: Request | None = None
        self.history: list[Any] = []
        self.calls: frozenset[str] = frozenset()
        self.sizes: list[int] = []

    def request_at(self, index: int, body: dict[str, Any]) -> dict[str, Any]:
        entries = body["messages"]
        text = fingerprint(entries)
        head = head_of(body, "messages")
        assert text is not None and head is not None
        count = len(self.history)
        last = self.request
        if (
            last is not None
            and self.text is not None
            and len(entries) > count
            and text[len(self.text)] in b",]"
            and text.startswith(self.text)
            and head == self.head
        ):
            new = parse_entries("anthropic", entries[count:])
            request = last.with_messages((*last.messages, *new))
            if not appends_validly(request, count, self.calls):
                check_request(request)
            self.sizes += [message_chars(m) for m in new]
            self.calls = self.calls | call_ids(new)
        else:
            request = wire.parse(body, "anthropic")
            check_request(request)
            self.sizes = [message_chars(m) for m in request.messages]
            self.calls = call_ids(request.messages)
        keys = self.keys_at[index - 1] if index else []
        if keys:
            self.store.missing("floor", keys, None)
        out = {**body, "messages": [*self.history, *entries[count:]]}
        self.text, self.head, self.request, self.history = opening(text), head, request, out["messages"]
        return out


def timed(fn: Callable[[], Any]) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def session_floor(conversation: Conversation, policy: Policy, root: str, repeat: int) -> dict[str, Any]:
    texts = [orjson.dumps(body) for body in request_bodies(conversation)]
    trips = [best_round_trip(text) for text in texts]
    # The keys the real session's markers name after each request (a first run, untimed).
    keys_at: list[list[str]] = []
    with Session("floor-keys", store=f"dir:{root}/keys", policy=policy) as session:
        for text in texts:
            report = session.manage(orjson.loads(text), "anthropic").report
            keys_at.append(sorted({cut.key for cut in report.cuts if cut.key is not None}))
    store = DirStore(f"{root}/floor")
    everything = sorted({key for keys in keys_at for key in keys})
    if everything:
        store.put_many("floor", dict.fromkeys(everything, b"an original kept for the floor's check\n"))
    floor = [float("inf")] * len(texts)
    manage = [float("inf")] * len(texts)
    try:
        for run in range(repeat):
            steps = _Floor(store, keys_at)
            for i, text in enumerate(texts):
                body = orjson.loads(text)
                json_round_trip(text)
                floor[i] = min(floor[i], timed(partial(steps.request_at, i, body)))
            with Session(f"floor-manage-{run}", store=f"dir:{root}/manage", policy=policy) as session:
                for i, text in enumerate(texts):
                    body = orjson.loads(text)
                    settle(session)
                    json_round_trip(text)
                    manage[i] = min(manage[i], timed(partial(session.manage, body, "anthropic")))
    finally:
        store.close()
    later = slice(2, None) if len(texts) > 2 else slice(None)
    return {
        "requests": len(texts),
        "loop_floor": sum(floor) / sum(trips),
        "loop_manage": sum(manage) / sum(trips),
        "p95_floor": p95([f / t for f, t in zip(floor, trips, strict=True)]),
        "p95_manage": p95([m / t for m, t in zip(manage, trips, strict=True)]),
        "median_floor_us": statistics.median(floor[later]) * 1e6,
        "median_manage_us": statistics.median(manage[later]) * 1e6,
        "median_trip_us": statistics.median(trips[later]) * 1e6,
        "per_request": [
            {"bytes": len(text), "trip": t, "floor": f, "manage": m}
            for text, t, f, m in zip(texts, trips, floor, manage, strict=True)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs of each loop; each request keeps its best"
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "loop_floor.json"))
    add_paths(parser)
    args = parser.parse_args()
    policy, longest = warmed_sessions(args)
    print(
        f"{'session':<44} {'reqs':>4} {'loop floor':>10} {'loop manage':>11} {'p95 floor':>9} "
        f"{'p95 manage':>10} {'trip us':>7} {'floor us':>8} {'manage us':>9}"
    )
    rows = []
    with store_scratch() as tmp:
        for n, (name, conversation) in enumerate(longest):
            root = os.path.join(tmp, str(n))
            row = {"session": name, **session_floor(conversation, policy, root, args.repeat)}
            rows.append(row)
            print(
                f"{name.split('#')[-1][-44:]:<44} {row['requests']:>4} {row['loop_floor']:>10.2f} "
                f"{row['loop_manage']:>11.2f} {row['p95_floor']:>9.2f} {row['p95_manage']:>10.2f} "
                f"{row['median_trip_us']:>7.0f} {row['median_floor_us']:>8.0f} "
                f"{row['median_manage_us']:>9.0f}",
                flush=True,
            )
    write_result(args.out, {"repeat": args.repeat, "rows": rows})


if __name__ == "__main__":
    main()
