"""An aiohttp app served on a free loopback port from its own thread.

The clients under test are separate processes; the servers they talk to (the
scripted upstream, a relay) run in the test process, each with its own event
loop in a daemon thread, so a test reads what they recorded directly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

__all__ = ["Handler", "ThreadedApp"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ThreadedApp:
    """Serves every method and path with ``handler`` on ``127.0.0.1``; :meth:`stop` ends it."""

    def __init__(self, handler: Handler, name: str) -> None:
        self._handler = handler
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "not started"
        return self._loop

    def start(self) -> None:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self._name} did not start in 10 s")
        if failure:
            raise failure[0]

    async def _serve(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handler)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        sockets: list[Any] = list(getattr(site._server, "sockets", None) or [])
        if not sockets:
            raise RuntimeError(f"{self._name} has no listening socket")
        self.port = int(sockets[0].getsockname()[1])

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
