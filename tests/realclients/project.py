"""The small project a client works in: files whose reads are large, and a cut to follow.

``notes/cut.txt`` holds a toolbudget marker whose ``full output`` path names a
real file with :data:`SENTINEL` in it, so a script can prove a client follows
a marker the way it will follow the proxy's: read the marker, then read the
path it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolbudget.marker import marker_line

__all__ = ["SENTINEL", "Project", "make_project"]

SENTINEL = "the-archived-original-is-here-7f3a"
KEY = "k3y0f7h3cu7r3su1t0000001"


@dataclass(frozen=True, slots=True)
class Project:
    root: Path
    log: Path
    """``app.log``: about 180 KB of lines, one in fifty an ERROR."""
    cut: Path
    """``notes/cut.txt``: a result cut by toolbudget, as a tool would show it."""
    archived: Path
    """The file the marker names."""


def make_project(root: Path) -> Project:
    log = root / "app.log"
    lines = []
    for i in range(5000):
        level = "ERROR" if i % 50 == 7 else "INFO"
        lines.append(f"{i:05d} {level} worker={i % 7} status=ok took={i * 3 % 997}ms\n")
    log.write_text("".join(lines))
    archive = root / "archive"
    archive.mkdir()
    archived = archive / f"{KEY}.txt"
    original = "".join(f"archived line {i}\n" for i in range(2000)) + SENTINEL + "\n"
    archived.write_text(original)
    notes = root / "notes"
    notes.mkdir()
    cut = notes / "cut.txt"
    marker = marker_line(
        len(original) - 200, len(original), key=KEY, path=str(archived), detail="lines 11-2001"
    )
    cut.write_text("archived line 0\narchived line 1\n" + marker + "\n")
    return Project(root, log, cut, archived)
