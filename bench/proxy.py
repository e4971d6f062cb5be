"""What the proxy adds to a call, measured against calling the upstream directly.

Two measurements, each against a fast local upstream in its own process:

``python bench/proxy.py stack``
    The choice of HTTP stack: a bare forwarder (no management) written on
    aiohttp (server and client) and one on Starlette/uvicorn with an httpx2
    client, each between the load and the upstream. What each adds at p50 and
    p99 is the cost of the stack alone. The Starlette leg needs
    ``pip install starlette uvicorn``.

``python bench/proxy.py overhead [--clients 32] [--requests 10]``
    The toolbudget proxy itself, with real bodies of about 500 KB made from the
    shared trajectories: each client is one conversation whose history grows by
    a turn per request (so every request is managed anew, as in an agent's
    loop), non-streaming and streaming; latency at p50 and p99 and, for
    streams, the time to the first byte, against the same requests sent
    directly. ``manage`` time for the same bodies, measured in-process, is
    printed beside it: the streaming TTFB should grow by no more than that.

``python bench/proxy.py agents [--clients 32] [--turns 64] [--rounds 1] [--derived] [--count] ...``
    As agents really send: each client is one session replaying the same real
    trajectory (by default the one with the most tool results whose history
    stays under 560 KB) as growing requests, request k being the history up to
    its k-th tool result, so each request extends the one before and the proxy
    manages only what was appended. Against a fast local upstream, non-streaming
    and streaming: latency and TTFB at p50 and p99 through the proxy and
    directly, and what the proxy added; the proxy's own time per request (from
    reading the body to handing it upstream, and after the answer, measured
    inside the proxy process); and ``parse + manage + write`` of the same
    requests in this process. ``--rounds`` replays it that many times per
    client, each time as new sessions (more samples for one client's p99).
    ``--manage always|never`` has the proxy manage on its worker thread, or
    on its event loop, instead of choosing by the store's waits
    (``ProxyConfig.offload``).
    ``--profile`` writes a cProfile of the proxy process to FILE.
    A bare aiohttp forwarder on the same requests is measured beside it: the
    least any proxy on this stack adds. ``--derived`` sends no session header,
    so the proxy derives each session's id from its conversation (each has a
    system prompt of its own); ``--count`` replays the requests to
    ``/v1/messages/count_tokens`` too, which the proxy manages and counts
    upstream; ``--baseline SRC`` runs the proxy of another tree (``src`` of an
    older commit) beside this one, in the same run; ``--baseline-store URL``
    gives that proxy its own store (``--baseline src --baseline-store memory:``
    shows what the ``dir:`` store costs the same code).

``python bench/proxy.py soak [--clients 200] [--seconds 60] [--agents]``
    Many clients for a while (by default 200 for 60 s), half of the requests
    streamed: errors, requests served, and the proxy's resident memory and
    open file descriptors sampled from ``/proc`` each second, compared after
    warm-up (a quarter of the way in) and at the end. By default every client
    sends one 100 KB body; ``--agents`` has each replay the real trajectory of
    ``agents`` as growing requests instead, a new session each time through,
    so sessions are made, cut into the store and dropped all along.

Every command writes what it printed as JSON too, to ``--out`` (by default
``bench/results/proxy-COMMAND.json``).

The machine is shared: read ratios taken in one run, not absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _shared import REPO, conversations, require_trajectories, scratch_parent, store_scratch, write_result  # noqa: E402

UPSTREAM_REPLY = orjson.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5},
    }
)


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


STREAM_EVENTS = [
    _event(
        {
            "type": "message_start",
            "message": {**orjson.loads(UPSTREAM_REPLY), "content": [], "stop_reason": None},
        }
    ),
    _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    *[
        _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok "}})
        for _ in range(20)
    ],
    _event({"type": "content_block_stop", "index": 0}),
    _event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}),
    _event({"type": "message_stop"}),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- the processes ---------------------------------------------------------------------------------


def serve_upstream(port: int, delay: float = 0.0) -> None:
    """A fast upstream: reads the body, answers at once (whole, or 25 events), or after ``delay``
    seconds (a provider's time to its first byte)."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if delay:
            await asyncio.sleep(delay)
        if request.path.endswith("/count_tokens"):
            return web.json_response({"input_tokens": len(body) // 4})
        if b'"stream":true' not in body:
            return web.Response(body=UPSTREAM_REPLY, content_type="application/json")
        answer = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await answer.prepare(request)
        for event in STREAM_EVENTS:
            await answer.write(event)
        await answer.write_eof()
        return answer

    app = web.Application(client_max_size=1 << 30)
    app.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def serve_aiohttp_forwarder(port: int, upstream: str) -> None:
    """A bare forwarder on aiohttp: read, post upstream, stream the answer back."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

    async def start(app: web.Application) -> Any:
        app["client"] = ClientSession(
            connector=TCPConnector(limit=1000), timeout=ClientTimeout(total=None), auto_decompress=False
        )
        yield
        await app["client"].close()

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with request.app["client"].post(upstream + request.path_qs, data=body) as up:
            answer = web.StreamResponse(status=up.status)
            answer.content_type = up.content_type
            await answer.prepare(request)
            async for chunk in up.content.iter_any():
                await answer.write(chunk)
            await answer.write_eof()
            return answer

    app = web.Application(client_max_size=1 << 30)
    app.cleanup_ctx.append(start)
    app.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def serve_starlette_forwarder(port: int, upstream: str) -> None:
    """The same forwarder on Starlette and uvicorn, with an httpx2 client."""
    import httpx2
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    client = httpx2.AsyncClient(timeout=None, limits=httpx2.Limits(max_connections=1000))

    async def handle(request: Request) -> StreamingResponse:
        body = await request.body()
        up = await client.send(
            client.build_request("POST", upstream + request.url.path, content=body), stream=True
        )

        async def relay() -> Any:
            try:
                async for chunk in up.aiter_raw():
                    yield chunk
            finally:
                await up.aclose()

        return StreamingResponse(
            relay(), status_code=up.status_code, media_type=up.headers.get("content-type")
        )

    app = Starlette(routes=[Route("/{tail:path}", handle, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextmanager
def process(*args: str, src: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """This Python on ``args`` in a child process, importing toolbudget from ``src`` (default: this tree)."""
    env = {
        **os.environ,
        "PYTHONPATH": src or str(REPO / "src"),
        "TB_BENCH_SRC": src or str(REPO / "src"),
    }
    child = subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield child
    finally:
        child.terminate()
        child.wait(timeout=30)


def wait_for(port: int, seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.05)):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


# --- the load ------------------------------------------------------------------------------------


async def load(
    url: str, bodies: Callable[[int, int], bytes], clients: int, requests: int, stream: bool
) -> tuple[list[float], list[float], int]:
    """Latencies and times to first byte (seconds) of ``clients`` x ``requests`` calls, and the errors."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector

    totals: list[float] = []
    firsts: list[float] = []
    errors = 0
    headers = {"content-type": "application/json", "x-api-key": "bench", "anthropic-version": "2023-06-01"}
    async with ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=600)) as client:

        async def one_client(index: int) -> None:
            nonlocal errors
            for turn in range(requests):
                data = bodies(index, turn)
                started = time.perf_counter()
                async with client.post(url + "/v1/messages", data=data, headers=headers) as answer:
                    first = None
                    async for _ in answer.content.iter_any():
                        if first is None:
                            first = time.perf_counter() - started
                    if answer.status != 200:
                        errors += 1
                totals.append(time.perf_counter() - started)
                firsts.append(first if first is not None else totals[-1])

        await asyncio.gather(*(one_client(i) for i in range(clients)))
    return totals, firsts, errors


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


RESULT: dict[str, Any] = {}
"""What the run measured, written to ``--out`` as JSON at the end (every figure it prints)."""


def _leg(totals: list[float], firsts: list[float], errors: int, stream: bool) -> dict[str, float]:
    """One leg's figures, ms: latency p50 and p99, and for streams the time to the first byte."""
    row = {"p50": pct(totals, 0.5), "p99": pct(totals, 0.99), "errors": errors}
    if stream:
        row |= {"ttfb_p50": pct(firsts, 0.5), "ttfb_p99": pct(firsts, 0.99)}
    return row


def real_bodies(clients: int, target: int = 500_000) -> list[dict[str, Any]]:
    """``clients`` Anthropic bodies of about ``target`` bytes, each a prefix of a real conversation."""
    from toolbudget.convert import to_request

    out: list[dict[str, Any]] = []
    for _, conversation in conversations():
        body = to_request(conversation, "anthropic")
        if len(orjson.dumps(body)) < target:
            continue
        messages = body["messages"]
        low, high = 2, len(messages)  # the longest prefix under 1.1 x target: cut off between messages
        while low < high:
            middle = (low + high + 1) // 2
            if len(orjson.dumps({**body, "messages": messages[:middle]})) <= target * 1.1:
                low = middle
            else:
                high = middle - 1
        keep = low
        if len(orjson.dumps({**body, "messages": messages[:keep]})) < target * 0.8:
            continue  # one result makes most of it: no prefix near the target
        out.append({**body, "messages": messages[:keep], "max_tokens": 1000, "model": "claude-sonnet-4-5"})
        if len(out) == clients:
            return out
    while len(out) < clients:  # fewer long conversations than clients: reuse them under other tasks
        base = out[len(out) % max(1, len(out))]
        first = {"role": "user", "content": f"task {len(out)}"}
        out.append({**base, "messages": [first, *base["messages"][1:]]})
    return out


def grown(body: dict[str, Any], turn: int, stream: bool) -> bytes:
    """``body`` a turn later: one more exchange at its end, so the proxy manages it anew."""
    extra = [
        {"role": "assistant", "content": f"step {turn} done"},
        {"role": "user", "content": f"continue with step {turn + 1}"},
    ]
    messages = list(body["messages"])
    if messages and messages[-1].get("role") == "assistant":
        messages.append({"role": "user", "content": "go on"})
    return orjson.dumps({**body, "messages": [*messages, *extra[: 2 * (turn > 0)]], "stream": stream})


# --- the commands -------------------------------------------------------------------------------


def stack(args: argparse.Namespace) -> None:
    up_port = free_port()
    small = orjson.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 2000}]}
    )
    large = orjson.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 500_000}]}
    )
    with process(__file__, "_upstream", str(up_port)):
        wait_for(up_port)
        upstream = f"http://127.0.0.1:{up_port}"
        legs = [("direct", None), ("aiohttp", "_aiohttp"), ("starlette+httpx2", "_starlette")]
        results: dict[str, dict[str, float]] = {}
        for name, kind in legs:
            if kind == "_starlette":
                try:
                    import httpx2  # noqa: F401
                    import starlette  # noqa: F401
                    import uvicorn  # noqa: F401
                except ImportError:
                    print(f"{name}: skipped (pip install starlette uvicorn httpx2)")
                    continue
            port = free_port()
            context = process(__file__, kind, str(port), upstream) if kind else None
            if context is not None:
                context.__enter__()
                wait_for(port)
            url = upstream if kind is None else f"http://127.0.0.1:{port}"
            try:
                row: dict[str, float] = {}
                for size, data in (("2KB", small), ("500KB", large)):
                    same = _same(data)
                    asyncio.run(load(url, same, args.clients, 3, False))  # warm-up
                    totals, _, errors = asyncio.run(load(url, same, args.clients, args.requests, False))
                    row[f"{size} p50"] = pct(totals, 0.5)
                    row[f"{size} p99"] = pct(totals, 0.99)
                    row[f"{size} errors"] = errors
                results[name] = row
            finally:
                if context is not None:
                    context.__exit__(None, None, None)
    direct = results["direct"]
    RESULT.update(clients=args.clients, requests=args.requests, legs=results)
    print(f"{args.clients} concurrent clients, {args.requests} requests each; ms")
    for name, row in results.items():
        shown = "  ".join(
            f"{k} {v:7.2f} (+{v - direct[k]:6.2f})" if not k.endswith("errors") else f"errors {v:g}"
            for k, v in row.items()
        )
        print(f"{name:18s} {shown}")


