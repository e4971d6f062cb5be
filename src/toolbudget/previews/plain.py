"""Plain text: a head, the marker, a tail, cut at line boundaries.

The end of an output is where summaries, exit codes and final errors are, so
the tail always gets what the head leaves over; ``head_ratio`` only says how
the room is shared when both ends could use all of it. Whatever one end does
not use (because its next line would not fit) goes to the other.
"""

from __future__ import annotations

from ._lines import head_end, tail_start
from ._plan import Cut

__all__ = ["PlainStrategy"]


class PlainStrategy:
    def __init__(self, text: str, head_ratio: float, nl: str) -> None:
        self.text = text
        self.head_ratio = head_ratio
        # A newline may close a head cut mid-line, and one follows the marker line.
        self.overhead = 2 * len(nl)

    def plan(self, room: int) -> Cut:
        text = self.text
        length = len(text)
        room -= self.overhead
        if room <= 0 or length == 0:
            return Cut((), "")
        head = head_end(text, 0, length, int(room * self.head_ratio))
        tail = tail_start(text, head, length, room - head)
        head = head_end(text, 0, tail, room - (length - tail))
        return Cut(((0, head), (tail, length)), "")
