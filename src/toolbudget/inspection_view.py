"""``toolbudget inspect`` in the terminal: rich tables and a per-request bar chart.

The chart stacks each request's bands (see :mod:`toolbudget.inspection`) in
one row per request; in a terminal with colour each band has its colour, and
without colour (a pipe, a file) its own fill character, so the split still
reads. A session of more requests than :data:`MAX_ROWS` shows every k-th one,
and always the last, and says so. The output depends only on the inspection
and the console's width.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from .inspection import SCHEDULES, Inspection, Schedule, TurnBands
from .replay import tokens

__all__ = ["BAND_COLOURS", "MAX_ROWS", "render", "shown_turns"]

MAX_ROWS = 60
"""The most requests the per-request chart and table show, one row each."""

BAND_COLOURS = (
    "grey62",
    "magenta",
    "green",
    "blue",
    "yellow",
    "red",
    "cyan",
    "bright_magenta",
    "bright_green",
    "bright_blue",
    "bright_red",
)
"""The bands' colours, in band order (the last band takes the last colour when there are more)."""

_GLYPHS = "█▓▒░#%=+*:-"
"""The bands' fill characters without colour, in band order."""


def _band_style(i: int) -> str:
    return BAND_COLOURS[min(i, len(BAND_COLOURS) - 1)]


def _glyph(i: int, colour: bool) -> str:
    return "█" if colour else _GLYPHS[min(i, len(_GLYPHS) - 1)]


