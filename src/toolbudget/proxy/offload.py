"""Where the proxy manages a body: on its event loop, or beside it when the store is slow.

Managing a body is CPU work (a millisecond or two for a long history), and
its store calls wait on the store guard's worker (:mod:`toolbudget.store.guard`)
for the archive's disk or Redis. Run on the loop, every such wait stalls
every other client: no body is read, no stream chunk passed on, while one
request's cuts are written. Run on a thread, the loop keeps moving bytes,
but each request pays for the trip there and back (two thread wake-ups, a
few tenths of a millisecond on a busy machine, measured with
``bench/proxy.py agents``), and the interpreter runs one thread's Python at
a time anyway, so the work itself is no faster.

So the choice follows the store: while its calls have lately answered within
:data:`SLOW_STORE` (:func:`~toolbudget.store.guard.recent_wait`; a memory store
is never waited for, a local disk takes a fraction of a millisecond), a step
runs on the loop; once they take longer (Redis across a network, a disk
under load, a store that hangs until the guard gives up on it), steps run on
one worker thread, until the store is quick again.

One thread, not a pool, and a step runs on the loop only when that thread has
nothing left to do: the steps run in the order they were asked for, so two
requests of one session are managed in the order they arrived (what a
session sends depends on the one before).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..flow import ManagedCall, Outcome, adrive
from ..store.guard import recent_wait

__all__ = ["SLOW_STORE", "Offload"]

T = TypeVar("T")

SLOW_STORE = 0.002
"""Seconds of recent store waits above which the proxy manages off its event loop."""


class Offload:
    """Runs the proxy's managing steps on the loop, or in order on one worker thread.

    ``always`` sends every step to the thread, whatever the store's waits.
    """

    def __init__(self, *, always: bool = False) -> None:
        self.always = always
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._queued = 0
        """Steps given to the thread and not yet finished there (a cancelled await does not end one)."""
        self.offloaded = 0
        """Steps run on the thread so far."""

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolbudget-manage")
        return self._executor

    def _on_loop(self) -> bool:
        """Whether the next step runs on the loop: the store is quick and the thread has caught up."""
        with self._lock:
            return not self.always and self._queued == 0 and recent_wait() <= SLOW_STORE

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``: here when :meth:`_on_loop` says so, else on the thread, awaited."""
        if self._on_loop():
            return fn(*args)
        with self._lock:
            self._queued += 1
        self.offloaded += 1
        return await asyncio.get_running_loop().run_in_executor(self._pool(), self._counted, fn, args)

    def _counted(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._queued -= 1

    async def drive(self, call: ManagedCall, send: Callable[[Any], Awaitable[Any]]) -> Outcome:
        """:func:`toolbudget.flow.adrive` with the steps that manage a body given to :meth:`run`."""
        return await adrive(call, send, heavy=self.run)

    def close(self) -> None:
        """Let the thread go once its step is done; steps not begun are dropped."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
