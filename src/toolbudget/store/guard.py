"""A bound on what one request may wait for its store, and a breaker for a store that hangs.

A store that is slow or stopped (a Redis paused by SIGSTOP, a hung network
mount) must cost a request at most about a second, whatever its own timeouts
and retries are, and later requests must not pay that second again until the
store answers. So every store call of a request runs on one worker thread and
is waited for only as long as the request has left of its bound (only the
waits count, not the request's own work). A call that misses it opens
the breaker: later calls fail at once with :class:`StoreError`, which the
budget turns into the "could not be kept" marker, until the stuck call has
returned and a cool-down has passed; then one call probes the store again.

The worker is a daemon thread: a call stuck for ever never keeps the process
from exiting, and never blocks a caller past its deadline.

How long the calls have lately kept their callers waiting is kept for the
whole process (:func:`recent_wait`): a caller on an event loop (the proxy)
reads it to decide whether to manage on the loop, where a wait stalls every
client, or on a thread of its own, which costs each request a trip there and
back.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ..errors import StoreError

__all__ = ["Deadline", "StoreGuard", "recent_wait"]

COOL_DOWN = 5.0
"""Seconds a store that missed a deadline is skipped before it is asked again."""

_WEIGHT = 0.2
"""The weight of the newest wait in :func:`recent_wait`: a slow call shows at once, and about
twenty fast ones in a row wear a one-second miss below a millisecond."""

_recent = [0.0]


def recent_wait() -> float:
    """Seconds store calls have lately kept their callers waiting, over every guard of the process
    (a moving average, weighted to the newest); 0.0 before any call."""
    return _recent[0]


def _note_wait(seconds: float) -> None:
    # Two threads noting at once may lose one of the two: it is a hint, never a count.
    _recent[0] += (seconds - _recent[0]) * _WEIGHT


T = TypeVar("T")


class Deadline:
    """The time one request may still spend waiting for its store.

    Only the waits count, not the wall clock since the request began: the
    request's own work between store calls (cutting hundreds of results on a
    busy machine takes seconds) is no sign of a store that hangs, and counting
    it made a healthy store look stopped, so every cut of a big session said
    it could not be kept.
    """

    def __init__(self, seconds: float) -> None:
        self._left = seconds

    def left(self) -> float:
        return self._left

    def spend(self, seconds: float) -> None:
        self._left -= max(0.0, seconds)


def _nothing() -> None:
    """A call that does nothing: its answer says the worker is past what it was doing."""


_WAKE: tuple[Future[Any], Callable[..., Any], tuple[object, ...]] = (Future(), lambda: None, ())
"""Put on a worker's queue to have it look for idle work; never run."""


