"""Putting a cut text back where a tool result's text blocks were.

A result with several text blocks is cut as one text (its blocks joined by
newlines, which is also what recall returns). Writing that cut back must not
move anything the provider reads by position:

- **Order.** Text blocks in a row (a *run*) become one block in the run's
  place. When other blocks (an image, a document) sit between runs, the cut
  text is split back at the runs' boundaries, each piece in its own run's
  place, so a caption after an image stays after it. The split follows the
  excerpts: a preview keeps verbatim lines of the original in order, so each
  of its lines is found in the original and goes to the run it came from;
  the marker and separator lines go with the excerpt before them. A run none
  of whose lines were kept is left out (its text is in the archive).
- **Cache breakpoints.** Anthropic caches the prompt up to the end of the
  block that carries ``cache_control``. The block a run becomes ends where
  the run's last block ended, so it carries the breakpoint of the run's last
  block that had one: the cached prefix still ends at the end of that text.
  A run that is left out hands its breakpoint to the text block before it
  (or after it, when there is none before), so no breakpoint is ever lost.

Bedrock's ``cachePoint`` is a block of the message, beside the results, and
is never inside one, so a cut does not touch it.

The pieces, joined by newlines, are exactly the cut text, so reading the
result back gives the same text, and managing a managed history changes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .marker import MARKER_RE
from .model import Data, Part, Text, ToolResult, frozen_mapping
from .previews import SEPARATOR_RE
from .wire import dumps_text

__all__ = ["BREAKPOINT_KEYS", "block_text", "with_text"]

BREAKPOINT_KEYS = ("cache_control",)
"""Fields of a block that mark a prompt-cache breakpoint at the block's end."""


def block_text(part: Text | Data) -> str:
    return part.text if isinstance(part, Text) else dumps_text(part.value)


def with_text(result: ToolResult, text: str) -> ToolResult:
    """``result`` with ``text`` in place of its text blocks (see the module docstring)."""
    content = result.content
    runs: list[list[int]] = []
    prev_text = False
    for k, part in enumerate(content):
        is_text = isinstance(part, (Text, Data))
        if is_text:
            if not prev_text:
                runs.append([])
            runs[-1].append(k)
        prev_text = is_text
    if not runs:
        return replace(result, content=(*content, Text(text)))
    if len(runs) == 1:
        pieces: list[str | None] = [text]
    else:
        run_texts = ["\n".join(block_text(_texty(content[k])) for k in run) for run in runs]
        pieces = _split(text, run_texts)
    marks = [_breakpoint(content, run) for run in runs]
    # A run left out hands its breakpoint on: back to the kept run before it, else forward.
    kept = [s for s, piece in enumerate(pieces) if piece is not None]
    for s, mark in enumerate(marks):
        if mark is not None and pieces[s] is None:
            before = [t for t in kept if t < s]
            target = before[-1] if before else next(t for t in kept if t > s)
            marks[target] = mark if target < s or marks[target] is None else marks[target]
    out: list[Part] = []
    starts = {run[0]: s for s, run in enumerate(runs)}
    for k, part in enumerate(content):
        if not isinstance(part, (Text, Data)):
            out.append(part)
            continue
        at = starts.get(k)
        if at is None:
            continue  # a later block of a run: its text is in the run's one block
        piece = pieces[at]
        if piece is not None:
            out.append(_block(part, piece, marks[at]))
    return replace(result, content=tuple(out))


def _texty(part: Part) -> Text | Data:
    assert isinstance(part, (Text, Data))
    return part


def _breakpoint(content: Sequence[Part], run: Sequence[int]) -> tuple[str, Any] | None:
    """The breakpoint of the run's last block that has one."""
    for k in reversed(run):
        extra = content[k].extra
        for key in BREAKPOINT_KEYS:
            if key in extra:
                return key, extra[key]
    return None


