"""The recovery loop around one provider call, for sync and async callers alike.

:class:`Climb` holds the state of one call: it manages the body first, and
after each failure says what to send next, or re-raises. Both drivers,
:func:`call_with_recovery` and :func:`acall_with_recovery`, are a few lines
around it, so the wrappers and the proxy share one behaviour:

- an error that is not a context overflow (rate limits, 5xx, timeouts, lost
  connections, anything unknown) is raised unchanged, at once;
- an overflow climbs the ladder, starting at the first level that fits when
  the error states the sizes, and every retry sends less than the request
  just refused (the provider's stated count, when there is one, recalibrates
  the estimate first);
- when the attempts are exhausted, the provider's original error is raised
  with the recovery report attached as ``toolbudget_report``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from .. import wire
from ..model import Request
from .classify import Classified, ErrorKind, classify
from .ladder import (
    Attempt,
    RecoveryFailed,
    RecoveryReport,
    calibration,
    estimate_tokens,
    next_rung,
    target_of,
)

if TYPE_CHECKING:
    from ..session import Managed, Session

__all__ = ["Climb", "acall_with_recovery", "call_with_recovery"]

T = TypeVar("T")


class Climb:
    """One call's way down the ladder."""

    def __init__(self, session: Session, body: Any, api: str | None = None) -> None:
        self.session = session
        self.managed: Managed = session.manage(body, api)
        self.api = self.managed.report.api
        self.original: Request = wire.parse(body, self.api)
        self.sent: Request = wire.parse(self.managed.body, self.api)
        self.body: Any = self.managed.body
        self.errors: list[Classified] = []
        self.attempts: list[Attempt] = []
        self.first_error: BaseException | None = None
        self.level = 0
        self.target: int | None = None
        self.factor = 1.0

    def report(self, recovered: bool) -> RecoveryReport:
        return RecoveryReport(tuple(self.errors), tuple(self.attempts), recovered)

    def next_body(self, error: BaseException) -> Any:
        """What to send after ``error``; raises when there is nothing to try."""
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
        if len(self.attempts) >= self.session.policy.max_recovery_attempts:
            self._give_up()
        try:
            shrunk, attempt = next_rung(
                self.session,
                self.original,
                min(self.level + 1, 3),
                target_tokens=self.target,
                factor=self.factor,
                below=estimate_tokens(self.sent),
            )
        except RecoveryFailed:
            self._give_up()
        self.level = attempt.level
        self.attempts.append(attempt)
        self.sent = shrunk
        self.body = wire.render(shrunk)
        return self.body

    def _give_up(self) -> NoReturn:
        original = self.first_error
        assert original is not None
        with contextlib.suppress(AttributeError):  # exceptions with __slots__ cannot carry it
            original.toolbudget_report = self.report(False)  # type: ignore[attr-defined]
        raise original


def call_with_recovery(
    session: Session, body: Any, send: Callable[[Any], T], api: str | None = None
) -> tuple[T, Climb]:
    """Manage ``body``, send it, and climb the ladder while the provider says it is too long."""
    climb = Climb(session, body, api)
    while True:
        try:
            return send(climb.body), climb
        except Exception as exc:
            climb.next_body(exc)


async def acall_with_recovery(
    session: Session, body: Any, send: Callable[[Any], Awaitable[T]], api: str | None = None
) -> tuple[T, Climb]:
    """:func:`call_with_recovery` for async senders."""
    climb = Climb(session, body, api)
    while True:
        try:
            return await send(climb.body), climb
        except Exception as exc:
            climb.next_body(exc)
