"""The bounded side copy of a stream, read for its usage while the bytes pass through untouched.

The client gets each upstream chunk as it arrives; this only looks at a copy.
It splits the copy into server-sent events on blank lines, in bytes (a
multibyte character split across chunks is whole again by then), and parses
only the events that can hold usage: Anthropic's ``message_start`` and
``message_delta``, OpenAI Chat's last chunk, Responses' ``response.completed``
(and ``.incomplete``/``.failed``), every Gemini chunk's ``usageMetadata``.
An event longer than :data:`MAX_EVENT` is skipped, not held: no answer can
make the proxy keep more than that of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from .. import wire
from ..model import Usage

__all__ = ["MAX_EVENT", "UsageTap", "usage_of_reply"]

MAX_EVENT = 1 << 20
"""The most of one event the side copy keeps."""

_HINTS = (b'"usage', b'"usageMetadata')


def _usage_object(event: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for holder in (event, event.get("message"), event.get("response")):
        if isinstance(holder, Mapping):
            for name in ("usage", "usageMetadata"):
                found = holder.get(name)
                if isinstance(found, Mapping):
                    return found
    return None


def _merged(old: Usage | None, new: Usage) -> Usage:
    """``new``'s counts where it states them, ``old``'s elsewhere.

    Anthropic states the input in its first event and the output in its last."""
    if old is None:
        return new
    return Usage(
        new.input if new.input is not None else old.input,
        new.output if new.output is not None else old.output,
        new.cache_read if new.cache_read is not None else old.cache_read,
        new.cache_write if new.cache_write is not None else old.cache_write,
    )


def usage_of_reply(reply: Mapping[str, Any], api: str) -> Usage | None:
    """The usage a whole (non-streamed) answer states."""
    found = _usage_object(reply)
    return wire.dialect(api).read_usage(found) if found is not None else None


class UsageTap:
    """Shown every chunk of one stream; holds the usage its events stated."""

    def __init__(self, api: str) -> None:
        self._dialect = wire.dialect(api)
        self._pending = bytearray()
        self._skipping = False
        self.usage: Usage | None = None
        self.events = 0
        self.bytes = 0

    def feed(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        self._pending += chunk
        while True:
            end, size = _boundary(self._pending)
            if end < 0:
                break
            event = bytes(self._pending[:end])
            del self._pending[: end + size]
            if self._skipping:
                self._skipping = False  # the tail of an event too long to keep
                continue
            self._event(event)
        if len(self._pending) > MAX_EVENT:
            self._pending.clear()
            self._skipping = True

    def _event(self, raw: bytes) -> None:
        self.events += 1
        if not any(hint in raw for hint in _HINTS):
            return
        data = b"".join(line[5:].lstrip() for line in raw.splitlines() if line.startswith(b"data:"))
        if not data or data == b"[DONE]":
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if isinstance(event, Mapping):
            found = _usage_object(event)
            if found is not None:
                self.usage = _merged(self.usage, self._dialect.read_usage(found))


def _boundary(buffer: bytearray) -> tuple[int, int]:
    """Where the first event in ``buffer`` ends, and the length of the blank line that ends it."""
    best, size = -1, 0
    for sep in (b"\n\n", b"\r\n\r\n", b"\r\r"):
        at = buffer.find(sep)
        if at >= 0 and (best < 0 or at < best):
            best, size = at, len(sep)
    return best, size