def _same(data: bytes) -> Callable[[int, int], bytes]:
    return lambda index, turn: data


def _turns(bodies: list[dict[str, Any]], stream: bool, start: int) -> Callable[[int, int], bytes]:
    return lambda index, turn: grown(bodies[index], start + turn, stream)


def manage_times(bodies: list[dict[str, Any]], requests: int) -> list[float]:
    """What the proxy does before its upstream call, on the same requests, in this process: parse the
    body, find its session, manage it, write it (a session per conversation, as the proxy has)."""
    from toolbudget import Policy, Sessions

    times = []
    with Sessions(store="memory:", policy=Policy()) as pool:
        for index, body in enumerate(bodies):
            for turn in range(requests):
                data = grown(body, turn, True)
                started = time.perf_counter()
                parsed = orjson.loads(data)
                session = pool.for_request(
                    parsed, api="anthropic", headers={"x-toolbudget-session": f"b{index}"}
                )
                managed = session.manage(parsed, "anthropic")
                if managed.body is not parsed:
                    orjson.dumps(managed.body)
                times.append(time.perf_counter() - started)
    return times


def overhead(args: argparse.Namespace) -> None:
    require_trajectories()
    bodies = real_bodies(args.clients)
    sizes = [len(orjson.dumps(b)) for b in bodies]
    print(f"{len(bodies)} bodies, {statistics.median(sizes) / 1000:.0f} KB median")
    up_port, proxy_port = free_port(), free_port()
    with process(__file__, "_upstream", str(up_port)):
        wait_for(up_port)
        upstream = f"http://127.0.0.1:{up_port}"
        store = f"dir:{scratch_parent() / f'toolbudget-bench-{os.getpid()}'}"
        with process(
            "-m", "toolbudget", "proxy", "--port", str(proxy_port), "--upstream", upstream, "--store", store,
            "--workers", str(args.workers),
        ):  # fmt: skip
            wait_for(proxy_port)
            proxy = f"http://127.0.0.1:{proxy_port}"
            for stream in (False, True):
                rows = {}
                for name, url in (("direct", upstream), ("proxy", proxy), ("direct again", upstream)):
                    asyncio.run(load(url, _turns(bodies, stream, 100), args.clients, 1, stream))
                    turns = _turns(bodies, stream, 0)
                    totals, firsts, errors = asyncio.run(
                        load(url, turns, args.clients, args.requests, stream)
                    )
                    rows[name] = (totals, firsts, errors)
                kind = "streaming" if stream else "non-streaming"
                RESULT.setdefault("legs", {})[kind] = {
                    name: _leg(totals, firsts, errors, stream)
                    for name, (totals, firsts, errors) in rows.items()
                }
                print(f"{kind}: {args.clients} clients x {args.requests} requests; ms")
                for name, (totals, firsts, errors) in rows.items():
                    line = f"  {name:13s} p50 {pct(totals, 0.5):8.2f}  p99 {pct(totals, 0.99):8.2f}"
                    if stream:
                        line += f"  ttfb p50 {pct(firsts, 0.5):8.2f}  p99 {pct(firsts, 0.99):8.2f}"
                    print(line + f"  errors {errors}")
    managed = manage_times(bodies, args.requests)
    RESULT.update(
        clients=args.clients,
        requests=args.requests,
        body_kb_median=statistics.median(sizes) / 1000,
        manage_in_process={"p50": pct(managed, 0.5), "p99": pct(managed, 0.99)},
    )
    print(f"parse + manage + write alone: p50 {pct(managed, 0.5):.2f} ms, p99 {pct(managed, 0.99):.2f} ms")


