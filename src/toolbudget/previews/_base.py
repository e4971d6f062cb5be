"""What every strategy shares: the result type, the marker callback, and the layout of kept spans.

Most strategies (plain, table, diff, log) decide which *spans* of the original
to keep. The layout turns spans into the preview text the same way for all of
them: excerpts verbatim and in order, the marker line in the first gap, and a
small separator line (``⋯ 120 lines ⋯``) in every other gap, so no cut is ever
silent and the preview still holds exactly one marker. A separator never
contains ``[toolbudget:``, so nothing mistakes it for a marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._lines import line_count

__all__ = [
    "SEPARATOR_RE",
    "MarkerFn",
    "Piece",
    "Preview",
    "Span",
    "clean_detail",
    "describe_gaps",
    "detail_cost",
    "gaps_of",
    "layout",
    "layout_size",
    "merge_spans",
    "pieces_size",
    "plural",
    "render",
    "separator",
]

MarkerFn = Callable[[int, str], str]
"""``marker(omitted_chars, detail)`` -> one marker line without a newline."""

Span = tuple[int, int]
"""A kept ``[start, end)`` slice of the original text."""

SEPARATOR_RE = re.compile(r"⋯ \d+ (?:lines?|chars?) ⋯")
"""What a separator line looks like (tests use it to take a preview apart)."""

# Not in a marker's parenthesis: its grammar's delimiters, line breaks and control characters,
# and what JSON would escape (a JSON preview holds the marker as a string, verbatim).
_UNSAFE = re.compile(r"[;\[\]\"\\\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_MAX_DETAIL = 240


@dataclass(frozen=True, slots=True)
class Preview:
    """What the model sees in place of an over-long tool result.

    ``omitted`` counts characters of the original that are not shown, and
    ``detail`` says what they are in the content's own terms (lines, rows,
    hunks of which files, items of an array); it is the marker's parenthesis.
    """

    text: str
    kind: str
    omitted: int
    detail: str


def plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def clean_detail(detail: str) -> str:
    """``detail`` made fit for the marker's parenthesis: one bounded line of plain characters."""
    detail = _UNSAFE.sub(" ", detail)
    detail = " ".join(detail.split())
    if len(detail) > _MAX_DETAIL:
        cut = detail.rfind(" ", 0, _MAX_DETAIL - 1)
        detail = detail[: cut if cut > 0 else _MAX_DETAIL - 1] + "…"
    return detail


def detail_cost(detail: str) -> int:
    """Characters a detail adds to a marker: `` (detail)``."""
    return len(detail) + 3 if detail else 0


def separator(text: str, start: int, end: int) -> str:
    """The line standing for an omitted gap that is not the marker's."""
    lines = text.count("\n", start, end)
    if lines:
        return f"⋯ {plural(lines, 'line')} ⋯"
    return f"⋯ {plural(end - start, 'char')} ⋯"


def merge_spans(spans: Sequence[Span]) -> list[Span]:
    """Sorted, non-empty, non-touching spans."""
    out: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def gaps_of(spans: Sequence[Span], length: int) -> list[Span]:
    """The omitted stretches between merged ``spans`` of a text of ``length``."""
    gaps: list[Span] = []
    pos = 0
    for start, end in spans:
        if start > pos:
            gaps.append((pos, start))
        pos = end
    if pos < length:
        gaps.append((pos, length))
    return gaps


Piece = Span | str | None
"""A span of the original, text the preview adds, or ``None`` where the marker goes."""


def layout(text: str, spans: Sequence[Span], nl: str) -> list[Piece]:
    """The preview of ``spans`` as pieces: excerpts in order, the marker line in the first gap,
    a separator line in every other gap."""
    pieces: list[Piece] = []
    length = len(text)
    pos = 0
    marked = False
    ends_line = True
    for start, end in [*spans, (length, length)]:
        if start > pos:
            if not ends_line:
                pieces.append(nl)
            if marked:
                pieces.append(separator(text, pos, start))
            else:
                pieces.append(None)
                marked = True
            ends_line = False
            if start < length:
                pieces.append(nl)
                ends_line = True
        if end > start:
            pieces.append((start, end))
            ends_line = text[end - 1] == "\n"
        pos = end
    if not marked:  # nothing omitted: never planned, but the marker must still appear once
        if not ends_line:
            pieces.append(nl)
        pieces.append(None)
    return pieces


def pieces_size(pieces: Sequence[Piece]) -> int:
    """Length of the rendered pieces, not counting the marker itself."""
    total = 0
    for piece in pieces:
        if isinstance(piece, tuple):
            total += piece[1] - piece[0]
        elif piece is not None:
            total += len(piece)
    return total


def layout_size(text: str, spans: Sequence[Span], nl: str) -> int:
    """Length of the rendered layout of ``spans``, not counting the marker itself."""
    return pieces_size(layout(text, spans, nl))


def render(text: str, pieces: Sequence[Piece], marker: str) -> str:
    out: list[str] = []
    for piece in pieces:
        if isinstance(piece, tuple):
            out.append(text[piece[0] : piece[1]])
        else:
            out.append(marker if piece is None else piece)
    return "".join(out)


def describe_gaps(text: str, gaps: Sequence[Span], total: int | None = None) -> str:
    """The omitted lines in line terms, 1-based, as the recall tool counts them.

    ``total`` is ``line_count(text)`` when the caller knows it already.
    """
    if not gaps:
        return ""
    if total is None:
        total = line_count(text)
    first_start = gaps[0][0]
    last_end = gaps[-1][1]
    a = text.count("\n", 0, first_start) + 1
    b = a + text.count("\n", first_start, last_end - 1)
    whole = (first_start == 0 or text[first_start - 1] == "\n") and (
        last_end == len(text) or text[last_end - 1] == "\n"
    )
    if len(gaps) > 1:
        return f"left out lines {a}-{b} of {total} in {len(gaps)} stretches"
    if whole:
        return f"line {a} of {total}" if a == b else f"lines {a}-{b} of {total}"
    if a == b:
        return f"{plural(last_end - first_start, 'char')} of line {a} of {total}"
    return f"lines {a}-{b} of {total}, partly"
