"""The recovery ladder's state for one provider call.

:class:`Climb` holds the state of one call: it manages the body first, and
after each failure says what to send next, or re-raises. It sends nothing:
:class:`toolbudget.flow.ManagedCall` drives it, so the wrappers and the proxy
share one behaviour:

- an error that is not a context overflow (rate limits, 5xx, timeouts, lost
  connections, anything unknown) is raised unchanged, at once;
- an overflow climbs the ladder, starting at the first level that fits when
  the error states the sizes, and every retry sends less than the request
  just refused (the provider's stated count, when there is one, recalibrates
  the estimate first);
- when the attempts are exhausted, :meth:`Climb.retry` says so with ``None``,
  and the caller (:class:`toolbudget.flow.ManagedCall`) raises the give-up,
  which carries the provider's first error and the report.

A session remembers what fit. A long session that overflowed once would
otherwise pay a refused round trip on every later turn, since each request is
the last one plus a little. So after a call that needed recovery, the session
keeps (in memory, per API and model) the level that was answered, the size of
the smallest request refused, and the target and calibration the errors gave.
The next call starts its ladder at that level, without sending the managed
history first, when that history is at least as large as the refused request
or, with a known target, its calibrated estimate is over it. Otherwise the
history goes as managed. The memory is:

- replaced after every call that recovered (from a refusal or from memory);
- cleared when a history sent as managed (level 0) is answered: the estimate
  showed room (compaction shrank the history, or it is a new, smaller one),
  and the provider agreed;
- left as it was when a call fails for another reason, or gives up.

It is a pure function of the session's calls and their answers: the same calls
answered the same way send the same bytes.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import wire
from ..measure import estimate_tokens
from ..model import Request
from .classify import Classified, ErrorKind, classify
from .ladder import (
    Attempt,
    RecoveryFailed,
    RecoveryReport,
    calibration,
    next_rung,
    target_of,
)

if TYPE_CHECKING:
    from ..session import Managed, Session

__all__ = ["Climb", "Fit", "remembered_fit"]


@dataclass(frozen=True, slots=True)
class Fit:
    """What the last recovered call of a session learnt, for its next call."""

    level: int
    """The level that was answered."""
    refused: int
    """The estimate (uncalibrated) of the smallest request refused: anything as large is refused too."""
    fitted: int
    """The estimate (uncalibrated) of the request that was answered."""
    target: int | None
    """Prompt tokens that fit, when an error stated the limit."""
    factor: float
    """Provider tokens per estimated token, from the last error that stated a count."""


_Key = tuple[str, str | None]  # the API and the model: another model has another window

# Held beside the session rather than in it: it lives and dies with the session object.
_MEMORY: weakref.WeakKeyDictionary[Session, dict[_Key, Fit]] = weakref.WeakKeyDictionary()


def remembered_fit(session: Session, api: str, model: str | None) -> Fit | None:
    """What ``session`` remembers fit for ``api`` and ``model``, if anything."""
    return _MEMORY.get(session, {}).get((api, model))


class Climb:
    """One call's way down the ladder."""

    def __init__(
        self, session: Session, body: Any, api: str | None = None, *, now: float | None = None
    ) -> None:
        self.session = session
        self.managed: Managed = session.manage(body, api, now=now)
        self.api = self.managed.report.api
        self.original: Request = self.managed.original
        self.sent: Request = self.managed.request
        self.body: Any = self.managed.body
        self.errors: list[Classified] = []
        self.attempts: list[Attempt] = []
        self.first_error: BaseException | None = None
        self.level = 0
        self.target: int | None = None
        self.factor = 1.0
        self.key: _Key = (self.api, self.original.model)
        self.refused: int | None = None
        self.remembered = False
        self.reason: str | None = None
        """Why :meth:`retry` found nothing left to try."""
        self._start_from_memory()

    def _start_from_memory(self) -> None:
        """Start at the level that fit last time, when the managed history would be refused again."""
        fit = remembered_fit(self.session, *self.key)
        if fit is None or self.session.policy.max_recovery_attempts < 1:
            return
        size = estimate_tokens(self.sent)
        over = fit.target is not None and estimate_tokens(self.sent, fit.factor) > fit.target
        if size < fit.refused and not over:
            return  # the estimate shows room: send it as managed
        try:
            shrunk, attempt = next_rung(
                self.session,
                self.original,
                fit.level,
                target_tokens=fit.target,
                factor=fit.factor,
                below=fit.refused,
            )
        except RecoveryFailed:
            return  # nothing smaller is known to fit: let the provider say
        self.target, self.factor, self.refused = fit.target, fit.factor, fit.refused
        self.remembered = True
        self._send(shrunk, attempt)

    def _send(self, shrunk: Request, attempt: Attempt) -> None:
        self.level = attempt.level
        self.attempts.append(attempt)
        self.sent = shrunk
        self.body = wire.render(shrunk)

    def answered(self) -> None:
        """The last body sent was answered: remember what fit, or forget it when nothing was cut."""
        if not self.attempts:
            _MEMORY.get(self.session, {}).pop(self.key, None)
            return
        assert self.refused is not None  # an attempt follows a refusal, or a remembered one
        fit = Fit(self.level, self.refused, estimate_tokens(self.sent), self.target, self.factor)
        _MEMORY.setdefault(self.session, {})[self.key] = fit

    def report(self, recovered: bool) -> RecoveryReport:
        return RecoveryReport(tuple(self.errors), tuple(self.attempts), recovered, self.remembered)

    def retry(self, error: BaseException) -> Any:
        """What to send after ``error``: the next body, or ``None`` when there is nothing left to try.

        An error that is not a context overflow is raised again, unchanged.
        """
        classified = classify(error)
        if classified.kind is not ErrorKind.CONTEXT_OVERFLOW:
            raise error
        if self.first_error is None:
            self.first_error = error
        self.errors.append(classified)
        if classified.limit is not None:
            self.target = target_of(classified)
        if classified.prompt_tokens:
            # Measured on what was just refused, the latest and closest in shape to what comes next.
            self.factor = calibration(classified, self.sent)
        refused = estimate_tokens(self.sent)
        self.refused = refused if self.refused is None else min(self.refused, refused)
        if len(self.attempts) >= self.session.policy.max_recovery_attempts:
            self.reason = f"{len(self.attempts) + 1} requests were refused as too long"
            return None
        try:
            shrunk, attempt = next_rung(
                self.session,
                self.original,
                min(self.level + 1, 3),
                target_tokens=self.target,
                factor=self.factor,
                below=refused,
            )
        except RecoveryFailed as exc:
            self.reason = str(exc)
            return None
        self._send(shrunk, attempt)
        return self.body