# --- agents: growing requests, as a session sends them ------------------------------------------


def trajectory_requests(name: str | None, turns: int, limit: int = 560_000) -> tuple[str, list[bytes]]:
    """One real trajectory as the requests an agent sends: request k is its history up to the k-th
    tool result (an Anthropic body), while under ``limit`` bytes; at most ``turns`` of them, evenly
    spaced, always ending with the longest."""
    from toolbudget.convert import to_request

    best: tuple[int, int, str, list[dict[str, Any]], dict[str, Any]] | None = None
    for label, conversation in conversations():
        if name is not None and name not in label:
            continue
        body = to_request(conversation, "anthropic")
        messages = body["messages"]
        ends = [
            i + 1
            for i, m in enumerate(messages)
            if m["role"] == "user"
            and isinstance(m["content"], list)
            and any(b.get("type") == "tool_result" for b in m["content"])
        ]
        kept = [e for e in ends if len(orjson.dumps({**body, "messages": messages[:e]})) <= limit]
        if not kept:
            continue
        size = len(orjson.dumps({**body, "messages": messages[: kept[-1]]}))
        rank = (int(len(kept) >= 30), size) if name is None else (1, len(kept))
        if best is None or rank > best[:2]:
            best = (int(rank[0]), rank[1], label, messages, {**body, "ends": kept})
    if best is None:
        raise SystemExit(f"no trajectory with tool results matches {name!r}")
    _, _, label, messages, body = best
    ends = body.pop("ends")
    if len(ends) > turns:
        step = len(ends) / turns
        ends = [ends[min(len(ends) - 1, round((i + 1) * step) - 1)] for i in range(turns)]
    base = {**body, "max_tokens": 1000, "model": "claude-sonnet-4-5"}
    return label, [orjson.dumps({**base, "messages": messages[:end]}) for end in ends]


