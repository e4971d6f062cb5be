"""Benchmark: an agent's loop, request by request, against the JSON round trip of each request.

An agent never sends the same body twice: request k is the history up to its
k-th result. This replays sessions that way, through one ``Session`` that sees
requests 1..N in order (``warm``), and times each ``manage`` against the best of
three ``orjson.loads`` + ``orjson.dumps`` of the same body, in the same process:

- ``p95``: the 95th percentile over requests of ``manage / round trip``;
- ``loop``: the whole loop's ``manage`` time over the whole loop's round trips;
- ``fresh``: the last request, met cold (a restarted process, another
  replica): another session of its own id managed every request before it
  and closed, then a new ``Session`` of that id and store, after an unrelated
  body was managed so imports and compiled patterns are warm, manages the
  last one; over that request's round trip, best of ``--fresh-tries`` (each
  try on a store of its own, so no try reads what an earlier one kept of the
  last request). It reads back the previews and summaries kept in the store
  (one batched read) instead of making them again, and resumes the schedule
  from the record of the last write (see ``toolbudget.schedulerecord``);
  ``--breakdown`` also shows where its time goes;
- ``headroom``: Headroom's ``compress()`` on the same requests (every request of
  the real sessions; every ``--headroom-every``-th one of the synthetic ones, whose
  requests reach several MB), over ``manage`` on the same requests. It runs in a
  pass of its own after each session's loop, in the same process: run between
  two of ``manage``'s requests, its work shared the processor's caches with
  the next one (the Codex session's loop took 9-13% longer that way, in two
  alternate runs).

Sessions: the ``--sessions`` longest shared ones (by requests, then bytes), and
synthetic ones of ``--turns`` assistant turns built by repeating real turns with
fresh call ids. Every body is an Anthropic Messages body.

Targets: warm p95 within 3x, loop within 2x, fresh within 5x, Headroom at least
20x slower than ``manage``.

Requests are sent back to back, except that before each one the store's
worker is let finish, untimed, the work it does between requests (``Session.settle``:
a ``dir:`` session's directory made ahead of its first cut, spare files for
the next originals, the previews and summaries a later compaction event will
send, see ``toolbudget.ahead``), which the seconds an agent waits for its
model always allow. That wait is not hidden: the last column, ``worker``, is
the time waited for the worker between requests (the first run) over the
loop's time in ``manage``. ``--gap-ms`` waits that long too, untimed,
before each one. The caches of the machine cool meanwhile, and every ratio grows (the
round trip it is divided by is still the best of three, warm). A ``dir:``
store's check of the markers' keys is cheaper with a gap: a results directory
vouches for the keys found in it before only once its time is 20 ms old (see
``toolbudget.store.dir``).

Each request's round trip is measured right before its ``manage``, which
then finds the body in the processor's caches, as a proxy finds a body it
has just read. ``--round-trips apart`` measures them all first, in a pass of
their own, and writes no body out between two requests: ``manage`` then
meets the body as a library caller hands over a history it built over time.

Every write is made inside the request that causes it, as a library call
makes it. ``--writes later`` times what the proxy does instead: the records
no marker names (the previews made, the schedule's decision) are written
between requests, untimed, as the proxy writes them while the provider
answers; every original a marker names is still written and checked inside
the request.

    python bench/loop.py [--sessions 10] [--turns 500 2000] [--no-headroom] [--store URL]
                         [--repeat 3] [--gap-ms 0] [--writes inline|later]
                         [--out bench/results/loop.json]

A request's ``manage`` is timed once per run; each shared session's loop runs
``--repeat`` times (each run a new session of its own id, doing the same work)
and each request keeps its best run, as its round trip keeps the best of three:
on a shared machine a single run mostly measures the neighbours.

Headroom is never a dependency: run this with a Python that has headroom-ai
installed beside toolbudget's own dependencies.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from _shared import (
    REPO,
    add_paths,
    conversations,
    json_round_trip,
    p95,
    require_trajectories,
    store_scratch,
    write_result,
)
from toolbudget import to_request
from toolbudget.model import Conversation, Message, ToolCall, ToolResult
from toolbudget.policy import Policy
from toolbudget.replay import requests_of
from toolbudget.session import Session
from toolbudget.store import open_store

MODEL = "claude-sonnet-4-5-20250929"
LARGE = 100_000
"""Requests of at least this many bytes are also summarised on their own (``p95_ratio_large``)."""


def headroom_compress() -> Callable[[list[dict[str, Any]]], Any] | None:
    try:
        from headroom import compress
    except ImportError:
        return None

    def run(messages: list[dict[str, Any]]) -> Any:
        return compress(messages, model=MODEL)

    return run


def settle(session: Any) -> None:
    """Let the session's store worker finish its work between requests (untimed), as the seconds
    an agent waits for its model let it; a tree without :meth:`Session.settle` is waited for the
    same way."""
    wait = getattr(session, "settle", None)
    if wait is not None:
        wait(10.0)
        return
    guard = getattr(session, "_guard", None)
    if guard is not None and hasattr(guard, "settle"):
        guard.settle(10.0)


def request_bodies(conversation: Conversation) -> Iterator[dict[str, Any]]:
    """The session's requests as the agent sent them, one after another.

    The whole history is laid out once and sliced before each assistant turn
    (a prefix of a laid-out history is the layout of that prefix). Each
    request is a new body, read from its JSON text as a server reads what it
    is sent: no object of one request is an object of another, so nothing can
    be recognised by identity.
    """
    full = to_request(conversation, "anthropic", model=MODEL)
    messages = full["messages"]
    for i in range(1, len(messages)):
        if messages[i]["role"] == "assistant" and messages[i - 1]["role"] != "assistant":
            yield orjson.loads(orjson.dumps({**full, "messages": messages[:i]}))
    if messages and messages[-1]["role"] != "assistant":
        yield orjson.loads(orjson.dumps(full))


def synthetic(conversation: Conversation, turns: int) -> Conversation:
    """``turns`` assistant turns made of the conversation's turns over again, with fresh call ids."""
    head = list(conversation.messages[:1])
    body = list(conversation.messages[1:])
    messages: list[Message] = list(head)
    count = 0
    copy = 0
    while count < turns:
        prev = messages[-1].role if messages else ""
        for message in body:
            if message.role == "assistant" and prev != "assistant":
                if count == turns:
                    break
                count += 1
            prev = message.role
            parts = []
            for part in message.parts:
                if isinstance(part, ToolCall) and part.id:
                    part = ToolCall(
                        f"{part.id}_{copy}", part.name, part.arguments, part.arguments_json, part.arguments_ok
                    )
                elif isinstance(part, ToolResult) and part.call_id:
                    part = ToolResult(f"{part.call_id}_{copy}", part.content, part.is_error, part.name)
                parts.append(part)
            messages.append(Message(message.role, tuple(parts)))
        copy += 1
    if messages[-1].role == "assistant" and any(isinstance(p, ToolCall) for p in messages[-1].parts):
        messages.pop()
    return Conversation(
        f"{conversation.id}-x{turns}", conversation.source, tuple(messages), conversation.system
    )


