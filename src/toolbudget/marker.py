"""The one marker grammar for every cut toolbudget makes.

A cut replaces part of a tool result with exactly one marker line. Budget
cuts, compaction and recovery all write the same grammar, so an agent (or a
person, or a regex) reads every cut the same way (one line, wrapped here)::

    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933);
     full output: /tmp/toolbudget-s1/tool-results/0123456789abcdef0123456789abcdef.txt;
     recall <<tb:0123456789abcdef0123456789abcdef>> with toolbudget_recall, by lines or grep]

- the counts say how much is missing, of how much;
- the parenthesis says what was left out, in the terms of the content (lines,
  hunks of which files, items of an array); it never holds ``;``, ``[`` or ``]``;
- ``full output`` is present for file-backed stores: a path the agent's own
  read tool can open;
- ``<<tb:KEY>>`` is the recall key, 16 to 64 characters of ``[a-z0-9]``.

When the store could not keep the original, the marker says so and carries
no key, since nothing could be recalled::

    [toolbudget: omitted 85432 of 90432 chars (lines 101-1933);
     the rest could not be kept and cannot be recalled]

:data:`MARKER_RE` matches both forms and is the documented contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KEY_RE", "MARKER_RE", "RECALL_TOOL", "Marker", "find_markers", "marker_line"]

RECALL_TOOL = "toolbudget_recall"

KEY_RE = r"[a-z0-9]{16,64}"

MARKER_RE = re.compile(
    r"\[toolbudget: omitted (?P<omitted>\d+) of (?P<total>\d+) chars"
    r"(?: \((?P<detail>[^;\[\]\n]*)\))?"
    r"(?:; full output: (?P<path>[^;\[\]\n]+))?"
    r"(?:; recall <<tb:(?P<key>" + KEY_RE + r")>> with " + RECALL_TOOL + r", by lines or grep"
    r"|; (?P<lost>the rest could not be kept and cannot be recalled))\]"
)

_UNSAFE = re.compile(r"[;\[\]\n\r]+")


@dataclass(frozen=True, slots=True)
class Marker:
    """A marker found in text: what was omitted and how to get it back."""

    omitted: int
    total: int
    detail: str
    key: str | None
    path: str | None
    start: int
    end: int


def marker_line(
    omitted: int, total: int, *, key: str | None, path: str | None = None, detail: str = ""
) -> str:
    """The marker for a cut, on one line without a newline.

    ``key`` is ``None`` when the store failed: the marker then says the rest is lost.
    """
    parts = [f"[toolbudget: omitted {omitted} of {total} chars"]
    detail = _UNSAFE.sub(" ", detail).strip()
    if detail:
        parts.append(f" ({detail})")
    if key is None:
        parts.append("; the rest could not be kept and cannot be recalled]")
        return "".join(parts)
    if path and not _UNSAFE.search(path):
        # A path the grammar cannot carry is left out rather than shown altered: a wrong path
        # could name another file. Recall by key still works.
        parts.append(f"; full output: {path}")
    parts.append(f"; recall <<tb:{key}>> with {RECALL_TOOL}, by lines or grep]")
    return "".join(parts)


def find_markers(text: str) -> list[Marker]:
    """Every marker in ``text``, in order."""
    if "[toolbudget: " not in text:
        return []
    return [
        Marker(
            int(m["omitted"]),
            int(m["total"]),
            m["detail"] or "",
            m["key"],
            m["path"],
            m.start(),
            m.end(),
        )
        for m in MARKER_RE.finditer(text)
    ]
