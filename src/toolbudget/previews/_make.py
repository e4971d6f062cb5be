"""``make_preview``: pick the strategy, size the preview around one marker, write it once.

The marker is written by the caller's function, so its length is unknown
until it is called, and it must be called once, with the final counts. So the
preview is sized for a marker of :data:`MARKER_ESTIMATE` characters plus its
detail (or ``limit - 40`` when that is smaller, which the length guarantee's
own precondition makes an upper bound), then the marker is written once. A
marker longer than the estimate would overflow; only then is the preview
sized again with the measured length and the marker written a second time
(the first text is discarded). The one other second writing: when nothing
fits but the marker, it keeps the strategy's detail (the rows and header of a
table, the hunks of a diff) if that may fit, which only writing it can tell;
if it does not, the marker is written again with the omitted line range, which
fits whenever the length guarantee applies. Deciding before writing would drop
details that fit.
Markers made by :func:`toolbudget.marker.marker_line` with a 32-character key
and a path of up to 150 characters are within the estimate.

Sizing assumes ``len(marker(n, d)) <= len(marker(len(text), "")) + len(d) + 3``
for ``n <= len(text)``, which ``marker_line`` satisfies (it only shortens a detail).

Layers, outermost first: an agent envelope (kept verbatim when it fits, but
left out around a JSON document so that the preview parses), a separable
stderr section (kept whole up to ``stderr_limit``), and the body, which the
strategy of its kind previews.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import orjson

from ..measure import MARKER_ROOM
from ._base import (
    MarkerFn,
    Piece,
    Preview,
    Span,
    clean_detail,
    describe_gaps,
    detail_cost,
    gaps_of,
    layout,
    layout_size,
    merge_spans,
    pieces_size,
    render,
)
from ._envelope import split_envelope
from ._lines import line_count, newline_of
from ._plan import Strategy
from ._stderr import find_stderr
from .detect import STRATEGY, detect
from .diff import DiffStrategy
from .json_preview import JsonCut, JsonStrategy
from .log import LogStrategy, looks_like_log
from .plain import PlainStrategy
from .table import TableStrategy

__all__ = ["MARKER_ESTIMATE", "MIN_SLACK", "STDERR_SLACK", "make_preview"]

MARKER_ESTIMATE = MARKER_ROOM
"""Characters assumed for a marker with an empty detail before it is written."""

MIN_SLACK = 40
"""Below ``len(marker) + MIN_SLACK`` the preview is the marker line alone."""

STDERR_SLACK = 64
"""Most characters of separators and newlines around a kept stderr section."""

_DETAIL_GUESS = 48
_ENVELOPE_SHARE = 0.25
_SEP_COST = 24
_ATTEMPTS = 8


@dataclass(frozen=True, slots=True)
class _Plan:
    """One candidate preview: kept spans of the original, or a JSON document."""

    text: str
    pieces: tuple[Piece, ...]  # the layout of the kept spans (empty for JSON)
    detail: str
    omitted: int
    size: int  # rendered length without the marker
    floor: int  # size of what must be kept whatever the room (a kept stderr section)
    json: JsonCut | None = None
    bare: bool = False  # only what must be kept: the marker line (and a kept stderr section)

    def render(self, marker: str) -> str:
        if self.json is not None:
            literal = orjson.dumps(marker).decode("utf-8")
            return self.json.body.replace(self.json.placeholder, literal, 1)
        return render(self.text, self.pieces, marker)

    def allowed(self, limit: int, marker: str) -> int:
        """The most characters this preview may take: ``limit``, or what stderr and the marker need.

        Without a stderr section nothing must be kept, so the bound is ``limit`` alone: a plan
        that keeps no excerpt is still its marker plus a detail, which can outgrow ``limit``.
        """
        return max(limit, self.floor + len(marker)) if self.floor else limit


def _ratio(head_ratio: float) -> float:
    if not math.isfinite(head_ratio):
        return 0.8
    return min(1.0, max(0.0, head_ratio))


class _Job:
    """Everything about one text that does not depend on the room, computed once."""

    def __init__(
        self, text: str, kind: str, head_ratio: float, is_error: bool, stderr_limit: int | None
    ) -> None:
        self.text = text
        self.kind = kind
        self.nl = newline_of(text)
        self.lines_total = line_count(text)
        b0, b1 = split_envelope(text)
        self.envelope = (b0, b1)
        self.stderr_spans: tuple[Span, ...] = ()
        segments = [(b0, b1)]
        section = find_stderr(text, b0, b1) if stderr_limit is not None else None
        if section is not None and stderr_limit is not None:
            s0, s1 = section
            self.stderr_spans = self._stderr(s0, s1, stderr_limit)
            if self.stderr_spans:  # else a limit too small for any of it: stderr is text like the rest
                segments = [(b0, s0), (s1, b1)]
        self.segments = [(a, b) for a, b in segments if b > a]
        self.view = "".join(text[a:b] for a, b in self.segments)
        self.floor = layout_size(text, self.stderr_spans, self.nl) if self.stderr_spans else 0
        self.strategy = self._strategy(head_ratio, is_error)

    def _stderr(self, s0: int, s1: int, stderr_limit: int) -> tuple[Span, ...]:
        """The stderr section whole, or cut by the log strategy to at most ``stderr_limit`` characters."""
        if s1 - s0 <= stderr_limit:
            return ((s0, s1),)
        section = self.text[s0:s1]
        strategy = LogStrategy(section, self.nl)
        room = stderr_limit - _SEP_COST
        for _ in range(_ATTEMPTS):
            if room <= 0:
                break
            spans = merge_spans(strategy.plan(room).spans)
            over = layout_size(section, spans, self.nl) + _SEP_COST - stderr_limit
            if over <= 0:
                return tuple((s0 + a, s0 + b) for a, b in spans)
            room -= over
        return ()

    def _strategy(self, head_ratio: float, is_error: bool) -> Strategy | JsonStrategy:
        view, nl = self.view, self.nl
        name = STRATEGY.get(self.kind, "plain")
        if is_error and name != "json":
            # Errors keep their error lines and traces whole. A JSON error body stays JSON: every
            # key (so the error's own fields) is kept, and the model can still parse it.
            name = "log"
        if name == "json":
            json = JsonStrategy(view) if not self.stderr_spans else None
            if json is not None and json.usable:
                return json
            self.kind, name = "text", "plain"  # it only looked like JSON
        if name == "diff":
            diff = DiffStrategy(view, head_ratio)
            if diff.usable:
                return diff
            if self.kind == "diff":
                self.kind = "text"
            name = "plain"
        if name == "log-or-plain":
            sample = view[:4096] + "\n" + view[-4096:]
            name = "log" if looks_like_log(sample) else "plain"
        if name == "table":
            return TableStrategy(view, self.kind, head_ratio, nl)
        if name == "log":
            return LogStrategy(view, nl)
        return PlainStrategy(view, head_ratio, nl)

    # Mapping the view back to the original.

    def _to_original(self, spans: tuple[Span, ...]) -> list[Span]:
        out: list[Span] = []
        offset = 0
        for a, b in self.segments:
            width = b - a
            for s, e in spans:
                lo, hi = max(s, offset), min(e, offset + width)
                if hi > lo:
                    out.append((a + lo - offset, a + hi - offset))
            offset += width
        return out

    def _envelope_spans(self, room: int) -> list[Span]:
        """The envelope, or its first line (``<returncode>1</returncode>``), when it fits its share."""
        b0, b1 = self.envelope
        text = self.text
        if b0 == 0 and b1 == len(text):
            return []
        suffix = len(text) - b1
        if b0 + suffix <= room * _ENVELOPE_SHARE:
            return [(0, b0), (b1, len(text))]
        first = text.find("\n", 0, b0) + 1
        if 0 < first < b0 and first + suffix <= room * _ENVELOPE_SHARE:
            return [(0, first), (b1, len(text))]
        return []

    # Planning.

    def plan(self, room: int) -> _Plan:
        if isinstance(self.strategy, JsonStrategy):
            return self._json_plan(self.strategy.plan(room))
        fixed = self._envelope_spans(room) + list(self.stderr_spans)
        # What the fixed spans and the gaps beside them take, about; the fit checks the exact size.
        inner = room - sum(e - s for s, e in fixed) - (len(fixed) + 1) * _SEP_COST
        cut = self.strategy.plan(inner) if inner > 0 else None
        spans = merge_spans(fixed + (self._to_original(cut.spans) if cut else []))
        detail = cut.detail if cut else ""
        if cut is None or cut.with_lines:
            lines = describe_gaps(self.text, gaps_of(spans, len(self.text)), self.lines_total)
            if detail and lines:
                detail = f"{detail}, {'' if lines.startswith('left out') else 'left out '}{lines}"
            else:
                detail = detail or lines
        return self._span_plan(spans, detail)

    def _span_plan(self, spans: list[Span], detail: str, bare: bool = False) -> _Plan:
        kept = sum(e - s for s, e in spans)
        pieces = layout(self.text, spans, self.nl)
        return _Plan(
            text=self.text,
            pieces=tuple(pieces),
            detail=clean_detail(detail),
            omitted=len(self.text) - kept,
            size=pieces_size(pieces),
            floor=self.floor,
            bare=bare,
        )

    def _json_plan(self, cut: JsonCut, short: bool = False) -> _Plan:
        """A JSON preview, valid JSON as a whole: an agent envelope around it is left out."""
        detail = cut.detail
        if self.envelope != (0, len(self.text)) and not short:
            detail += ", the agent's envelope"
        return _Plan(
            text=self.text,
            pieces=(),
            detail=clean_detail(detail),
            omitted=cut.omitted + len(self.text) - len(self.view),
            size=cut.size,
            floor=0,
            json=cut,
        )

    def bare(self) -> _Plan:
        """Only what must be kept (a stderr section), for a room too small for anything else."""
        spans = list(self.stderr_spans)
        gaps = gaps_of(spans, len(self.text))
        return self._span_plan(spans, describe_gaps(self.text, gaps, self.lines_total), bare=True)

    def fit(self, limit: int, base: int, *, estimated: bool) -> _Plan:
        """The fullest plan whose preview, with a marker of ``base`` characters plus its detail, fits.

        ``estimated`` says ``base`` is the estimate, not a written marker's length.
        """
        room = limit - base - _DETAIL_GUESS
        if room <= 0:
            room = limit - base
        for _ in range(_ATTEMPTS):
            if room <= 0:
                break
            plan = self.plan(room)
            need = plan.size + base + detail_cost(plan.detail)
            if need <= limit:
                return plan
            if plan.size <= plan.floor and plan.json is None:
                # Only what must be kept is left: a stderr section (which may take more than the
                # limit), or nothing but the marker with the strategy's detail (rows of a table
                # whose header does not fit, hunks of a diff). With an estimated ``base`` that
                # marker may still fit, and only writing it tells; with a measured one it does
                # not, and the bare marker, whose detail is a short line range, does.
                if plan.floor or estimated:
                    return plan
                break
            # Ask for a plan smaller by the overflow than this one (not just than the room:
            # a JSON level is chosen in steps, and the same one would come back).
            room = min(room, plan.size) - (need - limit)
        if isinstance(self.strategy, JsonStrategy):
            # The smallest JSON (the marker in a one-item array or a one-key object) with the
            # shortest detail fits whenever the marker does with 40 characters to spare.
            plan = self._json_plan(self.strategy.minimal(short=True), short=True)
            if plan.size + base + detail_cost(plan.detail) <= limit:
                return plan
        return self.bare()


def make_preview(
    text: str,
    limit: int,
    *,
    marker: MarkerFn,
    head_ratio: float = 0.8,
    is_error: bool = False,
    stderr_limit: int | None = None,
) -> Preview:
    """A preview of ``text`` in at most ``limit`` characters, with exactly one marker line.

    - ``len(text) <= limit``: the text itself, ``omitted == 0``, no marker.
    - Otherwise the preview holds ``marker(omitted, detail)`` exactly once, with the final
      counts, and ``len(preview.text) <= limit`` whenever
      ``limit >= len(marker(len(text), "")) + 40``. Below that threshold the preview is the
      marker line alone, which may be longer than ``limit``.
    - ``marker`` is called once, with the final counts. Only when it turns out longer than
      :data:`MARKER_ESTIMATE` (plus its detail), or ``limit`` is below the threshold, or the
      preview is the marker alone and its detail took it over ``limit``, is the preview sized
      again and ``marker`` called once or twice more; the text holds the last call.
    - A separable stderr section (see :mod:`._stderr`) with ``stderr_limit`` set is kept
      whole when it has at most ``stderr_limit`` characters, else cut (errors first) to at
      most ``stderr_limit`` characters; the rest shares what is left of ``limit``. Exactly:
      ``len(preview.text) <= max(limit, kept + len(marker line) + STDERR_SLACK)``, ``kept``
      being the characters of the stderr part (``min(len(section), stderr_limit)`` at most),
      so ``limit`` is exceeded only when stderr itself needs more than ``limit`` leaves it.
    - ``is_error``: errors and stack traces are kept first (the log strategy), whatever the
      kind but JSON, which keeps every key and stays valid JSON.
    """
    kind = detect(text)
    if len(text) <= limit:
        return Preview(text, kind, 0, "")
    job = _Job(text, kind, _ratio(head_ratio), is_error, stderr_limit)
    plan = job.fit(limit, max(0, min(MARKER_ESTIMATE, limit - MIN_SLACK)), estimated=True)
    line = marker(plan.omitted, plan.detail)
    out = plan.render(line)
    if plan.bare:
        return Preview(out, job.kind, plan.omitted, plan.detail)
    # The marker's length for the whole text and no detail, as the length guarantee measures it.
    base = len(out) - plan.size - detail_cost(plan.detail) + len(str(len(text))) - len(str(plan.omitted))
    if limit < base + MIN_SLACK:
        plan = job.bare()  # below the guarantee's threshold: the marker alone
    elif len(out) > plan.allowed(limit, line):
        plan = job.fit(limit, base, estimated=False)  # the marker did not fit: size again for it
    else:
        return Preview(out, job.kind, plan.omitted, plan.detail)
    line = marker(plan.omitted, plan.detail)
    out = plan.render(line)
    if len(out) > plan.allowed(limit, line) and not plan.bare:
        # A marker that grows faster than its detail: give up on excerpts.
        plan = job.bare()
        line = marker(plan.omitted, plan.detail)
        out = plan.render(line)
    return Preview(out, job.kind, plan.omitted, plan.detail)
