"""Patterns anchored at line starts, searched from newline to newline.

Python's regex engine tries a MULTILINE pattern that opens with ``^`` at every
position of a text, nearly all of them mid-line, at ~10 ns each: detection and
the log strategy spent most of their time there. Written as ``\\n(?:pattern)``
and run over ``"\\n" + text``, the pattern opens with a literal, which the engine
skips to at C speed, so it is tried at line starts alone, and the same lines
match (``^`` holds after a newline; the added one stands for the start of the
text, and like the start it is no word character).
"""

from __future__ import annotations

import re
from itertools import islice

__all__ = ["LinePattern"]


class LinePattern:
    """A MULTILINE pattern each of whose alternatives opens with ``^``: it only matches at line starts.

    :meth:`search` finds what ``pattern.search`` finds. :meth:`count` and
    :meth:`starts` find the matches ``findall`` and ``finditer`` find provided no
    match ends with a newline: the next match could start right there, with no
    newline left to open it. The patterns counted end otherwise.

    ``needs``: literals (or patterns) of which every match holds one. A text with
    none of them is not scanned; worth it only where the pattern itself is slow,
    since a scan for a literal that is not there costs about as much as this one.
    """

    __slots__ = ("_led", "needs", "pattern")

    def __init__(self, pattern: str, needs: tuple[str | re.Pattern[str], ...] = ()) -> None:
        self.pattern = re.compile(pattern, re.MULTILINE)  # the plain form, which tests hold this one to
        self._led = re.compile(f"\\n(?:{pattern})", re.MULTILINE)
        self.needs = needs

    def _may(self, text: str) -> bool:
        return not self.needs or any(
            need in text if isinstance(need, str) else need.search(text) is not None for need in self.needs
        )

    def search(self, text: str) -> bool:
        return self._may(text) and self._led.search("\n" + text) is not None

    def count(self, text: str, most: int | None = None) -> int:
        """How many matches ``findall`` finds; ``most`` when there are at least that many."""
        if not self._may(text):
            return 0
        if most is None:
            return len(self._led.findall("\n" + text))
        return sum(1 for _ in islice(self._led.finditer("\n" + text), most))

    def starts(self, text: str, pos: int = 0) -> list[int]:
        """Where the matches of ``pattern.finditer(text, pos)`` start.

        From ``pos > 0`` the newline before ``pos``, if there is one, leads the
        first line; one after it leads the next: no copy of the text is made.
        """
        if not self._may(text):
            return []
        if pos <= 0:
            return [found.start() for found in self._led.finditer("\n" + text)]  # the newline's place
        return [found.start() + 1 for found in self._led.finditer(text, pos - 1)]