def _streamed(data: bytes, stream: bool) -> bytes:
    return data[:-1] + (b',"stream":true}' if stream else b',"stream":false}')


async def replay(
    url: str,
    requests: list[bytes],
    clients: int,
    stream: bool,
    rounds: int = 1,
    tag: str = "",
    *,
    derived: bool = False,
    path: str = "/v1/messages",
) -> tuple[list[float], list[float], int]:
    """Each of ``clients`` sessions sends ``requests`` in order, ``rounds`` times (each round as new
    sessions, so each is managed from its first request again); latencies, TTFBs (s), errors.

    A session names itself in Claude Code's session header; with ``derived`` it names none, and its
    own system prompt makes it a conversation of its own, whose id the proxy derives from it."""
    from aiohttp import ClientSession, ClientTimeout, TCPConnector

    totals: list[float] = []
    firsts: list[float] = []
    errors = 0
    bodies = [_streamed(data, stream) for data in requests]
    async with ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=600)) as client:

        async def one_client(index: int) -> None:
            for round in range(rounds):
                await one_session(index, f"bench-session-{index}-{stream}-{tag}{round}")

        async def one_session(index: int, session: str) -> None:
            nonlocal errors
            headers = {
                "content-type": "application/json",
                "x-api-key": "bench",
                "anthropic-version": "2023-06-01",
            }
            if not derived:
                headers["x-claude-code-session-id"] = session
            system = b'{"system":' + orjson.dumps(f"You are the agent of {session}.") + b","
            for data in bodies:
                if derived:
                    data = system + data[1:]
                started = time.perf_counter()
                async with client.post(url + path, data=data, headers=headers) as answer:
                    first = None
                    async for _ in answer.content.iter_any():
                        if first is None:
                            first = time.perf_counter() - started
                    errors += answer.status != 200
                totals.append(time.perf_counter() - started)
                firsts.append(first if first is not None else totals[-1])

        await asyncio.gather(*(one_client(i) for i in range(clients)))
    return totals, firsts, errors


def serve_timed_proxy(port: int, upstream: str, store: str, profile: str, offload: str = "auto") -> None:
    """The toolbudget proxy, timing its own part of each managed request: from reading the body to
    handing it upstream, plus what follows the upstream's answer, without the upstream's own wait.
    ``GET /_bench/times`` hands the times over (and clears them); ``GET /_bench/profile`` writes the
    cProfile of the process so far to ``profile``."""
    import contextvars
    import cProfile

    from aiohttp import web

    from toolbudget.proxy import app as proxy_app
    from toolbudget.proxy.config import ProxyConfig, upstreams_of

    waited: contextvars.ContextVar[float] = contextvars.ContextVar("waited", default=0.0)
    times: list[tuple[float, float]] = []
    profiler = cProfile.Profile() if profile else None
    handle, managed, send = proxy_app.Proxy.handle, proxy_app.Proxy._managed, proxy_app.Proxy._send

    async def timed_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await send(self, *args, **kwargs)
        finally:
            waited.set(waited.get() + time.perf_counter() - started)

    async def timed_managed(self: Any, request: Any, route: Any) -> Any:
        waited.set(0.0)
        started = time.perf_counter()
        answer = await managed(self, request, route)
        times.append((time.perf_counter() - started, waited.get()))
        return answer

    async def bench_handle(self: Any, request: web.Request) -> web.StreamResponse:
        if request.path == "/_bench/times":
            out = list(times)
            times.clear()
            return web.Response(body=orjson.dumps(out), content_type="application/json")
        if request.path == "/_bench/stages":
            return await bench_stages(request)
        if request.path == "/_bench/profile" and profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
            profiler.enable()
            return web.Response(text="written")
        answer: web.StreamResponse = await handle(self, request)
        return answer

    stages = _time_stages(proxy_app)

    async def bench_stages(request: web.Request) -> web.Response:
        out = {name: list(spent) for name, spent in stages.items()}
        for spent in stages.values():
            spent.clear()
        return web.Response(body=orjson.dumps(out), content_type="application/json")

    proxy_app.Proxy._send = timed_send  # type: ignore[method-assign]
    proxy_app.Proxy._managed = timed_managed  # type: ignore[method-assign]
    proxy_app.Proxy.handle = bench_handle  # type: ignore[method-assign]
    # A tree from before ProxyConfig.offload runs too, for a comparison on the same machine.
    where: dict[str, Any] = {"offload": offload} if "offload" in ProxyConfig.__dataclass_fields__ else {}
    app = proxy_app.create_app(ProxyConfig(upstreams=upstreams_of(upstream), store=store, **where))
    if profiler is not None:
        profiler.enable()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


STAGES = (
    ("read", "reading the body"),
    ("parse", "parsing it"),
    ("session", "finding its session"),
    ("manage", "manage"),
    ("write", "writing the managed body"),
    ("records", "waiting for the session's records after the upstream"),
)


