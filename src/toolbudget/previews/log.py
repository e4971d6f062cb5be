"""Logs, test runs, compiler output, stack traces: keep the errors, whole, and the summary.

In a long log the lines that matter are few and scattered: the error and
warning lines, the stack traces, and the runner's summary at the end. A head
and tail alone would show the start-up noise and the summary but not *which*
test failed *where*. So the preview is a short head, the marker, the
important excerpts in their original order (each with two lines of context
before and after, a stack trace always as a whole unit), separated by small
``⋯ N lines ⋯`` lines, then a tail that holds the summary.

When the excerpts do not all fit, the first error (often the cause) and the
ones nearest the end (nearest the summary, the most recent state) win, in a
fixed order, so the same log always gives the same preview.

Speed: Python's regex engine needs ~100 ms to scan 5 MB for a dozen words,
so important lines are found with ``str.find`` on lower-cased chunks (C
speed) and only candidates are checked with a regex. Chunks are scanned from
the end, and scanning stops once :data:`MAX_HITS` important lines are known:
no preview can show more, and the first error is then found by a forward
scan that stops at the first hit.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from ._base import Span, merge_spans, plural
from ._linepattern import LinePattern
from ._lines import head_end, tail_start
from ._plan import Cut

__all__ = ["MAX_HITS", "LogStrategy", "important_lines", "looks_like_log"]

MAX_HITS = 1500
"""Important lines collected from the end of a log (plus the first one)."""

# Each costs one pass of str.find over the text (~1 ms per MB). A traceback's header has a pass
# of its own, and its last line names the exception.
_KEYWORDS = ("error", "fail", "fatal", "panic", "exception", "warn", "critical")
_WORD = re.compile(
    r"(?:errors?|fail(?:ed|ures?|s|ing)?|fatal|panic(?:ked|s)?|traceback|exceptions?|warn(?:ings?|s)?|critical)"
    r"(?![a-z])",
    re.IGNORECASE,
)
_PY_TRACE = "Traceback (most recent call last):"
_FRAMES = re.compile(r"(?:[ \t]+at [^\n]*(?:\n|\Z))+")
_GOROUTINE = re.compile(r"^goroutine \d+ \[[^\]\n]*\]:[ \t]*\r?$", re.MULTILINE)
_SUMMARY = LinePattern(
    r"^(?:=+ [^\n]{0,200}?\b(?:passed|failed|errors?|skipped|deselected|xfailed|xpassed|no tests ran)\b"
    r"[^\n]{0,200}? =+"
    r"|=+ short test summary info =+"
    r"|Ran \d+ tests? in .*"
    r"|(?:FAILED|OK)(?: \(.*\))?"
    r"|(?:Tests|Test Suites|Snapshots):[ \t]+[^\n]{0,200}?\b(?:passed|failed|total)\b[^\n]{0,200}"
    r"|(?:ok|FAIL)[ \t]+\S+[ \t]+(?:[\d.]+s|\(cached\))[^\n]*|FAIL|PASS"
    r"|test result: .*"
    r"|error: could not compile .*|error: aborting due to .*"
    r"|Found \d+ errors? in .*|\d+ errors? generated\.?|BUILD (?:SUCCESS|FAILURE|FAILED).*"
    r")[ \t]*\r?$"
)
_CHUNK = 262144
_CONTEXT_BEFORE = 2
_CONTEXT_AFTER = 2
_SUMMARY_WINDOW = 16384
_SUMMARY_GAP = 30  # most lines between two lines of one summary
_MAX_TRACE_LINES = 400
_TRACE_WINDOW = 8192  # characters below a traceback's header searched at once for its end
_DUMP_REACH = 4096  # how far below a Go panic its goroutine dump may start
_SEP_COST = 24
_HEAD_SHARE = 0.12
_TAIL_SHARE = 0.25
_TAIL_MIN_SHARE = 0.08
_SUMMARY_SHARE = 0.6


@functools.cache
def _closer(indent: int) -> re.Pattern[str]:
    """The newline before a line with text and at most ``indent`` blanks before it.

    Text: a character ``str.strip`` keeps (``\\S`` is its complement); blanks: what
    ``str.lstrip(" \\t")`` takes.
    """
    return re.compile(rf"\n[ \t]{{0,{indent}}}+(?![ \t])(?=[^\n]*\S)")


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    """End of the line holding ``pos``, newline included."""
    found = text.find("\n", pos)
    return len(text) if found == -1 else found + 1


def important_lines(text: str, lo: int, hi: int, chunk: str | None = None) -> list[int]:
    """Start offsets of the lines holding an important word within ``text[lo:hi]``, ascending.

    Important: a word-ish error, fail(ed), fatal, panic, exception, warning,
    critical or traceback (any case, also as a CamelCase suffix like
    ``AssertionError``), or a pytest ``E   `` detail line.
    """
    return _important(text, lo, hi, text[lo:hi] if chunk is None else chunk)[0]


def _important(text: str, lo: int, hi: int, chunk: str) -> tuple[list[int], bool]:
    """:func:`important_lines`, and whether the words were looked for in the lower case.

    (Not when lowering changes the chunk's length: a line's hits then depend on the
    chunk, since the original is searched as it is.)
    """
    low = chunk.lower()
    lowered = len(low) == len(chunk)
    if not lowered:  # a character whose lower case is longer: search the original
        low = chunk
    found: set[int] = set()
    # The line helpers are inlined in this loop, which runs once per word found.
    for word in _KEYWORDS:
        i = low.find(word)
        while i != -1:
            at = lo + i
            before = text[at - 1] if at > 0 else "\n"
            word_start = not before.isalpha() or (before.islower() and text[at].isupper())
            if word_start and _WORD.match(text, at):
                found.add(text.rfind("\n", 0, at) + 1)
                end = text.find("\n", at)
                if end == -1:
                    break  # the last line: nothing of this word after it
                i = low.find(word, end + 1 - lo)
            else:
                i = low.find(word, i + 1)
    i = chunk.find(_PY_TRACE)
    while i != -1:
        found.add(_line_start(text, lo + i))
        i = chunk.find(_PY_TRACE, i + 1)
    i = chunk.find("\nE  ")
    while i != -1:
        found.add(lo + i + 1)
        i = chunk.find("\nE  ", i + 1)
    if chunk.startswith("E  "):
        found.add(lo)
    return sorted(found), lowered


def _word_at(text: str, at: int) -> bool:
    """Whether an important word starts at ``at``, as :func:`important_lines` takes one."""
    before = text[at - 1] if at > 0 else "\n"
    word_start = not before.isalpha() or (before.islower() and text[at].isupper())
    return word_start and _WORD.match(text, at) is not None


def looks_like_log(text: str) -> bool:
    """Whether a sample has any important line (plain text then previews as a log).

    That is whether :func:`important_lines` finds one, stopping at the first.
    """
    if text.startswith("E  ") or "\nE  " in text or _PY_TRACE in text:
        return True
    low = text.lower()
    if len(low) != len(text):
        low = text
    for word in _KEYWORDS:
        i = low.find(word)
        while i != -1:
            if _word_at(text, i):
                return True
            i = low.find(word, i + 1)
    return False


@dataclass(frozen=True, slots=True)
class _Unit:
    """Characters ``[start, end)``, whole lines, worth keeping together."""

    start: int
    end: int


class LogStrategy:
    def __init__(self, text: str, nl: str) -> None:
        self.text = text
        self.overhead = 2 * len(nl)
        self.hits: list[int] = []
        self.traces: list[Span] = []
        # Whether the hits are every important line, each found as a scan of its line alone
        # would find it (see _important_in).
        self.every_hit = False
        self._collect()
        self.summary = self._summary()
        self.units = self._units()
        self.unit_starts = [u.start for u in self.units]

    # Analysis, once per preview.

    def _chunks_backward(self) -> Iterator[Span]:
        text = self.text
        hi = len(text)
        while hi > 0:
            lo = _line_start(text, max(0, hi - _CHUNK)) if hi > _CHUNK else 0
            if lo >= hi:  # pragma: no cover - a line start before hi always exists
                lo = 0
            yield lo, hi
            hi = lo

    def _scan(self, lo: int, hi: int) -> tuple[list[int], list[Span], bool]:
        """Important lines and traces of ``text[lo:hi]``, and whether its words were lowered."""
        text = self.text
        chunk = text[lo:hi]
        hits, lowered = _important(text, lo, hi, chunk)
        traces: list[Span] = []
        if not hits:
            return hits, traces, lowered  # every kind of trace has an important line
        start = chunk.find(_PY_TRACE)
        while start != -1:
            traces.extend(self._py_trace(lo + start))
            start = chunk.find(_PY_TRACE, start + 1)
        # Java/JS frames follow the exception's line; a Go dump follows a panic or fatal error.
        for hit in hits:
            below = text.find("\n", hit) + 1 or len(text)  # the line's end (inlined: once per hit)
            frames = _FRAMES.match(text, below) if below < hi else None
            if frames:
                traces.append((hit, frames.end()))
            if text.startswith(("panic: ", "fatal error: "), hit):
                dump = _GOROUTINE.search(text, below, min(len(text), below + _DUMP_REACH))
                if dump:
                    blank = text.find("\n\n", dump.end())
                    traces.append((hit, len(text) if blank == -1 else blank + 1))
        return hits, traces, lowered

    def _py_trace(self, at: int) -> list[Span]:
        """A Python traceback from its header line through the exception line."""
        text = self.text
        start = _line_start(text, at)
        if text[start:at].strip(" \t"):
            return []  # quoted inside some other line
        indent = at - start
        pos = _line_end(text, at)
        # The exception line is the first one below with text and no deeper indent than the
        # header's. Looked for newline by newline within a window; only when it is not there,
        # or more lines down than a traceback may have, are the lines read one by one.
        closer = _closer(indent).search(text, pos - 1, min(len(text), pos + _TRACE_WINDOW))
        if closer is not None:
            end = text.find("\n", closer.start() + 1) + 1 or len(text)
            lines = text.count("\n", pos, end) + (end == len(text) and not text.endswith("\n"))
            if lines <= _MAX_TRACE_LINES:
                return [(start, end)]
        for _ in range(_MAX_TRACE_LINES):
            if pos >= len(text):
                break
            end = _line_end(text, pos)
            line = text[pos:end]
            pos = end
            if line.strip() and len(line) - len(line.lstrip(" \t")) <= indent:
                break  # the exception line closes the traceback
        return [(start, pos)]

    def _collect(self) -> None:
        """Important lines and traces, from the end backwards until enough, plus the first ones."""
        chunks: list[tuple[list[int], list[Span]]] = []
        count = 0
        reached = len(self.text)
        every_lowered = True
        for lo, hi in self._chunks_backward():
            hits, traces, lowered = self._scan(lo, hi)
            chunks.append((hits, traces))
            count += len(hits)
            every_lowered &= lowered
            reached = lo
            if count >= MAX_HITS:
                break
        self.every_hit = reached == 0 and every_lowered
        if reached > 0:  # the first error, if it lies before what was scanned
            pos = 0
            while pos < reached:
                hi = min(reached, _line_end(self.text, min(len(self.text) - 1, pos + _CHUNK)))
                hits, traces, _ = self._scan(pos, hi)
                if hits or traces:
                    chunks.append((hits[:1], traces[:1]))
                    break
                pos = hi
        self.hits = sorted({h for hits, _ in chunks for h in hits})
        self.traces = sorted({t for _, traces in chunks for t in traces})

    def _summary(self) -> Span | None:
        """Characters of the runner's summary: the last summary lines, close together."""
        text = self.text
        found = _SUMMARY.starts(text, max(0, len(text) - _SUMMARY_WINDOW))
        if not found:
            return None
        first = found[-1]
        for start in reversed(found):
            if text.count("\n", start, first) > _SUMMARY_GAP:
                break
            first = start
        return first, _line_end(text, found[-1])

    def _units(self) -> list[_Unit]:
        """Error lines with their context, and traces, merged where they touch.

        Error lines often come in runs. A hit on a line of the context after the hit before
        it has the rest of that context for its own, a line or two longer, and lies inside
        that unit: so its unit is found from there, the lines before it not looked for (the
        units merge all the same).
        """
        text = self.text
        length = len(text)
        raw: list[Span] = list(self.traces)
        ends: list[int] = []  # where the last hit's line, and each line after it in its context, end
        # The line helpers are inlined: this runs for every hit.
        for hit in self.hits:
            if hit in ends[:-1]:
                ends = ends[ends.index(hit) + 1 :]
                start = hit
            else:
                ends = []
                start = hit
                for _ in range(_CONTEXT_BEFORE):
                    if start == 0:
                        break
                    start = text.rfind("\n", 0, start - 1) + 1
            end = ends[-1] if ends else hit
            while len(ends) < 1 + _CONTEXT_AFTER:  # the hit's own line, then the lines after it
                if end < length:
                    end = text.find("\n", end) + 1 or length
                ends.append(end)
            raw.append((start, end))
        return [_Unit(s, e) for s, e in merge_spans(raw)]

    # Planning, once per room tried.

    def plan(self, room: int) -> Cut:
        text = self.text
        length = len(text)
        room -= self.overhead
        if room <= 0 or not length:
            return Cut((), "")
        # The tail holds the summary; without one, the last lines. Excerpts come first, and
        # whatever they leave goes to the tail afterwards.
        tail_room = int(room * (_TAIL_SHARE if not self.units else _TAIL_MIN_SHARE))
        if self.summary is not None:
            block = length - _line_start(text, self.summary[0])
            if block <= room * _SUMMARY_SHARE:
                tail_room = max(tail_room, block)
        head = head_end(text, 0, length, min(int(room * _HEAD_SHARE), room - tail_room))
        tail = self._snap(tail_start(text, head, length, tail_room), head, room - head - tail_room)
        budget = room - head - (length - tail)
        kept: list[Span] = []
        for unit in self._priority():
            start, end = max(unit.start, head), min(unit.end, tail)
            if end <= start:
                continue
            cost = end - start + _SEP_COST
            if cost <= budget:
                kept.append((start, end))
                budget -= cost
        # What the excerpts leave goes to the tail, then to the head.
        if budget > 0:
            tail = self._snap(tail_start(text, head, length, length - tail + budget), head, 0)
            middle = sum(e - s + _SEP_COST for s, e in kept if s < tail)
            head = head_end(text, 0, tail, room - (length - tail) - middle)
        spans = tuple(merge_spans([(0, head), *kept, (tail, length)]))
        return Cut(spans, self._detail(spans))

    def _snap(self, tail: int, head: int, spare: int) -> int:
        """A tail start inside a unit moved back to the unit's start, when ``spare`` allows."""
        unit = self._unit_at(tail)
        if unit is None:
            return tail
        start = max(head, unit.start)
        return start if tail - start <= spare else tail

    def _unit_at(self, pos: int) -> _Unit | None:
        """The unit holding ``pos`` strictly after its start, if any."""
        i = bisect_right(self.unit_starts, pos) - 1
        if i < 0:
            return None
        unit = self.units[i]
        return unit if unit.start < pos < unit.end else None

    def _priority(self) -> list[_Unit]:
        """The first unit, then the others from the end backwards."""
        units = self.units
        return [units[0], *units[:0:-1]] if units else []

    def _important_in(self, start: int, end: int) -> int:
        """``len(important_lines(text, start, end))``, from the hits where they hold the answer.

        They do when the analysis scanned every line with the words lowered (so a scan of a
        part of the text lowers them too: a character's lower case is as long wherever it
        stands) and the span is whole lines: whether a line is important then depends on
        that line alone.
        """
        text = self.text
        whole = (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end - 1] == "\n")
        if self.every_hit and whole:
            return bisect_left(self.hits, end) - bisect_left(self.hits, start)
        return len(important_lines(text, start, end))

    def _detail(self, spans: tuple[Span, ...]) -> str:
        errors = sum(self._important_in(s, e) for s, e in spans)
        traces = sum(any(a <= s and e <= b for a, b in spans) for s, e in self.traces)
        summary = self.summary is not None and any(
            a <= self.summary[0] and self.summary[1] <= b for a, b in spans
        )
        parts: list[str] = []
        if errors:
            parts.append(plural(errors, "error line"))
        if traces:
            parts.append(plural(traces, "traceback"))
        if summary:
            parts.append("the summary")
        if not parts:
            return ""
        listed = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]
        return f"kept {listed}"