def longest_sessions(convs: list[tuple[str, Conversation]], count: int) -> list[tuple[str, Conversation]]:
    """The ``count`` longest of ``convs``: by requests, then by the bytes of the whole history."""

    def size(item: tuple[str, Conversation]) -> tuple[int, int]:
        c = item[1]
        return sum(1 for _ in requests_of(c)), len(orjson.dumps(to_request(c, "anthropic")))

    return sorted(convs, key=size, reverse=True)[:count]


def warmed_sessions(args: argparse.Namespace) -> tuple[Policy, list[tuple[str, Conversation]]]:
    """What a floor benchmark starts from, once its arguments are read: the sessions required, a
    policy warmed up (:func:`warm_up`), and the ``--sessions`` longest of ``args.paths``."""
    require_trajectories(args.paths)
    policy = Policy()
    warm_up(policy)
    return policy, longest_sessions(conversations(args.paths), args.sessions)


def best_round_trip(raw: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        json_round_trip(raw)
        best = min(best, time.perf_counter() - start)
    return best


def run_loop(
    name: str,
    conversation: Conversation,
    store: str,
    policy: Policy,
    compress: Callable[[list[dict[str, Any]]], Any] | None,
    headroom_every: int,
    verbose: bool = False,
    repeat: int = 1,
    gap: float = 0.0,
    fresh_tries: int = 3,
    later: bool = False,
    apart: bool = False,
) -> dict[str, Any]:
    """One session's loop, ``repeat`` times over (each time a new session of its own id): each
    request's ``manage`` is the best of its runs, as its round trip is the best of three.
    ``apart``: every round trip is measured first, in a pass of its own, and no body is
    written out between two requests."""
    ours: list[float] = []
    json: list[float] = []
    sizes: list[int] = []
    writes: list[bool] = []  # whether the request kept a new original before it could go out
    theirs: list[tuple[int, float]] = []
    last: dict[str, Any] = {}
    sid = "loop-" + hashlib.blake2b(name.encode(), digest_size=6).hexdigest()
    trips: list[tuple[int, float]] | None = None
    between = 0.0  # waiting for the store's worker between requests (its first run)
    if apart:
        trips = [(len(raw), best_round_trip(raw)) for raw in map(orjson.dumps, request_bodies(conversation))]
    for run in range(repeat):
        with Session(
            sid if run == 0 else f"{sid}-{run}", store=store, policy=policy, write_later=later
        ) as session:
            for k, body in enumerate(request_bodies(conversation)):
                if gap:
                    time.sleep(gap)  # the model and the tool, between two requests
                if later:
                    # The records no marker names, written while the provider answers (untimed),
                    # as the proxy writes them.
                    session.write_now()
                # The store's worker finishes what it does between requests (a session's directory
                # made ahead of its first cut, spare files, what a later event will make), as the
                # model's seconds let it; how long it took is reported beside the loop.
                began = time.perf_counter()
                settle(session)
                if run == 0:
                    between += time.perf_counter() - began
                if trips is None:
                    raw = orjson.dumps(body)
                    size, trip = len(raw), best_round_trip(raw)
                else:
                    size, trip = trips[k]
                gc.disable()
                start = time.perf_counter()
                managed = session.manage(body, "anthropic")
                took = time.perf_counter() - start
                gc.enable()
                if run:
                    ours[k], json[k] = min(ours[k], took), min(json[k], trip)
                    continue
                sizes.append(size)
                json.append(trip)
                ours.append(took)
                writes.append(bool(managed.report.keys_written))
                last = body
            if run == 0:
                report = managed.report
    if compress is not None:
        # Headroom's pass over the same requests, after the loop: run between two of ours, its
        # work (models, large buffers) shared the processor's caches with our next request.
        for k, body in enumerate(request_bodies(conversation)):
            if k % headroom_every == 0:
                messages = body["messages"]
                start = time.perf_counter()
                compress(messages)
                theirs.append((k, time.perf_counter() - start))
    fresh, fresh_same = fresh_manage(sid, store, policy, conversation, fresh_tries, later)
    per_request = [o / j for o, j in zip(ours, json, strict=True)]
    if verbose:
        for k, (o, j) in enumerate(zip(ours, json, strict=True)):
            print(f"  request {k + 1:>5}: manage {o * 1000:8.3f} ms  json {j * 1000:7.3f} ms  {o / j:7.2f}x")
    ratios = sorted(per_request)
    # Small bodies: a round trip of a few KB takes microseconds, less than any Python call chain.
    large = sorted(r for r, size in zip(per_request, sizes, strict=True) if size >= LARGE)
    row: dict[str, Any] = {
        "session": name,
        "requests": len(ours),
        "last_bytes": len(orjson.dumps(last)),
        "last_chars_before": report.chars_before,
        "last_chars_after": report.chars_after,
        "manage_ms": sum(ours) * 1000,
        "json_ms": sum(json) * 1000,
        "between_ms": between * 1000,
        "loop_ratio": sum(ours) / sum(json),
        "p95_ratio": p95(ratios),
        "p95_ratio_large": p95(large) if large else None,
        "large_requests": len(large),
        "median_ratio": statistics.median(ratios),
        "max_ratio": ratios[-1],
        "fresh_ms": fresh * 1000,
        "fresh_ratio": fresh / json[-1],
        "fresh_same_bytes": fresh_same,
        "per_request_ratios": per_request,
        "per_request_bytes": sizes,
    }
    row.update(p95_needs(ours, json, writes))
    if theirs:
        head = sum(t for _, t in theirs)
        mine = sum(ours[k] for k, _ in theirs)
        row["headroom_ms"] = head * 1000
        row["headroom_requests"] = len(theirs)
        row["headroom_over_manage"] = head / mine
        row["headroom_over_json"] = head / sum(json[k] for k, _ in theirs)
    return row


def p95_needs(ours: list[float], json: list[float], writes: list[bool]) -> dict[str, Any]:
    """What a p95 within 3x of the round trip asks of this session's requests.

    The p95 lets ``over_3x_allowed`` requests go over. The first request (a
    cold parse of everything) and every request that keeps a new original
    before it goes out (``writing_requests``) are the likeliest to; when they
    are more than that, some of them must be within 3x too, and every other
    request must be, down to the smallest bodies: ``quiet_budget_us`` is the
    time the tightest of those has (3x its round trip), against
    ``quiet_least_us``, the least any of them took here.
    """
    n = len(ours)
    allowed = n - 1 - int(0.95 * n)
    quiet = sorted(range(1, n), key=lambda k: json[k])
    quiet = [k for k in quiet if not writes[k]]
    spare = max(0, allowed - 1 - sum(writes[1:]))
    return {
        "over_3x_allowed": allowed,
        "writing_requests": sum(writes[1:]),
        "quiet_budget_us": 3e6 * json[quiet[spare]] if spare < len(quiet) else None,
        "quiet_least_us": 1e6 * min(ours[k] for k in quiet) if quiet else None,
    }


def breakdown(conversation: Conversation, policy: Policy, store: str) -> dict[str, float]:
    """Where a warm loop's time goes, each part over the loop's round trips.

    The parts are timed by wrapping the functions the pipeline calls:
    ``prefix`` (the history's JSON text against the last request's),
    ``parse`` (the new entries, or the whole body), ``pairing`` (the new
    messages' check, or validate and repair), ``new results`` (previews,
    summaries and content detection of results seen for the first time: the
    memo holds them after), ``budget`` (the rest of caps, compaction and turn
    budgets), ``store`` (the one check of every key the markers name, and the
    writes), ``render``. ``p95_rest`` is the 95th percentile over requests of
    manage minus the new results' work.
    """
    from toolbudget import budget as budget_module
    from toolbudget import session as session_module
    from toolbudget import wire as wire_module

    spent: dict[str, float] = {}

    def timed_as(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return run

    patches = [
        (session_module, "entries_after", "prefix"),
        (wire_module, "parse", "parse"),
        (session_module, "parse_entries", "parse"),
        (session_module, "repair_traced", "pairing"),
        (session_module, "appends_validly", "pairing"),
        (session_module, "enforce", "budget"),
        (session_module, "extend", "budget"),
        (session_module._SessionArchive, "flush", "store"),
        (wire_module, "render", "render"),
        (session_module, "render_entries", "render"),
        (budget_module, "make_preview", "new results"),
        (budget_module, "summarize_result", "new results"),
    ]
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in patches]
    for module, attr, name in patches:
        setattr(module, attr, timed_as(name, getattr(module, attr)))
    json = 0.0
    rest: list[float] = []
    try:
        with Session("breakdown", store=store, policy=policy) as session:
            for body in request_bodies(conversation):
                round_trip = best_round_trip(orjson.dumps(body))
                json += round_trip
                new_before = spent.get("new results", 0.0)
                start = time.perf_counter()
                session.manage(body, "anthropic")
                took = time.perf_counter() - start
                rest.append((took - (spent.get("new results", 0.0) - new_before)) / round_trip)
    finally:
        for module, attr, fn in saved:
            setattr(module, attr, fn)
    spent["budget"] = spent.get("budget", 0.0) - spent.get("new results", 0.0)
    out = {name: value / json for name, value in spent.items()}
    rest.sort()
    out["p95_rest"] = rest[min(len(rest) - 1, int(0.95 * len(rest)))]
    return out


def fresh_parts(sid: str, store: str, policy: Policy, conversation: Conversation) -> dict[str, float]:
    """Where a fresh ``manage`` of the last request goes (met cold, as ``fresh_manage`` meets it),
    each part over the body's round trip (best of 3).

    ``parse`` (the whole body, nothing cached), ``pairing`` (validate and
    repair), ``schedule`` (the compaction levels, decided again at every
    request point after the one its store has a record of), ``read back`` (the records of previews and
    summaries, one batched read), ``store`` (the one check of every key the
    markers name, and the writes), ``render``, and ``rest`` (caps, the
    budget's walk, the report).
    """
    from toolbudget import budget as budget_module
    from toolbudget import session as session_module
    from toolbudget import wire as wire_module
    from toolbudget.compaction import Schedule

    patches = [
        (wire_module, "parse", "parse"),
        (session_module, "repair_traced", "pairing"),
        (Schedule, "levels", "schedule"),
        (budget_module, "_read_back", "read back"),
        (session_module._SessionArchive, "flush", "store"),
        (wire_module, "render", "render"),
    ]
    trip = 0.0
    best: dict[str, float] = {}
    for n in range(3):
        cold = f"{sid}-cold-{n}"
        body = cold_before_last(cold, store, policy, conversation)
        trip = trip or best_round_trip(orjson.dumps(body))
        spent: dict[str, float] = {}

        def timed_as(name: str, fn: Callable[..., Any], into: dict[str, float]) -> Callable[..., Any]:
            def run(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    into[name] = into.get(name, 0.0) + time.perf_counter() - start

            return run

        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
        for owner, attr, name in patches:
            setattr(owner, attr, timed_as(name, getattr(owner, attr), spent))
        try:
            warm_up(policy)
            with Session(cold, store=store, policy=policy) as session:
                gc.disable()
                start = time.perf_counter()
                session.manage(body, "anthropic")
                total = time.perf_counter() - start
                gc.enable()
        finally:
            for owner, attr, fn in saved:
                setattr(owner, attr, fn)
        spent["rest"] = total - sum(spent.values())
        spent["total"] = total
        if not best or total < best["total"]:
            best = spent
    return {name: value / trip for name, value in best.items()}


def warm_up(policy: Policy, make: Callable[..., Any] = Session) -> None:
    """Manage an unrelated body, so imports and compiled patterns are warm before any timing
    (``make``: the ``Session`` class of another tree, for a side-by-side run)."""
    with make("unrelated", store="memory:", policy=policy) as other:
        other.manage(
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x " * 5000}]},
            "anthropic",
        )


def cold_before_last(sid: str, store: str, policy: Policy, conversation: Conversation) -> dict[str, Any]:
    """Manage every request of the conversation but the last under ``sid`` (untimed) and close:
    the store as a restarted process or another replica finds it. Returns the last request."""
    bodies = request_bodies(conversation)
    last = next(bodies)
    with Session(sid, store=store, policy=policy) as earlier:
        for body in bodies:
            earlier.manage(last, "anthropic")
            last = body
    return last


def fresh_manage(
    sid: str, store: str, policy: Policy, conversation: Conversation, tries: int = 3, later: bool = False
) -> tuple[float, bool]:
    """The last request managed by a cold session of its store: seconds (best of ``tries``, each
    on a store that holds the requests before it alone), and whether it sent the bytes a warm
    session of the same id and store sent (keys and paths in markers depend on both)."""
    best = float("inf")
    same = True
    for n in range(tries):
        cold = f"{sid}-cold-{n}"
        with Session(cold, store=store, policy=policy) as warm:
            for body in request_bodies(conversation):
                managed = warm.manage(body, "anthropic")
            warm_bytes = orjson.dumps(managed.body)
        kept = open_store(store)
        try:
            kept.drop(cold)  # the store as if the warm session had never been
        finally:
            kept.close()
        body = cold_before_last(cold, store, policy, conversation)
        warm_up(policy)
        with Session(cold, store=store, policy=policy, write_later=later) as session:
            gc.disable()
            start = time.perf_counter()
            managed = session.manage(body, "anthropic")
            best = min(best, time.perf_counter() - start)
            gc.enable()
            same = same and orjson.dumps(managed.body) == warm_bytes
    return best, same


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, nargs="*", default=[500, 2000])
    parser.add_argument("--no-headroom", action="store_true")
    parser.add_argument("--headroom-every", type=int, default=10)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each shared session's loop; each request's best is kept",
    )
    parser.add_argument("--synthetic-repeat", type=int, default=1, help="the same for the synthetic sessions")
    parser.add_argument(
        "--gap-ms", type=float, default=0.0, help="untimed wait before each request (an agent's turn)"
    )
    parser.add_argument(
        "--fresh-tries", type=int, default=3, help="cold managements of each last request; the best is kept"
    )
    parser.add_argument(
        "--writes",
        choices=("inline", "later"),
        default="inline",
        help="inline: every write in the request (the library's default); later: the records no "
        "marker names are written between requests, as the proxy writes them while the provider answers",
    )
    parser.add_argument(
        "--round-trips",
        choices=("before", "apart"),
        default="before",
        help="before: each request's round trip is measured right before its manage (which finds the "
        "body in the processor's caches); apart: all of them first, in a pass of their own, as a "
        "caller that hands over a history it built over time leaves the caches",
    )
    parser.add_argument("--per-request", action="store_true", help="print every request's ratio")
    parser.add_argument("--breakdown", action="store_true", help="also time the pipeline's parts")
    parser.add_argument(
        "--store", default=None, help="the store URL the sessions use (a new dir: store by default)"
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "loop.json"))
    add_paths(parser)
    args = parser.parse_args()
    require_trajectories(args.paths)
    compress = None if args.no_headroom else headroom_compress()
    if compress is not None:
        compress([{"role": "user", "content": "warm up"}])  # loads its models, not timed
    policy = Policy()
    convs = conversations(args.paths)
    warm_up(policy)

    longest = longest_sessions(convs, args.sessions)
    cases = [(name, conversation, 1, args.repeat) for name, conversation in longest]
    base_name, base = longest[0]
    cases += [
        (f"synthetic {t} turns ({base_name})", synthetic(base, t), args.headroom_every, args.synthetic_repeat)
        for t in args.turns
    ]
    rows = []
    print(
        f"{'session':<62} {'reqs':>5} {'MB':>5} {'loop':>6} {'p95':>6} {'p95L':>6} {'fresh':>6} "
        f"{'fresh ms':>8} {'same':>5} {'hr/ours':>8} {'worker':>7}"
    )
    with store_scratch() as tmp:
        for name, conversation, every, repeat in cases:
            store = args.store or f"dir:{tmp}"
            row = run_loop(
                name,
                conversation,
                store,
                policy,
                compress,
                every,
                args.per_request,
                repeat,
                args.gap_ms / 1000,
                args.fresh_tries if repeat > 1 else 1,
                args.writes == "later",
                args.round_trips == "apart",
            )
            rows.append(row)
            hr = f"{row['headroom_over_manage']:>8.1f}" if "headroom_over_manage" in row else f"{'-':>8}"
            print(
                f"{name[-62:]:<62} {row['requests']:>5} {row['last_bytes'] / 1e6:>5.2f} "
                f"{row['loop_ratio']:>6.2f} {row['p95_ratio']:>6.2f} {row['p95_ratio_large'] or 0:>6.2f} "
                f"{row['fresh_ratio']:>6.2f} "
                f"{row['fresh_ms']:>8.2f} {row['fresh_same_bytes']!s:>5} {hr} "
                f"{row['between_ms'] / row['manage_ms']:>6.2f}x",
                flush=True,
            )
            if args.breakdown:
                row["breakdown"] = breakdown(conversation, policy, store)
                print("  parts: " + "  ".join(f"{k} {v:.2f}x" for k, v in row["breakdown"].items()))
                sid = "parts-" + hashlib.blake2b(name.encode(), digest_size=6).hexdigest()
                row["fresh_breakdown"] = fresh_parts(sid, store, policy, conversation)
                print("  fresh: " + "  ".join(f"{k} {v:.2f}x" for k, v in row["fresh_breakdown"].items()))
    print("p95 within 3x needs (p95_needs): over 3x allowed, requests that write, quiet budget, least quiet")
    for row in rows:
        budget, least = row["quiet_budget_us"], row["quiet_least_us"]
        print(
            f"  {row['session'][-60:]:<60} {row['over_3x_allowed']:>3} {row['writing_requests']:>4} "
            f"{budget or 0:>8.0f} us {least or 0:>8.0f} us"
        )
    summary = {
        "headroom": compress is not None,
        "gap_ms": args.gap_ms,
        "writes": args.writes,
        "round_trips": args.round_trips,
        "worst_loop_ratio": max(r["loop_ratio"] for r in rows),
        "worst_p95_ratio": max(r["p95_ratio"] for r in rows),
        "worst_fresh_ratio": max(r["fresh_ratio"] for r in rows),
        "all_fresh_same_bytes": all(r["fresh_same_bytes"] for r in rows),
    }
    if compress is not None:
        summary["least_headroom_over_manage"] = min(r["headroom_over_manage"] for r in rows)
    for key, value in summary.items():
        print(f"{key:<28} {value:.2f}" if isinstance(value, float) else f"{key:<28} {value}")
    write_result(args.out, {"summary": summary, "rows": rows})


if __name__ == "__main__":
    main()