def shown_turns(count: int, rows: int = MAX_ROWS) -> list[int]:
    """The requests one row each can show: all of them, or every k-th and the last."""
    if count <= rows:
        return list(range(count))
    step = -(-count // (rows - 1))
    picked = list(range(0, count, step))
    if picked[-1] != count - 1:
        picked.append(count - 1)
    return picked


def render(inspection: Inspection, console: Console) -> None:
    """Print every section of the inspection on ``console``."""
    for part in sections(inspection, console.width, colour=console.color_system is not None):
        console.print(part)
        console.print()


def sections(inspection: Inspection, width: int, *, colour: bool) -> list[RenderableType]:
    return [
        _header(inspection),
        _chart(inspection, width, colour),
        _last_request(inspection, colour),
        _largest(inspection),
        _kinds(inspection),
        _schedules(inspection),
        _per_request(inspection),
    ]


def _title(text: str) -> Text:
    return Text(text, style="bold")


def _header(inspection: Inspection) -> RenderableType:
    last = inspection.turns[-1] if inspection.turns else None
    lines = [
        Text.assemble(("toolbudget inspect ", "bold"), inspection.source),
        Text(
            f"{inspection.kind} · conversation {inspection.conversation} · "
            f"requests built for {inspection.api}"
        ),
        Text(
            f"{len(inspection.turns)} requests · {inspection.results} tool results · last request "
            f"~{last.total_tokens if last else 0:,} tokens with its tool definitions "
            "(tokens are characters / 4)"
        ),
    ]
    return Group(*lines)


def _chart(inspection: Inspection, width: int, colour: bool) -> RenderableType:
    turns = inspection.turns
    picked = shown_turns(len(turns))
    label = max((len(f"{t:,}") for t in range(len(turns))), default=1)
    figure = max((len(f"{t.total_tokens:,}") for t in turns), default=1)
    room = max(10, width - label - figure - 4)
    top = max((sum(t.chars) for t in turns), default=0)
    rows: list[RenderableType] = [_title("Tokens per request, by band")]
    if len(picked) < len(turns):
        rows.append(Text(f"one request in {picked[1] - picked[0]} of {len(turns)} shown, and the last"))
    for n in picked:
        turn = turns[n]
        line = Text(f"{n:>{label}} ")
        line.append_text(_bar(turn, top, room, colour))
        line.append(f" {turn.total_tokens:,}")
        rows.append(line)
    entries = []
    for i, band in enumerate(inspection.bands):
        entry = Text(_glyph(i, colour) * 2, style=_band_style(i), no_wrap=True)
        entry.append(f" {band}", style="")
        entries.append(entry)
    rows.append(Columns(entries, padding=(0, 2)))
    return Group(*rows)


def _bar(turn: TurnBands, top: int, room: int, colour: bool) -> Text:
    """One request's bands as a bar ``room`` wide at the largest request."""
    bar = Text()
    if top <= 0:
        return bar
    done = 0
    cumulative = 0
    for i, chars in enumerate(turn.chars):
        cumulative += chars
        end = round(cumulative * room / top)  # ends from the running sum, so rounding never drifts
        if end > done:
            bar.append(_glyph(i, colour) * (end - done), style=_band_style(i))
            done = end
    return bar


def _last_request(inspection: Inspection, colour: bool) -> RenderableType:
    table = Table(title="The last request, by band", title_justify="left", title_style="bold")
    table.add_column("band")
    table.add_column("tokens", justify="right")
    table.add_column("share", justify="right")
    if inspection.turns:
        last = inspection.turns[-1]
        whole = sum(last.chars) or 1
        for i, (band, chars) in enumerate(zip(inspection.bands, last.chars, strict=True)):
            name = Text(_glyph(i, colour) * 2 + " ", style=_band_style(i))
            name.append(band, style="")
            table.add_row(name, f"{tokens(chars):,}", f"{chars / whole:.1%}")
    return table


def _largest(inspection: Inspection) -> RenderableType:
    table = Table(title="Largest tool results", title_justify="left", title_style="bold")
    for name, justify in (
        ("#", "right"),
        ("request", "right"),
        ("tool", "left"),
        ("kind", "left"),
        ("tokens", "right"),
        ("on", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold" if name == "on" else "ellipsis")  # type: ignore[arg-type]
    for rank, result in enumerate(inspection.largest, 1):
        table.add_row(
            str(rank), str(result.turn), result.tool, result.kind, f"{result.tokens:,}", result.argument
        )
    return table


def _kinds(inspection: Inspection) -> RenderableType:
    table = Table(title="Results by kind", title_justify="left", title_style="bold")
    table.add_column("kind")
    table.add_column("results", justify="right")
    table.add_column("tokens", justify="right")
    for kind, count, chars in inspection.kinds:
        table.add_row(kind, str(count), f"{tokens(chars):,}")
    return table


def _schedules(inspection: Inspection) -> RenderableType:
    table = Table(
        title="Schedules over the whole session (billed: cache reads at 0.1, writes at 1.25)",
        title_justify="left",
        title_style="bold",
    )
    for name in (
        "schedule",
        "tokens sent",
        "cache read",
        "cache write",
        "billed",
        "cache hits",
        "stable",
        "last request",
        "rewrites",
    ):
        table.add_column(name, justify="left" if name == "schedule" else "right")
    for schedule in inspection.schedules:
        t = schedule.totals
        hits = t.cache_read / t.tokens_sent if t.tokens_sent else 0.0
        table.add_row(
            schedule.name,
            f"{t.tokens_sent:,}",
            f"{t.cache_read:,}",
            f"{t.cache_write:,}",
            f"{t.billed:,.0f}",
            f"{hits:.1%}",
            f"{t.stability:.0%}",
            f"{t.final_tokens:,}",
            str(len(schedule.events)),
        )
    return table


def _per_request(inspection: Inspection) -> RenderableType:
    picked = shown_turns(len(inspection.turns))
    table = Table(
        title="Per request: tokens sent, billed and cache-hit share by schedule (* a cache-aware rewrite)",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("req", justify="right")
    managed: Sequence[Schedule] = [inspection.schedule(name) for name in SCHEDULES[1:]]
    for schedule in managed:
        table.add_column(f"{schedule.name}\nsent", justify="right")
        table.add_column("billed", justify="right")
        table.add_column("hits", justify="right")
    events = set(inspection.schedule("cache-aware").events)
    for n in picked:
        cells = [f"{n}{'*' if n in events else ''}"]
        for schedule in managed:
            turn = schedule.turns[n]
            cells += [f"{turn.tokens:,}", f"{Schedule.billed(turn):,.0f}", f"{Schedule.hit_share(turn):.0%}"]
        table.add_row(*cells)
    return table
