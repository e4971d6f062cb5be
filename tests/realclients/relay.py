"""A byte-for-byte relay: the smallest hop, to prove a hop can sit between client and upstream.

It forwards every request (method, path, query, headers but the hop-by-hop
ones, body) and streams each answer back chunk by chunk as it arrives, as
the proxy must (``shared/reference/integrations.md`` §3, §4.2). ``rewrite``
may change a conversation body on the way, which is how the tests show that a
hop breaking the history is caught by the upstream's checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import aiohttp
from aiohttp import web

from .serving import ThreadedApp

__all__ = ["HOP_BY_HOP", "Relay", "relay"]

HOP_BY_HOP = frozenset(
    {
        "connection",
        "content-length",
        "expect",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

Rewrite = Callable[[str, bytes], bytes]


class Relay:
    """Forwards to ``target`` (a root URL); ``rewrite(path, body)`` may change request bodies."""

    def __init__(self, target: str, rewrite: Rewrite | None = None) -> None:
        self.target = target.rstrip("/")
        self.rewrite = rewrite
        self.forwarded = 0
        self._session: aiohttp.ClientSession | None = None
        self._server = ThreadedApp(self._handle, "relay")

    @property
    def url(self) -> str:
        return self._server.url

    async def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
            )
        return self._session

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.rewrite is not None and body:
            body = self.rewrite(request.path, body)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        session = await self._client()
        async with session.request(
            request.method, self.target + request.path_qs, headers=headers, data=body, allow_redirects=False
        ) as upstream:
            answer = web.StreamResponse(
                status=upstream.status,
                headers={k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP},
            )
            await answer.prepare(request)
            async for chunk in upstream.content.iter_any():
                await answer.write(chunk)
            await answer.write_eof()
        self.forwarded += 1
        return answer

    def start(self) -> Relay:
        self._server.start()
        return self

    def stop(self) -> None:
        session = self._session
        if session is not None:
            import asyncio

            asyncio.run_coroutine_threadsafe(session.close(), self._server.loop).result(10)
        self._server.stop()


@contextmanager
def relay(target: str, rewrite: Rewrite | None = None) -> Iterator[str]:
    """A hop for :data:`realclients.fixtures.HOPS`: a relay to ``target``, for the test's length."""
    hop = Relay(target, rewrite).start()
    try:
        yield hop.url
    finally:
        hop.stop()
