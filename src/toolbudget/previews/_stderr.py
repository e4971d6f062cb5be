"""Finding a separable stderr section.

Tools that capture both streams often print stderr as its own section: a
header line (``stderr:``, ``STDERR:``, ``[stderr]``, ``--- stderr ---``,
``=== stderr ===``) up to the next line that starts like a stdout header
(``stdout:``, ``STDOUT: text``…) or the end, or a ``<stderr>…</stderr>``
element. stderr is where errors are, so it is capped
separately and more generously than the rest.

Candidates are found with ``str.find`` (a regex scan of 5 MB costs ~50 ms,
``find`` a few); only their lines are checked with the header pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["find_stderr"]

_HEADER = re.compile(
    r"[ \t]*(?:\[(?P<a>std(?:err|out))\]|-{2,}[ \t]*(?P<b>std(?:err|out))[ \t]*-{2,}"
    r"|={2,}[ \t]*(?P<c>std(?:err|out))[ \t]*={2,}|(?P<d>std(?:err|out))[ \t]*:)[ \t]*\r?(?:\n|\Z)",
    re.IGNORECASE,
)
# stdout takes over at its own header, or at a line that starts with one (``STDOUT: text``).
_STDOUT = re.compile(
    r"[ \t]*(?:\[stdout\]|-{2,}[ \t]*stdout[ \t]*-{2,}|={2,}[ \t]*stdout[ \t]*={2,}|stdout[ \t]*:)",
    re.IGNORECASE,
)
_OPEN_TAG = re.compile(r"[ \t]*<stderr>", re.IGNORECASE)
_CLOSE_TAG = re.compile(r"</stderr>[ \t]*(?:\r?\n)?", re.IGNORECASE)
_SPELLINGS = {
    "stderr": (("tderr", "sS"), ("TDERR", "S")),
    "stdout": (("tdout", "sS"), ("TDOUT", "S")),
}
"""The usual spellings of each word (``stderr``, ``Stderr``, ``STDERR``) as what follows their
first letter and the first letters it may have: two passes over a long output instead of three."""


def _line_starts(text: str, word: str, start: int, end: int) -> Iterator[int]:
    """Starts of the lines of ``text[start:end]`` holding ``word`` (usual spellings), in order."""
    found: set[int] = set()
    for rest, firsts in _SPELLINGS[word]:
        at = text.find(rest, start + 1, end)  # the word begins a character before
        while at != -1:
            if text[at - 1] in firsts:
                found.add(max(start, text.rfind("\n", 0, at - 1) + 1))
            at = text.find(rest, at + 1, end)
    return iter(sorted(found))


def _header(text: str, line: int, end: int, stream: str) -> int | None:
    """End of the header line of ``stream`` starting at ``line``, if it is one."""
    found = _HEADER.match(text, line, end)
    if found is None:
        return None
    name = (found["a"] or found["b"] or found["c"] or found["d"] or "").lower()
    return found.end() if name == stream else None


def find_stderr(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``(start, end)`` of the first stderr section within ``text[start:end]``, header included.

    ``None`` when there is none, or when it holds nothing but its header.
    """
    for line in _line_starts(text, "stderr", start, end):
        tag = _OPEN_TAG.match(text, line, end)
        if tag is not None:
            close = _CLOSE_TAG.search(text, tag.end(), end)
            section, body = (line, close.end() if close else end), tag.end()
            break
        header_end = _header(text, line, end, "stderr")
        if header_end is not None:
            section_end = end
            for other in _line_starts(text, "stdout", header_end, end):
                if _STDOUT.match(text, other, end):
                    section_end = other
                    break
            section, body = (line, section_end), header_end
            break
    else:
        return None
    if not text[body : section[1]].replace("</stderr>", "").strip():
        return None
    return section
