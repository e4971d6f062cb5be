"""Tables (CSV, TSV, aligned columns like ``ps`` or ``docker ps``): the header, then whole rows.

A row is only worth anything whole and next to its header, so the preview is
the header line, whole rows from the start, the marker, and whole rows from
the end. In CSV a quoted field may hold newlines; a row then spans several
lines and is still kept or left out as one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import compress, repeat

from ._lines import line_starts
from ._plan import Cut

__all__ = ["TableStrategy", "row_starts"]


def row_starts(text: str, quoted: bool) -> list[int]:
    """Start offset of every row. With ``quoted``, newlines inside ``"…"`` do not end a row.

    A line with an odd number of quotes opens or closes a quoted field; only
    the lines between such a pair are joined, so the common case (no field
    holds a newline) costs one C-level count per line.
    """
    if not text:
        return []
    lines = text.split("\n")
    starts = line_starts(text, lines)
    if not quoted or '"' not in text:
        return starts
    odd = list(compress(range(len(lines)), map((1).__and__, map(str.count, lines, repeat('"')))))
    if not odd:
        return starts
    inside: set[int] = set()  # lines that continue a row opened on an earlier line
    for opening, closing in zip(odd[::2], [*odd[1::2], len(lines)], strict=False):
        inside.update(range(opening + 1, min(closing, len(starts) - 1) + 1))
    return [start for i, start in enumerate(starts) if i not in inside]


class TableStrategy:
    def __init__(self, text: str, kind: str, head_ratio: float, nl: str) -> None:
        self.text = text
        self.head_ratio = head_ratio
        self.overhead = 2 * len(nl)
        self.starts = row_starts(text, quoted=kind == "csv")
        # Row 0 is the header; the ends of data rows are the starts of the next ones.
        self.bounds = [*self.starts, len(text)]

    def plan(self, room: int) -> Cut:
        text = self.text
        length = len(text)
        bounds = self.bounds
        rows = len(self.starts) - 1
        room -= self.overhead
        header = bounds[1] if rows >= 0 and len(bounds) > 1 else length
        if rows <= 0 or header > room:
            return Cut((), f"rows 1-{rows} of {rows} and the header" if rows > 0 else "")
        room -= header
        # Head rows: the last row boundary within the head's share.
        head = bounds[bisect_right(bounds, header + int(room * self.head_ratio)) - 1]
        tail = bounds[bisect_left(bounds, length - (room - (head - header)))]
        head = bounds[bisect_right(bounds, min(tail, header + room - (length - tail))) - 1]
        head = max(head, header)
        first = bisect_left(bounds, head)  # 1-based number of the first omitted data row
        last = bisect_left(bounds, tail) - 1
        detail = f"rows {first}-{last} of {rows}" if last > first else f"row {first} of {rows}"
        return Cut(((0, head), (tail, length)), detail, with_lines=False)
