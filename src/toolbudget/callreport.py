"""What toolbudget did for one call of a wrapped client, in one frozen record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .recovery.classify import Classified
from .recovery.ladder import Attempt, RecoveryReport
from .recovery.output import Cutoff
from .session import Report

__all__ = ["CallReport"]


@dataclass(frozen=True, slots=True)
class CallReport:
    """One call: the history as managed, the recovery from overflows, and the cut-offs met.

    Given to ``on_report`` and set as ``toolbudget_report`` on the object the
    call returned (the SDK's response, or its stream).
    """

    api: str
    managed: Report
    """What managing the history did (cuts, repairs, tokens before and after)."""
    recovery: RecoveryReport
    """The overflow errors met and the ladder levels tried."""
    escalations: int = 0
    """How many times ``max_tokens`` was doubled after a cut-off answer."""
    continuations: int = 0
    """How many continuation requests were sent after the escalations."""
    cutoffs: tuple[Cutoff, ...] = ()
    """Every cut-off answer met, in order (the first is the answer to the request as sent)."""
    final_cutoff: Cutoff | None = None
    """The answer returned is itself cut off, and its stop reason says so; ``None`` when it is whole."""
    dropped_calls: int = 0
    """Truncated tool calls removed from the answer returned, so nothing runs them."""
    followup_error: Classified | None = None
    """A follow-up (escalation or continuation) failed with this, ending them early."""
    stream: bool = False
    stream_finished: bool | None = None
    """For a stream: whether its last event was read. ``None`` for other calls."""

    @property
    def level(self) -> int:
        """The recovery level that produced the answer (0: the history as managed was enough)."""
        return self.recovery.level

    @property
    def tokens_sent(self) -> int:
        """The estimated tokens of the history that got the answer: the last recovery level's, when
        the history as managed (``managed.tokens_after``) was refused as too long."""
        attempts = self.recovery.attempts
        return attempts[-1].tokens if attempts else self.managed.tokens_after

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        return self.recovery.attempts

    @property
    def recovered(self) -> bool:
        """The provider refused the history as too long, and a smaller one was answered."""
        return self.recovery.recovered

    @property
    def complete(self) -> bool:
        """The answer returned is whole (for a stream: its end was read and it was not cut off)."""
        return self.final_cutoff is None and self.stream_finished is not False

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form, for logs."""

        def cutoff(c: Cutoff | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {
                "reason": c.reason,
                "tool_call": c.tool_call,
                "context_window": c.context_window,
                "output_tokens": c.output_tokens,
            }

        error = self.followup_error
        return {
            "api": self.api,
            "managed": self.managed.as_dict(),
            "recovery": {
                "level": self.level,
                "recovered": self.recovered,
                "errors": [
                    {
                        "kind": e.kind.value,
                        "status": e.status,
                        "prompt_tokens": e.prompt_tokens,
                        "limit": e.limit,
                    }
                    for e in self.recovery.errors
                ],
                "attempts": [
                    {
                        "level": a.level,
                        "estimated_tokens": a.estimated_tokens,
                        "dropped_messages": a.dropped_messages,
                        "archive_key": a.archive_key,
                        "cuts": a.cuts,
                    }
                    for a in self.attempts
                ],
            },
            "escalations": self.escalations,
            "continuations": self.continuations,
            "cutoffs": [cutoff(c) for c in self.cutoffs],
            "final_cutoff": cutoff(self.final_cutoff),
            "dropped_calls": self.dropped_calls,
            "followup_error": None if error is None else {"kind": error.kind.value, "status": error.status},
            "stream": self.stream,
            "stream_finished": self.stream_finished,
        }
