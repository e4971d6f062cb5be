"""Recovery from failed provider calls: first of all, knowing what failed.

:func:`classify` reads any provider's error (SDK exception, HTTP response, or
a ``(status, body)`` pair) and says whether the prompt overflowed the context
window, ``max_tokens`` was over the model's cap, the request was too large in
bytes, the call was rate limited, or something else happened.

:func:`is_cut_off` reads an answer the same way: whether it stopped at its
output limit (or the context window), and whether a tool call was cut; and
:class:`Stretch` plans the escalation and continuation that make it whole.
:class:`Climb` holds one call's way down the recovery ladder; the flow that
drives both is :class:`toolbudget.flow.ManagedCall`.

When recovery gives up, the error raised is a
:class:`~toolbudget.errors.RecoveryExhausted` made by
:func:`~toolbudget.errors.exhausted`. The ladder's own "no rung left" signal,
:class:`~toolbudget.recovery.ladder.RecoveryFailed`, is internal: the loop
turns it into that give-up, and it never reaches a caller of ``wrap``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ContextWindowFull, RecoveryExhausted, exhausted
from .classify import Classified, ErrorKind, classify
from .ladder import Attempt, RecoveryReport, shrink
from .loop import Climb, Fit, remembered_fit
from .output import Cutoff, Stretch, is_cut_off, output_cap

if TYPE_CHECKING:
    from ..flow import acall_with_recovery, call_with_recovery

__all__ = [
    "Attempt",
    "Classified",
    "Climb",
    "ContextWindowFull",
    "Cutoff",
    "ErrorKind",
    "Fit",
    "RecoveryExhausted",
    "RecoveryReport",
    "Stretch",
    "acall_with_recovery",
    "call_with_recovery",
    "classify",
    "exhausted",
    "is_cut_off",
    "output_cap",
    "remembered_fit",
    "shrink",
]


def __getattr__(name: str) -> Any:
    """The recovery-only drivers live with the flow they run (:mod:`toolbudget.flow`), loaded on use."""
    if name in ("call_with_recovery", "acall_with_recovery"):
        from .. import flow

        return getattr(flow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
