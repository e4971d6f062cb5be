"""The wrapped client itself: its copies stay wrapped, its session is exposed, and closing it closes that.

``with_options``, ``copy`` and ``with_middleware`` make a new SDK client; the
wrapped ones return it wrapped, sharing the session (one conversation, one
archive). ``client.toolbudget`` is that session, for answering recall calls
(``client.toolbudget.handle_recall(arguments)``) or managing a body by hand.

Closing the client closes the session ``wrap`` made for it
(:class:`~._proxy.Held`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._proxy import Held, Owned
from ._resource import Namespace, Tree

__all__ = ["AsyncClientProxy", "ClientProxy"]

_LOW_LEVEL = (
    "/messages",
    "/count_tokens",
    "/messages/batches",
    "/chat/completions",
    "/responses",
    "/responses/compact",
)


class _Base(Namespace, Held):
    tree: ClassVar[Tree] = {}

    def __init__(self, inner: Any, wrapping: Any) -> None:
        Namespace.__init__(self, inner, wrapping, type(self).tree)

    def _again(self, inner: Any) -> Any:
        return type(self)(inner, self._wrapping)

    def with_options(self, *args: Any, **kwargs: Any) -> Any:
        return self._again(self._inner.with_options(*args, **kwargs))

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        return self._again(self._inner.copy(*args, **kwargs))

    def with_middleware(self, *middleware: Any) -> Any:
        return self._again(self._inner.with_middleware(*middleware))

    def post(self, path: str, *args: Any, **kwargs: Any) -> Any:
        """The SDK's low-level ``post``, refused for the conversation endpoints it would send unmanaged."""
        _refuse_low_level(path)
        return self._inner.post(path, *args, **kwargs)

    def request(self, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        """The SDK's lowest-level call (what ``post`` itself uses), refused like ``post``."""
        _refuse_request(options)
        return self._inner.request(cast_to, options, *args, **kwargs)


def _refuse_request(options: Any) -> None:
    """A hand-built request's options (``FinalRequestOptions``): refused when they post to a conversation."""
    if str(getattr(options, "method", "")).lower() == "post":
        _refuse_low_level(getattr(options, "url", ""))


def _refuse_low_level(path: Any) -> None:
    from ..errors import UnsupportedClient

    where = str(path).split("?", 1)[0].rstrip("/")
    if where.endswith(_LOW_LEVEL):
        raise UnsupportedClient(
            f"post({where!r}) is not managed by toolbudget: a hand-made request to a conversation "
            "endpoint is sent as given; use the resource's create method"
        )


class ClientProxy(_Base, Owned):
    """A wrapped sync client."""


class AsyncClientProxy(_Base):
    """A wrapped async client: :class:`ClientProxy` with ``async`` closing."""

    async def post(self, path: str, *args: Any, **kwargs: Any) -> Any:
        _refuse_low_level(path)
        return await self._inner.post(path, *args, **kwargs)

    async def request(self, cast_to: Any, options: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_request(options)
        return await self._inner.request(cast_to, options, *args, **kwargs)

    async def close(self) -> None:
        try:
            await self._inner.close()
        finally:
            self._wrapping.close()

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._inner.__aexit__(*exc)
        finally:
            self._close_session()
