"""Unified diffs: every file header, whole hunks from the start and the end, never a partial hunk.

A hunk cut in half is worse than no hunk: it cannot be applied, and its line
numbers lie about what follows. So the diff is parsed into file headers and
hunks (a hunk's length comes from its own ``@@ -a,b +c,d @@`` counts, which
also tells a removed ``-- comment`` line from a ``---`` file header), every
header is kept so the model sees which files changed, and hunks are kept or
left out whole: from the start first, then from the end, a hunk too big for
what is left being skipped for smaller ones. The detail counts the left-out
hunks per file.

When even the file headers do not all fit (thousands of files in a small
room), the files from the start whose headers fit are kept, and the others
are counted in the detail (``headers of N files``) with their hunks.

Lines that belong to neither (a ``git show`` commit message, an agent's
notes between files) are kept or left out whole too, like a hunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._base import plural
from ._plan import Cut

__all__ = ["DiffStrategy", "parse_diff"]

_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# The first line after a hunk body's first that is not one of its lines: of a new file's hunk
# (all added), a deleted file's (all removed), or any other (removed, added or context).
_NOT_ADDED = re.compile(r"\n[^+]")
_NOT_REMOVED = re.compile(r"\n[^-]")
_NOT_SIGNED = re.compile(r"\n[^-+ ]")
_HEADER_PREFIXES = (
    "diff --git ",
    "diff --cc ",
    "diff -",
    "index ",
    "--- ",
    "+++ ",
    "new file mode",
    "deleted file mode",
    "old mode",
    "new mode",
    "similarity index",
    "dissimilarity index",
    "rename from",
    "rename to",
    "copy from",
    "copy to",
    "Binary files ",
    "GIT binary patch",
)
# Room for one separator line (``⋯ 1234567 lines ⋯``) and the newlines around it.
_SEP_COST = 24


@dataclass(frozen=True, slots=True)
class Unit:
    start: int
    end: int
    kind: str  # "header", "hunk" or "other"
    file: int  # index into the file names; -1 before the first file


def _file_name(header: str) -> str:
    """The path a file header is about, as the model would look it up."""
    new = old = git = ""
    for line in header.split("\n"):
        line = line.rstrip("\r")
        if line.startswith("+++ "):
            new = line[4:].split("\t")[0]
        elif line.startswith("--- "):
            old = line[4:].split("\t")[0]
        elif line.startswith("diff --git "):
            parts = line[11:].split(" b/")
            git = parts[-1] if len(parts) > 1 else line[11:]
        elif line.startswith("rename to "):
            git = line[10:]
    name = new if new and new != "/dev/null" else old if old and old != "/dev/null" else git
    for prefix in ("a/", "b/"):
        if name.startswith(prefix):
            name = name[2:]
    return name or "?"


def _hunk_end_fast(text: str, body: int, stop: int, old: int, new: int) -> int | None:
    """``stop`` if the hunk whose body is ``text[body:stop]`` ends exactly there, else ``None``.

    ``stop`` is the next hunk or file line. When the body's removed, added and
    context lines are exactly what the ``@@`` counts say, the hunk ends there
    (counted with ``str.count``, at C speed); otherwise (empty lines, stray
    lines, the ``--- ``/``+++ `` pair of a plain ``diff -u``) the caller walks
    the body line by line.
    """
    # Counted in place (no copy of the body), in as few C-level passes over it as may be: the
    # hunk ends there when every line starts with one of "-+ \\" (an empty line starts with
    # none) and the counts agree.
    if body >= stop or text[body] not in "-+ " or text.find("\r", body, stop) != -1:
        return None
    first = text[body]
    # Each line but the first starts after a newline (the body's own last newline starts none).
    lines = text.count("\n", body, stop) + (text[stop - 1] != "\n")
    if not old or not new:
        # A new or deleted file's hunk: its lines all add (or all remove), but for "\\" flags.
        # When the lines that do are as many as its header says and the rest are flags, no line
        # is context or of the other sign, so one count tells what the three below would.
        sign = "+" if not old else "-"
        signed = text.count("\n" + sign, body, stop) + (first == sign)
        if signed != old + new:
            return None
        return stop if signed == lines or signed + text.count("\n\\", body, stop) == lines else None
    removed = text.count("\n-", body, stop) + (first == "-")
    added = text.count("\n+", body, stop) + (first == "+")
    context = text.count("\n ", body, stop) + (first == " ")
    if removed + context != old or added + context != new:
        return None
    started = removed + added + context
    if started == lines:
        return stop  # no line is left to be a "\\ No newline" flag or anything else
    return stop if started + text.count("\n\\", body, stop) == lines else None


def _hunk_end_scan(text: str, body: int, old: int, new: int) -> int | None:
    """Where the hunk whose body starts at ``body`` ends, found in one scan, or ``None`` when this
    way cannot tell (the caller then looks as :func:`_hunk_end_fast` does).

    The body's lines are read up to the first that cannot be one of them (for a
    new file's hunk, the first not added); when that line opens the next hunk
    or file (or the text ends there), it is where :func:`_hunk_end_fast` would
    stop, and the lines before it are all signed, so the ``@@`` counts are
    checked with the removed and added lines counted (none for a new or deleted
    file: its lines are all of one sign). A flag, an empty or a stray line is
    left to the caller. An 868 KB diff of new files took four passes over its
    text this way takes two.
    """
    length = len(text)
    if body >= length:
        return None
    first = text[body]
    if not old or not new:
        sign = "+" if not old else "-"
        if first != sign:
            return None
        found = (_NOT_ADDED if sign == "+" else _NOT_REMOVED).search(text, body)
    else:
        if first not in "-+ ":
            return None
        found = _NOT_SIGNED.search(text, body)
    stop = length if found is None else found.start() + 1
    if stop < length and not text.startswith(("@@ ", "diff "), stop):
        return None
    if text.find("\r", body, stop) != -1:
        return None
    lines = text.count("\n", body, stop) + (text[stop - 1] != "\n")
    if not old or not new:
        return stop if lines == old + new else None
    removed = text.count("\n-", body, stop) + (first == "-")
    added = text.count("\n+", body, stop) + (first == "+")
    context = lines - removed - added
    return stop if removed + context == old and added + context == new else None


def _next_line(text: str, prefix: str, start: int) -> int:
    """Start of the next line at or after ``start`` that begins with ``prefix``; the end if none."""
    found = text.find("\n" + prefix, start - 1)
    return len(text) if found == -1 else found + 1


def parse_diff(text: str) -> tuple[list[Unit], list[str]]:
    """The diff as file headers, hunks and other lines, in order, covering the whole text."""
    units: list[Unit] = []
    files: list[str] = []
    length = len(text)
    pos = 0
    other_start = -1
    next_hunk = next_file = (
        next_old
    ) = -1  # where the next "@@ ", "diff " and "--- " lines start, found lazily

    def line_end(at: int) -> int:
        found = text.find("\n", at)
        return length if found == -1 else found + 1

    def flush_other(at: int) -> None:
        nonlocal other_start
        if other_start >= 0:
            units.append(Unit(other_start, at, "other", len(files) - 1))
            other_start = -1

    while pos < length:
        end = line_end(pos)
        if text.startswith("@@ ", pos):
            found = _HUNK.match(text, pos)
            if found:
                flush_other(pos)
                old = int(found[1]) if found[1] is not None else 1
                new = int(found[2]) if found[2] is not None else 1
                cur = _hunk_end_scan(text, end, old, new)
                if cur is not None:
                    units.append(Unit(pos, cur, "hunk", len(files) - 1))
                    pos = cur
                    continue
                if next_hunk < end:
                    next_hunk = _next_line(text, "@@ ", end)
                if next_file < end:
                    next_file = _next_line(text, "diff ", end)
                cur = _hunk_end_fast(text, end, min(next_hunk, next_file), old, new)
                if cur is not None:
                    units.append(Unit(pos, cur, "hunk", len(files) - 1))
                    pos = cur
                    continue
                cur = end
                while cur < length and (old > 0 or new > 0 or text.startswith("\\", cur)):
                    first = text[cur]
                    if first == "-":
                        old -= 1
                    elif first == "+":
                        new -= 1
                    elif first in " \r\n":
                        old -= 1
                        new -= 1
                    elif first != "\\":
                        break
                    cur = line_end(cur)
                units.append(Unit(pos, cur, "hunk", len(files) - 1))
                pos = cur
                continue
        starts_file = text.startswith("diff ", pos) or (
            text.startswith("--- ", pos) and text.startswith("+++ ", end)
        )
        if starts_file:
            flush_other(pos)
            cur = end
            while (
                cur < length and text.startswith(_HEADER_PREFIXES, cur) and not text.startswith("diff ", cur)
            ):
                cur = line_end(cur)
            files.append(_file_name(text[pos:cur]))
            units.append(Unit(pos, cur, "header", len(files) - 1))
            pos = cur
            continue
        if other_start < 0:
            other_start = pos
        # The lines up to the next one that may open a hunk or a file are other lines too.
        if next_hunk < end:
            next_hunk = _next_line(text, "@@ ", end)
        if next_file < end:
            next_file = _next_line(text, "diff ", end)
        if next_old < end:
            next_old = _next_line(text, "--- ", end)
        pos = min(next_hunk, next_file, next_old)
    flush_other(length)
    return units, files


class DiffStrategy:
    def __init__(self, text: str, head_ratio: float) -> None:
        self.text = text
        self.head_ratio = head_ratio
        self.units, self.files = parse_diff(text)
        self.hunks = sum(u.kind == "hunk" for u in self.units)

    @property
    def usable(self) -> bool:
        return self.hunks > 0

    def plan(self, room: int) -> Cut:
        units = self.units
        headers = [i for i, u in enumerate(units) if u.kind == "header"]
        header_cost = sum(units[i].end - units[i].start for i in headers)
        gaps_max = len(headers) + 1
        keep: set[int] = set()
        if header_cost + gaps_max * _SEP_COST <= room:
            keep.update(headers)
            budget = room - header_cost - gaps_max * _SEP_COST
            optional = [i for i, u in enumerate(units) if u.kind != "header"]
            used = 0

            def take(order: list[int], allowed: int) -> None:
                # A hunk too big for what is left is skipped whole; smaller ones after it may fit.
                nonlocal used
                for i in order:
                    size = units[i].end - units[i].start + _SEP_COST
                    if i not in keep and used + size <= allowed:
                        keep.add(i)
                        used += size

            take(optional, int(budget * self.head_ratio))
            take(optional[::-1], budget)
            take(optional, budget)
        else:
            used = 0
            for i in headers:
                size = units[i].end - units[i].start + _SEP_COST
                if used + size > room:
                    break
                keep.add(i)
                used += size
        spans = tuple((units[i].start, units[i].end) for i in sorted(keep))
        return Cut(spans, self._detail(keep), with_lines=False)

    def _detail(self, keep: set[int]) -> str:
        per_file: dict[int, int] = {}
        left_hunks = other_lines = 0
        dropped_headers = 0
        for i, unit in enumerate(self.units):
            if i in keep:
                continue
            if unit.kind == "hunk":
                left_hunks += 1
                per_file[unit.file] = per_file.get(unit.file, 0) + 1
            elif unit.kind == "header":
                dropped_headers += 1
            else:
                other_lines += self.text.count("\n", unit.start, unit.end) or 1
        parts: list[str] = []
        if left_hunks:
            listed: list[str] = []
            shown = 0
            for file, count in sorted(per_file.items()):
                entry = f"{self.files[file] if file >= 0 else '?'} {count}"
                if shown >= 6 or sum(len(x) + 2 for x in listed) + len(entry) > 140:
                    break
                listed.append(entry)
                shown += 1
            more = len(per_file) - shown
            tail = f" and {plural(more, 'more file')}" if more else ""
            parts.append(f"left out {left_hunks} of {self.hunks} hunks: {', '.join(listed)}{tail}")
        if dropped_headers:
            parts.append(f"headers of {plural(dropped_headers, 'file')}")
        if other_lines:
            parts.append(plural(other_lines, "other line"))
        return ", ".join(parts) if parts else ""
