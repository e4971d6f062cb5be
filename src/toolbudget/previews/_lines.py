"""Line-boundary helpers every strategy shares.

A cut lands after a newline whenever one is in reach, so excerpts are whole
lines and ``\\r\\n`` pairs stay together. When no newline is in reach (a 5 MB
minified line), the cut lands on a character boundary that splits neither a
``\\r\\n`` pair, nor a surrogate pair (a ``str`` decoded with ``surrogatepass``
can hold one), nor a base character from its combining marks or joiners.

Everything here is linear and leans on C-level ``str`` methods (``find``,
``count``, ``split``): a 100k-line log is scanned a handful of times per
preview, never once per candidate cut.
"""

from __future__ import annotations

import unicodedata
from itertools import accumulate

__all__ = ["MIN_CHAR_CUT", "head_end", "line_count", "line_starts", "newline_of", "safe_cut", "tail_start"]

MIN_CHAR_CUT = 40
"""Below this room a line is kept whole or not at all: a few characters of it say nothing."""

# How far a character cut may move to avoid splitting a cluster. A longer run of
# combining marks (zalgo text) is cut anyway: the cut is still between code points.
_MAX_NUDGE = 16
_JOINERS = frozenset("\u200d\u200c\ufe0e\ufe0f")


def newline_of(text: str) -> str:
    """The newline the text uses, so lines the preview adds match it (``\\r\\n`` or ``\\n``)."""
    first = text.find("\n", 0, 65536)
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def line_count(text: str) -> int:
    """Lines in ``text``; a trailing newline does not open a new line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _splits_cluster(text: str, i: int) -> bool:
    before, after = text[i - 1], text[i]
    if before == "\r" and after == "\n":
        return True
    if "\ud800" <= before <= "\udbff" and "\udc00" <= after <= "\udfff":
        return True
    if before in _JOINERS or after in _JOINERS:
        return True
    if "\U0001f3fb" <= after <= "\U0001f3ff":  # emoji skin-tone modifiers
        return True
    return unicodedata.combining(after) != 0 or unicodedata.category(after) in ("Me", "Mc")


def safe_cut(text: str, i: int, step: int, lo: int, hi: int) -> int:
    """``i`` moved by ``step`` (-1 or +1), within ``[lo, hi]``, until it splits no character cluster."""
    for _ in range(_MAX_NUDGE):
        if i <= lo or i >= hi or not _splits_cluster(text, i):
            break
        i += step
    return max(lo, min(hi, i))


def head_end(text: str, start: int, end: int, room: int) -> int:
    """End of the longest head of ``text[start:end]`` of at most ``room`` characters.

    The head ends after a newline when one is in reach; otherwise (a line longer
    than the room) it is cut at a safe character boundary, or is empty when the
    room is under :data:`MIN_CHAR_CUT`.
    """
    if room <= 0:
        return start
    if end - start <= room:
        return end
    reach = start + room
    newline = text.rfind("\n", start, reach)
    if newline != -1:
        return newline + 1
    return safe_cut(text, reach, -1, start, end) if room >= MIN_CHAR_CUT else start


def tail_start(text: str, start: int, end: int, room: int) -> int:
    """Start of the longest tail of ``text[start:end]`` of at most ``room`` characters.

    The tail starts at a line start when one is in reach (a line start is
    ``start`` or just after a newline); otherwise at a safe character boundary,
    or it is empty when the room is under :data:`MIN_CHAR_CUT`.
    """
    if room <= 0:
        return end
    if end - start <= room:
        return start
    reach = end - room
    if text[reach - 1] == "\n":
        return reach
    newline = text.find("\n", reach, end)
    if newline != -1 and newline + 1 < end:
        return newline + 1
    return safe_cut(text, reach, 1, start, end) if room >= MIN_CHAR_CUT else end


def line_starts(text: str, parts: list[str] | None = None) -> list[int]:
    """Start offset of every line of ``text`` (a trailing newline opens no line).

    ``parts`` is ``text.split("\\n")`` when the caller has it already. Built with
    ``map`` and ``accumulate`` (C loops), so 200k lines cost a few milliseconds.
    """
    if not text:
        return []
    parts = text.split("\n") if parts is None else parts
    starts = list(accumulate(map((1).__add__, map(len, parts[:-1])), initial=0))
    if len(starts) > 1 and starts[-1] == len(text):
        starts.pop()
    return starts