def _block(first: Text | Data, text: str, mark: tuple[str, Any] | None) -> Text:
    """The one block a run becomes: the first block's own fields, the run's breakpoint."""
    extra = dict(first.extra) if isinstance(first, Text) else {}
    for key in BREAKPOINT_KEYS:
        extra.pop(key, None)
    if mark is not None:
        extra[mark[0]] = mark[1]
    if isinstance(first, Text):
        if text == first.text and extra == dict(first.extra):
            return first
        return replace(first, text=text, extra=frozen_mapping(extra))
    return Text(text, frozen_mapping(extra))


def _split(text: str, run_texts: Sequence[str]) -> list[str | None]:
    """``text`` (a cut of the runs joined by newlines) split back into one piece per run.

    ``None`` for a run with no line in ``text``. Pieces are consecutive lines
    of ``text``, so joined by newlines (leaving out the ``None``) they are
    ``text`` itself.
    """
    source: list[str] = []
    owner: list[int] = []
    for s, run_text in enumerate(run_texts):
        lines = run_text.split("\n")
        source.extend(lines)
        owner.extend([s] * len(lines))
    lines = text.split("\n")
    labels = _label(lines, source, owner)
    pieces: list[list[str]] = [[] for _ in run_texts]
    for line, label in zip(lines, labels, strict=True):
        pieces[label].append(line)
    return ["\n".join(p) if p else None for p in pieces]


def _is_gap(line: str) -> bool:
    return bool(MARKER_RE.search(line)) or bool(SEPARATOR_RE.fullmatch(line))


def _label(lines: Sequence[str], source: Sequence[str], owner: Sequence[int]) -> list[int]:
    """The run each line of a cut came from, never going back.

    Excerpts (the lines between gap lines) are found in the source in order,
    as a whole where possible, so a common line (a blank, a brace) does not
    pull an excerpt back to an earlier place. Their first line may be the end
    of a source line and their last its start (a giant line cut at a
    character). Lines not found, and gap lines, go with the line before. Each
    search only moves forward, so the cost stays near one pass per excerpt.
    """
    found: list[int | None] = [None] * len(lines)
    excerpts: list[tuple[int, int]] = []
    start = None
    for i, line in enumerate([*lines, None]):
        if line is None or _is_gap(line):
            if start is not None:
                excerpts.append((start, i))
            start = None
        elif start is None:
            start = i
    pos = 0
    for n, (a, b) in enumerate(excerpts):
        run = lines[a:b]
        at = None
        if n == len(excerpts) - 1 and n > 0:
            at = _match_at(run, source, len(source) - len(run), pos)  # the tail, where a tail is
        if at is None:
            at = _find(run, source, pos)
        if at is not None:
            for i in range(a, b):
                found[i] = owner[at + i - a]
            pos = at + (b - a) - 1  # the last line may be cut again after a gap (a giant line)
            continue
        for i in range(a, b):  # not as a whole: line by line, up to the first line not found
            k = _find([lines[i]], source, pos)
            if k is None:
                break
            found[i] = owner[k]
            pos = k
    labels: list[int] = []
    first = next((f for f in found if f is not None), 0)
    last = first
    for f in found:
        if f is not None and f >= last:
            last = f
        labels.append(last)
    return labels


def _find(run: Sequence[str], source: Sequence[str], pos: int) -> int | None:
    """The first index from ``pos`` where ``run`` matches the source, or ``None``."""
    head = run[0]
    for k in range(pos, len(source) - len(run) + 1):
        if head in source[k] and _match_at(run, source, k, pos) is not None:
            return k
    return None


def _match_at(run: Sequence[str], source: Sequence[str], k: int, pos: int) -> int | None:
    """``k`` when ``run`` matches the source lines from ``k`` on, else ``None``."""
    if k < pos or k + len(run) > len(source):
        return None
    last = len(run) - 1
    for i, line in enumerate(run):
        have = source[k + i]
        if line == have:
            continue
        if i == 0 and have.endswith(line):
            continue
        if i == last and have.startswith(line):
            continue
        return None
    return k