def _time_stages(proxy_app: Any) -> dict[str, list[float]]:
    """Wrap the proxy's steps with timers (about a microsecond each); the seconds of each, per call.

    A step an older tree does not have (``--baseline``) is left out."""
    from toolbudget import session as session_module
    from toolbudget import sessions as sessions_module

    stages: dict[str, list[float]] = {name: [] for name, _ in STAGES}

    def timed(spent: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - started)

        return inner

    def timed_async(spent: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
        async def inner(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - started)

        return inner

    proxy = proxy_app.Proxy
    read_body, bodies = proxy._read_body, set()

    async def timed_read(*args: Any) -> Any:
        started = time.perf_counter()
        body = await read_body(*args)
        stages["read"].append(time.perf_counter() - started)
        bodies.add(id(body))
        return body

    def timed_loads(data: Any) -> Any:
        if id(data) not in bodies:
            return orjson.loads(data)  # an upstream's answer
        bodies.discard(id(data))
        started = time.perf_counter()
        try:
            return orjson.loads(data)
        finally:
            stages["parse"].append(time.perf_counter() - started)

    proxy._read_body = timed_read
    if hasattr(proxy, "_settled"):
        proxy._settled = timed_async(stages["records"], proxy._settled)
    proxy_app.orjson = SimpleNamespace(loads=timed_loads, JSONDecodeError=orjson.JSONDecodeError)
    proxy_app.dumps = timed(stages["write"], proxy_app.dumps)
    pool = sessions_module.Sessions
    pool.for_request = timed(stages["session"], pool.for_request)  # type: ignore[method-assign]
    one = session_module.Session
    one.manage = timed(stages["manage"], one.manage)  # type: ignore[method-assign]
    return stages


def _print_stages(name: str, stages: dict[str, dict[str, list[float]]]) -> None:
    for kind, spent in stages.items():
        parts = [f"{label} {pct(spent[key], 0.5):.2f}" for key, label in STAGES if spent.get(key)]
        print(f"{name}: its steps, {kind}, p50 ms: " + ", ".join(parts))


def manage_growing(
    requests: list[bytes], clients: int, store: str = "memory:", timed: bool = False
) -> list[float]:
    """``parse + manage + write`` of each request, in this process, one session per client as the
    proxy keeps them: the same work the proxy does before its upstream call, without HTTP.

    ``timed`` tells each request's arrival and leaves its records for later, as the proxy does;
    they are written outside the time, as the proxy writes them while the upstream answers."""
    from toolbudget import Policy, Sessions

    times = []
    with Sessions(store=store, policy=Policy(), write_later=timed) as pool:
        for index in range(clients):
            headers = {"x-claude-code-session-id": f"inproc-{index}"}
            for data in requests:
                data = _streamed(data, True)
                started = time.perf_counter()
                parsed = orjson.loads(data)
                session = pool.for_request(parsed, api="anthropic", headers=headers)
                managed = session.manage(parsed, "anthropic", now=time.time() if timed else None)
                if managed.body is not parsed:
                    orjson.dumps(managed.body)
                times.append(time.perf_counter() - started)
                if timed:
                    session.write_now()
    return times


def id_costs(requests: list[bytes], repeat: int = 5) -> tuple[list[float], list[float]]:
    """Finding the id of a conversation that names none, per request (s), in this process, each with a
    warm parse cache as a proxy's pool has: the whole body parsed (what the pool did before
    :func:`toolbudget.sessions.derived_id`) and the head alone (what it does now)."""
    from toolbudget import wire
    from toolbudget.session import conversation_id
    from toolbudget.sessions import _without_billing, derived_id

    bodies = [orjson.loads(b'{"system":"You are the agent.",' + data[1:]) for data in requests]
    whole_cache, head_cache = wire.EntryCache(), wire.EntryCache()
    whole, head = [], []
    for _ in range(repeat):
        for body in bodies:
            started = time.perf_counter()
            conversation_id(_without_billing(wire.parse(body, "anthropic", whole_cache)))
            whole.append(time.perf_counter() - started)
            started = time.perf_counter()
            derived_id(body, "anthropic", head_cache)
            head.append(time.perf_counter() - started)
    return whole, head


def floor_of(data: bytes, repeat: int = 30) -> float:
    """The least any JSON proxy pays per body: parse it and write it once (s, median)."""
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        orjson.dumps(orjson.loads(data))
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def agents(args: argparse.Namespace) -> None:
    require_trajectories()
    label, requests = trajectory_requests(args.trajectory, args.turns)
    sizes = [len(r) for r in requests]
    print(f"trajectory {label}")
    print(
        f"{len(requests)} growing requests per client, {sizes[0] / 1000:.0f} KB to {sizes[-1] / 1000:.0f} KB "
        f"(median {statistics.median(sizes) / 1000:.0f} KB); {args.clients} concurrent clients; "
        f"{os.cpu_count()} cores; sessions "
        + ("derived from the conversation (no session header)" if args.derived else "named by a header")
    )
    if args.upstream_ms:
        print(f"the upstream answers after {args.upstream_ms:g} ms, as a provider would")
    timed = [("proxy", None)] + ([("baseline", args.baseline)] if args.baseline else [])
    if args.baseline:
        print(f"baseline: the proxy of the tree at {args.baseline}, run beside this one")
    up_port = free_port()
    ports = {name: free_port() for name, _ in timed}
    own: dict[str, dict[str, list[float]]] = {name: {} for name, _ in timed}
    steps: dict[str, dict[str, dict[str, list[float]]]] = {name: {} for name, _ in timed}
    cpu: dict[str, dict[str, float]] = {name: {} for name, _ in timed}
    kinds = [("whole", False, "/v1/messages"), ("stream", True, "/v1/messages")]
    if args.count:
        kinds.append(("count", False, "/v1/messages/count_tokens"))
    delay = str(args.upstream_ms / 1000)
    with process(__file__, "_upstream", str(up_port), delay), contextlib.ExitStack() as stack:
        wait_for(up_port)
        upstream = f"http://127.0.0.1:{up_port}"
        children = {}
        for name, src in timed:
            directory = scratch_parent() / f"toolbudget-agents-{os.getpid()}-{name}"
            store = args.baseline_store if name == "baseline" and args.baseline_store else f"dir:{directory}"
            profile = args.profile if name == "proxy" and args.profile else ""
            argv = (__file__, "_timed_proxy", str(ports[name]), upstream, store, profile, args.manage)
            children[name] = stack.enter_context(process(*argv, src=src))
        peer = stack.enter_context(headroom_proxy(args.headroom, upstream))
        bare = free_port()  # the floor of any proxy on this stack: read the body, post it, relay the answer
        stack.enter_context(process(__file__, "_aiohttp", str(bare), upstream))
        for port in [*ports.values(), bare]:
            wait_for(port)
        urls = {name: f"http://127.0.0.1:{ports[name]}" for name in children}
        legs = [("direct", upstream), ("forwarder", f"http://127.0.0.1:{bare}"), *urls.items()]
        if peer is not None:
            legs.append(("headroom", peer))
        legs.append(("direct again", upstream))
        for kind, stream, path in kinds:
            rows = {}
            for name, url in legs:
                # Warm-up: connections, and sessions of their own.
                asyncio.run(
                    replay(
                        url, requests[:2], args.clients, stream, tag="warm-", derived=args.derived, path=path
                    )
                )
                if name in children:
                    _bench_get(url, "/_bench/times")
                    _bench_get(url, "/_bench/stages")
                    cpu_before = _cpu_seconds(children[name].pid)
                rows[name] = asyncio.run(
                    replay(url, requests, args.clients, stream, args.rounds, derived=args.derived, path=path)
                )
                if name in children:
                    cpu[name][kind] = _cpu_seconds(children[name].pid) - cpu_before
                    times = orjson.loads(_bench_get(url, "/_bench/times"))
                    own[name][kind] = [total - wait for total, wait in times]
                    steps[name][kind] = orjson.loads(_bench_get(url, "/_bench/stages"))
            _report(rows, stream, len(requests), args.clients, "count_tokens" if kind == "count" else None)
        if args.profile:
            _bench_get(urls["proxy"], "/_bench/profile")
    served = len(requests) * args.clients * args.rounds
    RESULT.update(
        trajectory=label,
        clients=args.clients,
        requests_per_client=len(requests),
        rounds=args.rounds,
        upstream_ms=args.upstream_ms,
        request_kb=[sizes[0] / 1000, statistics.median(sizes) / 1000, sizes[-1] / 1000],
    )
    for name in children:
        RESULT.setdefault("inside", {})[name] = {
            "cpu_ms_per_request": {k: t / served * 1000 for k, t in cpu[name].items()},
            "own_ms": {k: {"p50": pct(m, 0.5), "p99": pct(m, 0.99)} for k, m in own[name].items()},
            "steps_p50_ms": {
                k: {step: pct(spent, 0.5) for step, spent in by_step.items() if spent}
                for k, by_step in steps[name].items()
            },
        }
        print(
            f"{name}: CPU time of its process per request (all its threads; steadier than wall time on a "
            "busy machine): " + ", ".join(f"{k} {t / served * 1000:.2f} ms" for k, t in cpu[name].items())
        )
        print(
            f"{name}: its own time per request (inside it, without the upstream's wait): "
            + ", ".join(
                f"{k} p50 {pct(mine, 0.5):.2f} ms p99 {pct(mine, 0.99):.2f} ms"
                for k, mine in own[name].items()
            )
        )
        _print_stages(name, steps[name])
    managed = manage_growing(requests, args.clients)
    print(
        f"parse + manage + write in one process: p50 {pct(managed, 0.5):.2f} ms, "
        f"p99 {pct(managed, 0.99):.2f} ms"
    )
    with store_scratch("toolbudget-agents-") as scratch:
        alike = manage_growing(requests, args.clients, f"dir:{scratch}", timed=True)
    print(
        "the same on a dir: store, told each arrival as the proxy is (its records written later): "
        f"p50 {pct(alike, 0.5):.2f} ms, p99 {pct(alike, 0.99):.2f} ms"
    )
    floor = floor_of(requests[-1]) * 1000
    print(f"parse + write alone of the largest body ({sizes[-1] / 1000:.0f} KB): {floor:.2f} ms")
    whole, head = id_costs(requests)
    RESULT["in_process_ms"] = {
        "parse_manage_write": {"p50": pct(managed, 0.5), "p99": pct(managed, 0.99)},
        "same_on_dir_store_timed": {"p50": pct(alike, 0.5), "p99": pct(alike, 0.99)},
        "parse_write_largest_body": floor,
        "derived_id_whole_body_p50": pct(whole, 0.5),
        "derived_id_head_p50": pct(head, 0.5),
    }
    print(
        f"a derived session id in one process: the whole body parsed p50 {pct(whole, 0.5):.3f} ms "
        f"p99 {pct(whole, 0.99):.3f} ms; its head alone p50 {pct(head, 0.5):.3f} ms "
        f"p99 {pct(head, 0.99):.3f} ms"
    )
    if args.profile:
        print(f"profile of the proxy process: {args.profile}")


@contextmanager
def headroom_proxy(executable: str | None, upstream: str) -> Iterator[str | None]:
    """Headroom's own proxy (``headroom proxy``, from the headroom-ai[proxy] install at
    ``executable``) in front of the same upstream, offline: its tiktoken vocabularies from the copies
    LiteLLM ships beside it, the Hugging Face hub off (its Kompress model is then skipped), no
    telemetry, rate limit or subscription polling; its home is a temporary directory."""
    if executable is None:
        yield None
        return

    port = free_port()
    home = tempfile.mkdtemp(prefix="headroom-home-")
    root = Path(executable).resolve().parent.parent
    vocab = next(root.glob("lib/python*/site-packages/litellm/litellm_core_utils/tokenizers"), None)
    env = {
        **os.environ,
        "HOME": home,
        "HF_HUB_OFFLINE": "1",
        "HEADROOM_TELEMETRY": "off",
        **({"TIKTOKEN_CACHE_DIR": str(vocab)} if vocab is not None else {}),
    }
    env.pop("PYTHONPATH", None)
    argv = [
        executable, "proxy", "--port", str(port), "--anthropic-api-url", upstream, "--no-telemetry",
        "--no-subscription-tracking", "--no-rate-limit", "--no-http2",
    ]  # fmt: skip
    log = Path(home) / "headroom.log"
    with log.open("wb") as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home)
        try:
            wait_for(port, 180)  # it loads its content detectors first
            yield f"http://127.0.0.1:{port}"
        finally:
            child.terminate()
            child.wait(timeout=30)
    lines = log.read_text(errors="replace").splitlines()
    failed = [line for line in lines if "failed" in line.lower() and "cost map" not in line]
    for line in failed[:3]:
        print(f"headroom logged: {line[-240:]}")
    own = [float(line.split(" opt_ms=", 1)[1].split()[0]) / 1000 for line in lines if " opt_ms=" in line]
    saved = [line.split(" total_saved=", 1)[1].split()[0] for line in lines if " total_saved=" in line]
    if own:
        print(
            f"headroom's own optimisation time per request (its log): p50 {pct(own, 0.5):.2f} ms, "
            f"p99 {pct(own, 0.99):.2f} ms; tokens saved on the last request: {saved[-1]}"
        )


