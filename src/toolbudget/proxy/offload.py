"""The proxy's own work on a request, run beside its event loop instead of on it.

Managing a body is CPU work (a millisecond or two for a long history), and
its store calls wait on the store guard's worker (:mod:`toolbudget.store.guard`)
for the archive's disk or Redis. Run on the loop, every such wait stalled
every other client: no body was read, no stream chunk passed on, while one
request's cuts were written. Here each step of a managed call's flow runs on
one thread of its own, so the loop keeps moving bytes meanwhile.

One thread, not a pool: the steps run in the order they were asked for, so
two requests of one session are managed in the order they arrived (what a
session sends depends on the one before), and no two steps compete for the
interpreter, which runs one thread's Python at a time anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..flow import ManagedCall, Outcome

__all__ = ["Offload"]

T = TypeVar("T")


class Offload:
    """One worker thread for the proxy's CPU and store work, in order of submission."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolbudget-manage")
        return self._executor

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the worker thread, awaited without blocking the loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool(), fn, *args)

    async def drive(self, call: ManagedCall, send: Callable[[Any], Awaitable[Any]]) -> Outcome:
        """:func:`toolbudget.flow.adrive` with the steps that manage a body on the worker thread:
        the first (``manage``, with its cuts written to the store) and those after an error (a
        rung of the recovery ladder manages the body again). What follows an answer (reading
        it, asking for more of a cut-off one) is light and touches no store, and runs on the
        loop: each trip to the thread and back costs about a tenth of a millisecond."""
        steps = call.steps()
        done, value = await self.run(_step, steps.send, None)
        while not done:
            try:
                answer = await send(value)
            except Exception as exc:
                done, value = await self.run(_step, steps.throw, exc)
            else:
                done, value = _step(steps.send, answer)
        outcome: Outcome = value
        return outcome

    def close(self) -> None:
        """Let the thread go once its step is done; steps not begun are dropped."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _step(advance: Callable[[Any], Any], given: Any) -> tuple[bool, Any]:
    """One step of a flow: ``(False, body to send)``, or ``(True, outcome)`` when it ended.

    The end is a ``StopIteration``, which a future cannot carry: it is returned instead.
    """
    try:
        return False, advance(given)
    except StopIteration as end:
        return True, end.value