class _Worker:
    """One daemon thread running store calls in order.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit,
    so a call stuck on a dead store would keep the process from ending.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[object, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._idle: list[Callable[[], bool]] = []
        self.settled = threading.Event()
        """Set while the worker has no idle work left (see :meth:`StoreGuard.settle`)."""
        self.settled.set()
        self._settling = threading.Lock()
        """Held while the idle list is compared with :attr:`settled`: a step handed over while the
        worker finds the list empty would otherwise be left pending under a set ``settled``."""
        self.thread = threading.Thread(target=self._run, name="toolbudget-store", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., T], *args: object) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((future, fn, args))
        return future

    def when_idle(self, step: Callable[[], bool]) -> None:
        """Run ``step`` whenever no call is waiting, until it returns ``False``."""
        with self._settling:
            if step not in self._idle:
                self._idle.append(step)
            self.settled.clear()
        self._queue.put(_WAKE)  # a worker waiting for a call looks again

    def stop(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            if item is _WAKE:
                continue
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as error:
                future.set_exception(error)

    def _next(self) -> tuple[Future[Any], Callable[..., Any], tuple[object, ...]] | None:
        """The next call; while none waits, one step of idle work at a time, so that a call that
        comes meanwhile waits for one step at most."""
        while self._idle and self._queue.empty():
            step = self._idle[0]
            try:
                more = step()
            except Exception:  # idle work is best effort: a step that fails is dropped
                more = False
            if not more:
                with contextlib.suppress(ValueError):
                    self._idle.remove(step)
        with self._settling:
            if not self._idle:
                self.settled.set()
        return self._queue.get()


class StoreGuard:
    """Runs store calls within a deadline, and skips a store that recently missed one."""

    def __init__(
        self, url: str, *, cool_down: float = COOL_DOWN, clock: Callable[[], float] = time.monotonic
    ):
        self.url = url
        self.cool_down = cool_down
        self._clock = clock
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._stuck: Future[Any] | None = None
        self._open_until = 0.0

    @property
    def open(self) -> bool:
        """Whether calls are being skipped now."""
        with self._lock:
            return self._is_open()

    def _is_open(self) -> bool:
        if self._stuck is not None and not self._stuck.done():
            return True
        return self._clock() < self._open_until

    def _admit(self, deadline: Deadline) -> float:
        """The time the request has left for a call, or :class:`StoreError` when the store is
        being skipped or the time is gone (called under the lock)."""
        if self._is_open():
            raise StoreError(f"the store {self.url} is not answering; skipped until it does")
        left = deadline.left()
        if left <= 0:
            raise StoreError(f"the store {self.url} used up this request's time")
        return left

    def call(self, deadline: Deadline, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)``, or :class:`StoreError` when it cannot finish within ``deadline``."""
        with self._lock:
            left = self._admit(deadline)
            if self._worker is None:
                self._worker = _Worker()
            future = self._worker.submit(fn, *args)
        started = time.monotonic()
        try:
            return future.result(timeout=left)
        except FutureTimeout:
            with self._lock:
                self._stuck = future
                self._open_until = self._clock() + self.cool_down
                # The stuck worker is left to finish on its own; the next probe gets a fresh one.
                worker, self._worker = self._worker, None
            if worker is not None:
                worker.stop()
            raise StoreError(f"the store {self.url} did not answer within {max(left, 0):.2f} s") from None
        finally:
            waited = time.monotonic() - started
            deadline.spend(waited)
            _note_wait(waited)

    def call_here(self, deadline: Deadline, fn: Callable[..., T], *args: object) -> T:
        """:meth:`call` on the caller's own thread, for a call that cannot hang
        (:meth:`~toolbudget.store.base.Store.checks_inline`).

        The trip to the worker and back costs more than such a call itself.
        The breaker and the bound hold as for :meth:`call`: a store being
        skipped is skipped here too, and a call that took longer than the
        request had left opens the breaker, so later requests skip the store.
        """
        with self._lock:
            left = self._admit(deadline)
        started = time.monotonic()
        try:
            return fn(*args)
        finally:
            waited = time.monotonic() - started
            deadline.spend(waited)
            _note_wait(waited)
            if waited > left:
                with self._lock:
                    self._open_until = self._clock() + self.cool_down

    def when_idle(self, step: Callable[[], bool]) -> None:
        """Have the worker run ``step`` between calls, until it returns ``False`` (see
        :meth:`~toolbudget.store.base.Store.idle`); nothing while the store is being skipped."""
        with self._lock:
            if self._is_open():
                return
            if self._worker is None:
                self._worker = _Worker()
            worker = self._worker
        worker.when_idle(step)

    def call_later(self, fn: Callable[..., object], *args: object) -> None:
        """``fn(*args)`` on the worker, not waited for, even while the store is skipped: a closing
        session's release, which would otherwise never be made (its holder would count as live for
        as long as this process runs). It runs when the store answers again."""
        with self._lock:
            if self._worker is None:
                self._worker = _Worker()
            self._worker.submit(fn, *args)

    def on_worker(self) -> bool:
        """Whether the calling thread is this guard's worker: a call made there would wait on
        itself (a session collected by a garbage collection the worker's own work set off).
        Without the lock: a collection may run on a thread that holds it."""
        worker = self._worker
        return worker is not None and threading.current_thread() is worker.thread

    def settle(self, timeout: float) -> bool:
        """Wait until the worker has done the idle work left to it (a write's spare files, say);
        returns whether it has. For a caller about to remove the store's files by hand."""
        with self._lock:
            worker = self._worker
        return worker is None or worker.settled.wait(timeout)

    def finish(self, deadline: Deadline) -> None:
        """Wait (within ``deadline``) until the worker has done the call or idle step it is on, so
        that a step that writes (a record of the schedule's) lands before its session's close
        returns; a step that starts after checks that the session has ended. Nothing without a
        worker, nor when the store is being skipped; never raises."""
        with self._lock:
            if self._worker is None:
                return
        with contextlib.suppress(StoreError):
            self.call(deadline, _nothing)

    def close(self) -> None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()