def _bench_get(base: str, path: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(base + path, timeout=60) as answer:
        data: bytes = answer.read()
        return data


def _report(
    rows: dict[str, tuple[list[float], list[float], int]],
    stream: bool,
    turns: int,
    clients: int,
    kind: str | None = None,
) -> None:
    kind = kind or ("streaming" if stream else "non-streaming")
    print(f"{kind}: {clients} clients x {turns} requests; ms")
    direct = rows["direct"]
    legs = RESULT.setdefault("legs", {})[kind] = {}
    for name, (totals, firsts, errors) in rows.items():
        legs[name] = _leg(totals, firsts, errors, stream)
        if not name.startswith("direct"):
            legs[name]["added_p50"] = pct(totals, 0.5) - pct(direct[0], 0.5)
            legs[name]["added_p99"] = pct(totals, 0.99) - pct(direct[0], 0.99)
            if stream:
                legs[name]["ttfb_growth_p50"] = pct(firsts, 0.5) - pct(direct[1], 0.5)
    for name, (totals, firsts, errors) in rows.items():
        line = f"  {name:13s} p50 {pct(totals, 0.5):8.2f}  p99 {pct(totals, 0.99):8.2f}"
        if stream:
            line += f"  ttfb p50 {pct(firsts, 0.5):8.2f}  p99 {pct(firsts, 0.99):8.2f}"
        if not name.startswith("direct"):
            line += f"  added p50 {pct(totals, 0.5) - pct(direct[0], 0.5):+8.2f}"
            line += f"  p99 {pct(totals, 0.99) - pct(direct[0], 0.99):+8.2f}"
            if stream:
                line += f"  ttfb growth p50 {pct(firsts, 0.5) - pct(direct[1], 0.5):+8.2f}"
        print(line + f"  errors {errors}")


def _cpu_seconds(pid: int) -> float:
    """The user and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc(pid: int) -> tuple[int, int]:
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def soak(args: argparse.Namespace) -> None:
    from toolbudget.proxy.config import ProxyConfig

    body = orjson.dumps(
        {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "word " * 20_000}]}
    )
    growing: list[bytes] = []
    if args.agents:
        require_trajectories()
        growing = trajectory_requests(None, 64)[1]
    up_port, proxy_port = free_port(), free_port()
    with process(__file__, "_upstream", str(up_port)):
        wait_for(up_port)
        upstream = f"http://127.0.0.1:{up_port}"
        store = f"dir:{scratch_parent() / f'toolbudget-soak-{os.getpid()}'}"
        with process(
            "-m", "toolbudget", "proxy", "--port", str(proxy_port), "--upstream", upstream, "--store", store
        ) as child:
            wait_for(proxy_port)
            url = f"http://127.0.0.1:{proxy_port}"

            async def run() -> tuple[
                int, int, list[tuple[float, int, int]], list[tuple[float, dict[str, float]]]
            ]:
                from aiohttp import ClientSession, ClientTimeout, TCPConnector

                done = errors = 0
                samples: list[tuple[float, int, int]] = []
                pools: list[tuple[float, dict[str, float]]] = []
                end = time.monotonic() + args.seconds
                async with ClientSession(
                    connector=TCPConnector(limit=0), timeout=ClientTimeout(total=120)
                ) as client:

                    async def worker(index: int) -> None:
                        nonlocal done, errors
                        turn = 0
                        while time.monotonic() < end:
                            stream = turn % 2 == 1
                            headers = {"x-api-key": f"k{index % 4}"}
                            if growing:  # a new session every time the trajectory is done
                                data = _streamed(growing[turn % len(growing)], stream)
                                headers["x-claude-code-session-id"] = f"soak-{index}-{turn // len(growing)}"
                            else:
                                data = body if not stream else body[:-1] + b',"stream":true}'
                            try:
                                async with client.post(
                                    url + "/v1/messages", data=data, headers=headers
                                ) as answer:
                                    await answer.read()
                                    errors += answer.status != 200
                            except Exception:
                                errors += 1
                            done += 1
                            turn += 1

                    async def sampler() -> None:
                        while time.monotonic() < end:
                            samples.append((time.monotonic(), *_proc(child.pid)))
                            if len(samples) % 10 == 1:
                                async with client.get(url + "/metrics") as answer:
                                    pools.append((samples[-1][0], _gauges(await answer.text())))
                            await asyncio.sleep(1)

                    await asyncio.gather(sampler(), *(worker(i) for i in range(args.clients)))
                return done, errors, samples, pools

            began = time.monotonic()
            done, errors, samples, pools = asyncio.run(run())
            took = time.monotonic() - began
    warm = samples[len(samples) // 4]
    final = samples[-1]
    print(
        f"{args.clients} clients for {took:.1f} s (asked {args.seconds} s): {done} requests "
        f"({done / took:.0f}/s), {errors} errors"
    )
    print(f"warm-up ends at the sample {warm[0] - samples[0][0]:.0f} s in; {len(samples)} samples")
    growth = (final[1] / warm[1] - 1) * 100
    print(f"RSS after warm-up {warm[1] / 1024:.1f} MB, at the end {final[1] / 1024:.1f} MB ({growth:+.1f} %)")
    print(f"open fds after warm-up {warm[2]}, at the end {final[2]}")
    RESULT.update(
        clients=args.clients,
        seconds=took,
        requests=done,
        errors=errors,
        rss_mb={"after_warm_up": warm[1] / 1024, "end": final[1] / 1024, "growth_percent": growth},
        fds={"after_warm_up": warm[2], "end": final[2]},
    )
    bound = ProxyConfig().max_held_bytes
    full = [at for at, pool in pools if pool.get("toolbudget_sessions_held_bytes", 0) >= 0.95 * bound]
    if full:
        after = [rss / 1024 for at, rss, _ in samples if at >= full[0]]
        print(
            f"from when the sessions' held bytes reach the bound ({bound / 2**20:.0f} MB, "
            f"{full[0] - samples[0][0]:.0f} s in): RSS {after[0]:.1f} MB then, {after[-1]:.1f} MB at the end "
            f"({(after[-1] / after[0] - 1) * 100:+.1f} %), {min(after):.1f} to {max(after):.1f} MB between"
        )
    print("  s in    RSS MB   fds   live sessions   held MB   parse-cache entries")
    by_time = {at: (rss, fds) for at, rss, fds in samples}
    for at, pool in pools[:: max(1, len(pools) // 16)] + pools[-1:]:
        rss, fds = by_time[at]
        print(
            f"  {at - samples[0][0]:5.0f} {rss / 1024:9.1f} {fds:5d}"
            f"   {pool.get('toolbudget_sessions_live', 0):13.0f}"
            f"   {pool.get('toolbudget_sessions_held_bytes', 0) / 2**20:7.1f}"
            f"   {pool.get('toolbudget_parse_cache_entries', 0):19.0f}"
        )


def _gauges(text: str) -> dict[str, float]:
    """The pool's gauges from the proxy's ``/metrics`` text."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith(("toolbudget_sessions_", "toolbudget_parse_cache")):
            out[name] = float(value)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_upstream":
        serve_upstream(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0.0)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_aiohttp":
        serve_aiohttp_forwarder(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_starlette":
        serve_starlette_forwarder(int(sys.argv[2]), sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_timed_proxy":
        serve_timed_proxy(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, clients, requests in (("stack", 32, 20), ("overhead", 32, 10)):
        one = sub.add_parser(name)
        one.add_argument("--clients", type=int, default=clients)
        one.add_argument("--requests", type=int, default=requests)
        one.add_argument("--workers", type=int, default=1, help="the proxy's worker processes")
    replaying = sub.add_parser("agents")
    replaying.add_argument("--clients", type=int, default=32)
    replaying.add_argument("--turns", type=int, default=64, help="requests per client, at most")
    replaying.add_argument("--trajectory", help="a part of the conversation's name to replay")
    replaying.add_argument(
        "--rounds", type=int, default=1, help="times each client replays it, as new sessions each time"
    )
    replaying.add_argument("--profile", help="write a cProfile of the proxy process here")
    replaying.add_argument(
        "--derived",
        action="store_true",
        help="no session header: a system prompt of its own names each session, the proxy derives its id",
    )
    replaying.add_argument(
        "--baseline",
        metavar="SRC",
        help="also run the proxy of another tree's src directory (an older commit), in the same run",
    )
    replaying.add_argument(
        "--baseline-store",
        metavar="URL",
        help="the baseline proxy's store (with --baseline src, memory: shows what the dir: store costs)",
    )
    replaying.add_argument(
        "--count", action="store_true", help="also replay the requests to /v1/messages/count_tokens"
    )
    replaying.add_argument(
        "--upstream-ms",
        type=float,
        default=0.0,
        help="the upstream answers after this many ms, as a provider would (default: at once)",
    )
    replaying.add_argument(
        "--manage",
        choices=("auto", "always", "never"),
        default="auto",
        help="ProxyConfig.offload: manage off the event loop when the store is slow, always, or never",
    )
    replaying.add_argument(
        "--headroom",
        metavar="EXECUTABLE",
        help="the `headroom` command of a headroom-ai[proxy] install: its proxy is measured alongside",
    )
    soaking = sub.add_parser("soak")
    soaking.add_argument("--clients", type=int, default=200)
    soaking.add_argument("--seconds", type=int, default=60)
    soaking.add_argument(
        "--agents",
        action="store_true",
        help="each client replays the agents trajectory as growing requests, a new session each time",
    )
    for command in sub.choices.values():
        command.add_argument(
            "--out", help="where the JSON result goes (default bench/results/proxy-COMMAND.json)"
        )
    args = parser.parse_args()
    {"stack": stack, "overhead": overhead, "agents": agents, "soak": soak}[args.command](args)
    write_result(
        args.out or REPO / "bench" / "results" / f"proxy-{args.command}.json",
        {"command": args.command, **RESULT},
    )


if __name__ == "__main__":
    main()
