"""Recovery from failed provider calls: first of all, knowing what failed.

:func:`classify` reads any provider's error (SDK exception, HTTP response, or
a ``(status, body)`` pair) and says whether the prompt overflowed the context
window, ``max_tokens`` was over the model's cap, the request was too large in
bytes, the call was rate limited, or something else happened.
"""

from __future__ import annotations

from .classify import Classified, ErrorKind, classify
from .ladder import Attempt, RecoveryFailed, RecoveryReport, shrink
from .loop import Climb, acall_with_recovery, call_with_recovery

__all__ = [
    "Attempt",
    "Classified",
    "Climb",
    "ErrorKind",
    "RecoveryFailed",
    "RecoveryReport",
    "acall_with_recovery",
    "call_with_recovery",
    "classify",
    "shrink",
]
