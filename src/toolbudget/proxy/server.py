"""Running the proxy: in the foreground for the command, or on a thread of its own for tests and benchmarks.

The server cancels a handler when its client goes away (``handler_cancellation``),
which cancels the upstream call it awaits, streaming or not: a client that
gave up must not leave the model answering to nobody, nor be answered twice
when it sends the request again. Request bodies are read as they came
(``auto_decompress=False``): a body passed through keeps its encoding, and a
managed one is decoded by :mod:`.bodies`.

One process manages one request at a time (``manage`` is CPU work, milliseconds
for a long history), so ``workers`` processes can share the port
(``SO_REUSEPORT``) to use more cores. They need no state in common but the
store: what a request sends is a pure function of its history, and with a
shared store (``dir:`` on one machine, ``redis://`` across machines) any
worker recalls what another archived.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aiohttp import web

from ..errors import StoreConfigError, StoreError
from ..policy import Policy
from ..sessions import Sessions
from ..store import open_store
from .app import create_app
from .config import ProxyConfig
from .listen import check_listen

__all__ = ["RunningProxy", "preflight", "running", "serve"]


def preflight(config: ProxyConfig, host: str, port: int, workers: int = 1) -> None:
    """Refuse, in one :class:`InputError`, what would otherwise end each worker in a traceback.

    A store URL the app cannot open, and an address it cannot listen on, are
    found only once the server is being made, inside each worker's loop; there
    they end in a traceback per worker, and a parent whose workers all died
    exits 0. Both are tried here first, in the parent, as the app will try them.
    """
    _check_store(config)
    check_listen(host, port, reuse_port=workers > 1)


def _check_store(config: ProxyConfig) -> None:
    policy = config.policy if config.policy is not None else Policy.load()
    url = config.store if config.store is not None else (policy.store or "dir:")
    try:
        store = open_store(url)
    except StoreConfigError:
        raise
    except StoreError:
        return  # down now: the app serves anyway, and its cuts say what could not be kept
    store.close()


def _runner(app: web.Application) -> web.AppRunner:
    return web.AppRunner(app, handler_cancellation=True, auto_decompress=False, access_log=None)


async def _serve_forever(
    app: web.Application,
    host: str,
    port: int,
    *,
    reuse_port: bool = False,
    parent: int | None = None,
    announce: Callable[[], None] | None = None,
) -> None:
    # SIGTERM sets an event the loop waits on, rather than raising out of whatever
    # bytecode the signal lands in: a shutdown that begins between a lock's acquire
    # and its release, or inside a store's wait, can hang the process it was to end.
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    runner = _runner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024, reuse_port=reuse_port or None)
    await site.start()
    if announce is not None:
        announce()
    try:
        # A worker also ends with the process that started it.
        while not stopping.is_set() and (parent is None or os.getppid() == parent):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 1.0)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await runner.cleanup()


WORKER_FAILED = 2
"""The exit status of a worker that could not serve, and of ``serve`` when its workers all ended so."""


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(0)  # the parent of workers only waits on them; nothing of its own is mid-way


def _worker(config: ProxyConfig, host: str, port: int, parent: int) -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_forever(create_app(config), host, port, reuse_port=True, parent=parent))
    except OSError as exc:  # the port is taken by a socket that does not share it, or the host is not ours
        sys.stderr.write(f"toolbudget: error: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        sys.exit(WORKER_FAILED)


def serve(
    config: ProxyConfig,
    host: str = "127.0.0.1",
    port: int = 8787,
    workers: int = 1,
    *,
    announce: Callable[[], None] | None = None,
) -> int:
    """Serve the proxy until interrupted (or sent SIGTERM), in ``workers`` processes.

    ``announce`` is called once the one process listens (or once the workers
    are started), so a port in use or a bad host is the only thing said. The
    result is the exit status: 0, or :data:`WORKER_FAILED` when the workers
    ended by themselves and one failed (each says why in one line).
    """
    if workers <= 1:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve_forever(create_app(config), host, port, announce=announce))
        return 0
    signal.signal(signal.SIGTERM, _stop)
    # Forked before any thread or loop exists here, so each worker starts clean and nothing is pickled.
    context = multiprocessing.get_context("fork")
    children = [
        context.Process(target=_worker, args=(config, host, port, os.getpid())) for _ in range(workers)
    ]
    for child in children:
        child.start()
    if announce is not None:
        announce()
    try:
        for child in children:
            child.join()
    except KeyboardInterrupt:
        return 0
    finally:
        for child in children:
            if child.is_alive():
                child.terminate()
        for child in children:
            child.join(timeout=30)
    # Every worker ended of its own accord: none is serving, so a failure is the command's.
    return WORKER_FAILED if any(child.exitcode for child in children) else 0


class RunningProxy:
    """A proxy serving on a thread of its own; :attr:`url` is where."""

    def __init__(self, app: web.Application, host: str) -> None:
        self.app = app
        self.host = host
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._runner = _runner(app)
        self._thread = threading.Thread(target=self._loop.run_forever, name="toolbudget-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


@contextmanager
def running(
    config: ProxyConfig | None = None, *, sessions: Sessions | None = None, host: str = "127.0.0.1"
) -> Iterator[RunningProxy]:
    """A proxy serving on a free port of ``host`` for the ``with`` block."""
    proxy = RunningProxy(create_app(config, sessions=sessions), host)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
