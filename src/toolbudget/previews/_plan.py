"""The contract between the orchestration and the span-based strategies.

A strategy is built once per preview from the text it works on (its *view*:
the body inside any envelope, without a stderr section) and then asked for
plans at decreasing room until one fits. Analysis happens in the constructor,
so each ``plan`` call is cheap; plans are pure functions of the room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ._base import Span

__all__ = ["Cut", "Strategy"]


@dataclass(frozen=True, slots=True)
class Cut:
    """The spans of the view a strategy keeps, and what it left out in its own terms.

    ``room`` counts everything the strategy's spans and their gap lines take
    (separators, added newlines), but not the marker. When ``with_lines`` is
    set the orchestration appends the omitted line numbers to ``detail``.
    """

    spans: tuple[Span, ...]
    detail: str
    with_lines: bool = True


class Strategy(Protocol):
    def plan(self, room: int) -> Cut: ...
