"""Watching a stream go by, to tell at its end whether the answer was cut off.

A stream is handed to the caller as the SDK made it: same class for
``isinstance``, same methods, same events. Only its class is swapped for a
subclass whose ``__iter__``/``__next__`` (``__aiter__``/``__anext__``) and
``close`` also show each event to a :class:`Tap`. That uses nothing private
of the SDKs: every SDK stream iterates through those methods, including the
helpers built on them (``text_stream``, ``get_final_message``, ``until_done``).

The tap hands the events to the folder of the API's dialect
(:meth:`toolbudget.wire.Dialect.folder`), which folds them into the answer's
JSON as the API would have sent it without streaming, so
:func:`~toolbudget.recovery.output.is_cut_off` reads it like any answer. When
the stream ends (its last event read, an error, or ``close`` before the end),
the tap calls back once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import wire

__all__ = ["Tap", "observe"]

OnEnd = Callable[[dict[str, Any] | None, bool], None]
"""Called once with the folded answer (``None`` when nothing was seen) and whether the end was read."""


def _as_dict(event: Any, unread: frozenset[str]) -> dict[str, Any]:
    if isinstance(event, Mapping):
        return dict(event)
    dump = getattr(event, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", by_alias=True, exclude_unset=True, warnings=False, exclude=set(unread))
        if isinstance(data, dict):
            return data
    return {}


class Tap:
    """The answer of a stream, folded from its events by the folder of its API's dialect."""

    def __init__(self, api: str, on_end: OnEnd) -> None:
        self.api = api
        self.on_end = on_end
        self.ended = False
        self._folder = wire.dialect(api).folder()

    @property
    def answer(self) -> dict[str, Any] | None:
        """The answer so far, as the API would have sent it without streaming."""
        return self._folder.reply()

    def see(self, event: Any) -> None:
        folder = self._folder
        mapping = isinstance(event, Mapping)
        kind = event.get("type") if mapping else getattr(event, "type", None)
        if folder.kinds is not None and kind not in folder.kinds:
            return  # skipped unconverted: SDK helpers add many events the answer does not need
        folder.see(_as_dict(event, folder.unread))

    def end(self, finished: bool) -> None:
        if self.ended:
            return
        self.ended = True
        self.on_end(self._folder.reply(), finished)


# --------------------------------------------------------------------------- the class swap

_OBSERVED: dict[type, type] = {}


def _observed_class(cls: type) -> type:
    """A subclass of ``cls`` that shows each event to the stream's tap (one per stream class)."""
    made = _OBSERVED.get(cls)
    if made is not None:
        return made
    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": cls.__qualname__}
    if hasattr(cls, "__aiter__"):
        namespace.update(_async_methods(cls))
    else:
        namespace.update(_sync_methods(cls))
    made = type(cls.__name__, (cls,), namespace)
    _OBSERVED[cls] = made
    return made


def _tap(stream: Any) -> Tap:
    tap: Tap = stream.__dict__["_toolbudget_tap"]
    return tap


@contextlib.contextmanager
def _ending(tap: Tap, stop: type[BaseException] | tuple[()]) -> Iterator[None]:
    """Tell ``tap`` the stream ended: read to its end (``stop``), or broken off by anything else."""
    try:
        yield
    except stop:
        tap.end(True)
        raise
    except BaseException:
        tap.end(False)
        raise


def _sync_methods(cls: type) -> dict[str, Any]:
    base_iter, base_close = cls.__iter__, getattr(cls, "close", None)  # type: ignore[attr-defined]
    base_next = getattr(cls, "__next__", None)

    def __iter__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, ()):
            for item in base_iter(self):
                tap.see(item)
                yield item
        tap.end(True)

    def __next__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, StopIteration):
            item = base_next(self)  # type: ignore[misc]
        tap.see(item)
        return item

    def close(self: Any) -> Any:
        _tap(self).end(False)
        return base_close(self) if base_close is not None else None

    methods: dict[str, Any] = {"__iter__": __iter__, "close": close}
    if base_next is not None:  # an iterator; botocore's EventStream is only iterable
        methods["__next__"] = __next__
    return methods


def _async_methods(cls: type) -> dict[str, Any]:
    base_aiter, base_anext, base_close = cls.__aiter__, cls.__anext__, getattr(cls, "close", None)  # type: ignore[attr-defined]

    async def __aiter__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, ()):
            async for item in base_aiter(self):
                tap.see(item)
                yield item
        tap.end(True)

    async def __anext__(self: Any) -> Any:
        tap = _tap(self)
        with _ending(tap, StopAsyncIteration):
            item = await base_anext(self)
        tap.see(item)
        return item

    async def close(self: Any) -> Any:
        _tap(self).end(False)
        return await base_close(self) if base_close is not None else None

    return {"__aiter__": __aiter__, "__anext__": __anext__, "close": close}


def observe(stream: Any, api: str, on_end: OnEnd) -> bool:
    """Show every event of ``stream`` to a new tap; ``False`` when this stream cannot be watched."""
    cls = type(stream)
    if isinstance(stream, (Mapping, list, tuple, str, bytes)):
        return False
    if not hasattr(cls, "__iter__") and not (hasattr(cls, "__aiter__") and hasattr(cls, "__anext__")):
        return False
    try:
        stream.__dict__["_toolbudget_tap"] = Tap(api, on_end)
        stream.__class__ = _observed_class(cls)
    except (AttributeError, TypeError):
        return False
    return True
