"""Running the proxy: in the foreground for the command, or on a thread of its own for tests and benchmarks.

The server cancels a handler when its client goes away (``handler_cancellation``),
which cancels the upstream call it awaits, streaming or not: a client that
gave up must not leave the model answering to nobody, nor be answered twice
when it sends the request again. Request bodies are read as they came
(``auto_decompress=False``): a body passed through keeps its encoding, and a
managed one is decoded by :mod:`.bodies`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from ..sessions import Sessions
from .app import create_app
from .config import ProxyConfig

__all__ = ["RunningProxy", "running", "serve"]


def _runner(app: web.Application) -> web.AppRunner:
    return web.AppRunner(app, handler_cancellation=True, auto_decompress=False, access_log=None)


async def _serve_forever(
    app: web.Application, host: str, port: int, ready: threading.Event | None = None
) -> None:
    runner = _runner(app)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    if ready is not None:
        ready.set()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def serve(config: ProxyConfig, host: str = "127.0.0.1", port: int = 8787) -> None:
    """Serve the proxy until interrupted."""
    app = create_app(config)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(app, host, port))


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
