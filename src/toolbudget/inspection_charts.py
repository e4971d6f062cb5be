"""``toolbudget inspect`` as charts: a self-contained HTML report and a PNG.

The charts are Vega-Lite, written with Altair. Vega-Lite renders in the
browser from a JSON spec, so the interactive HTML report carries the Vega
libraries inline (about 1 MB; it opens offline, nothing is fetched), and
``vl-convert`` renders the very same spec to a PNG without a browser. Both are
the ``report`` extra (``pip install 'toolbudget[report]'``), imported only here
and only when a chart is asked for: the terminal view needs neither.

Determinism: every selection and view is named (Altair 6 derives unnamed ones
from a hash of the spec, but earlier versions numbered them from a counter that
runs on across calls), the chart's element id is fixed, and the data are lists
in a fixed order, so the same inspection gives the same bytes of HTML and PNG.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from ._png import compact
from .errors import ToolbudgetError
from .inspection import SCHEDULES, Inspection, Schedule

if TYPE_CHECKING:
    import altair

__all__ = ["INSTALL_HINT", "OUTPUT_DIV", "chart", "html_report", "png_report", "require"]

INSTALL_HINT = "pip install 'toolbudget[report]'"

OUTPUT_DIV = "toolbudget-inspect"
"""The id of the element the charts render into (fixed, so the HTML is the same on every run)."""

WIDTH = 760
HEIGHT = 210

BAND_COLOURS = (
    "#9e9e9e",
    "#b279a2",
    "#54a24b",
    "#4c78a8",
    "#f58518",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
)
"""The bands' colours, in band order (the last band takes the last colour when there are more)."""

SCHEDULE_COLOURS = ("#9e9e9e", "#4c78a8", "#e45756", "#54a24b")
"""The colours of :data:`~toolbudget.inspection.SCHEDULES`, in order."""

EMBED_OPTIONS: dict[str, Any] = {
    "renderer": "svg",
    # Export as PNG or SVG works offline; the source, compiled and editor links would not add to a report.
    "actions": {"export": True, "source": False, "compiled": False, "editor": False},
}


def require() -> None:
    """Raise :class:`~toolbudget.errors.ToolbudgetError` naming the extra when it is not installed."""
    try:
        import altair  # noqa: F401
        import vl_convert  # noqa: F401
    except ImportError as exc:
        raise ToolbudgetError(
            f"the HTML and PNG reports need Altair and vl-convert ({exc.name} is not installed): "
            f"{INSTALL_HINT}"
        ) from None


def chart(inspection: Inspection) -> altair.VConcatChart:
    """Every chart of the report, one above the other."""
    require()
    import altair as alt

    charts: list[Any] = [_bands(inspection), _sent(inspection), _billed(inspection), _hits(inspection)]
    if inspection.largest:
        charts.append(_largest(inspection))
    title = (
        f"toolbudget inspect: {inspection.conversation} ({inspection.kind}, requests for {inspection.api})"
    )
    whole: altair.VConcatChart = (
        alt.vconcat(*charts, spacing=28)
        .resolve_scale(color="independent")
        .properties(title=alt.TitleParams(title, anchor="start", fontSize=15))
        .configure_view(stroke=None)
        .configure_axis(labelFontSize=11, titleFontSize=11)
        .configure_legend(labelFontSize=11, titleFontSize=11, labelLimit=260)
    )
    return whole


def html_report(inspection: Inspection) -> str:
    """The interactive report as one HTML page with the Vega libraries inline."""
    page = chart(inspection).to_html(output_div=OUTPUT_DIV, embed_options=EMBED_OPTIONS, inline=True)
    head = "<head>\n"
    body = "<body>\n"
    if head not in page or body not in page:  # the template changed: say so rather than write a bad page
        raise ToolbudgetError("the installed Altair writes HTML this version of toolbudget does not know")
    title = f"<title>toolbudget inspect: {html.escape(inspection.conversation)}</title>\n"
    page = page.replace(head, head + "  " + title, 1)
    return page.replace(body, body + _summary(inspection), 1)


def png_report(inspection: Inspection, *, scale: float = 1.0) -> bytes:
    """The report's charts as a PNG, rendered without a browser, and written again smaller (:mod:`._png`)."""
    spec = chart(inspection).to_dict()
    import vl_convert

    return compact(vl_convert.vegalite_to_png(spec, scale=scale))


def _summary(inspection: Inspection) -> str:
    """The numbers over the whole session, as a small table above the charts."""
    rows = []
    for schedule in inspection.schedules:
        t = schedule.totals
        hits = t.cache_read / t.tokens_sent if t.tokens_sent else 0.0
        cells = (
            schedule.name,
            f"{t.tokens_sent:,}",
            f"{t.billed:,.0f}",
            f"{hits:.1%}",
            f"{t.final_tokens:,}",
            str(len(schedule.events)),
        )
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in ("schedule", "tokens sent", "billed", "cache hits", "last request", "rewrites")
    )
    return (
        '<div id="toolbudget-summary" style="font: 13px sans-serif; margin: 8px 0 16px">\n'
        f"<p>{html.escape(inspection.source)}: {len(inspection.turns)} requests, "
        f"{inspection.results} tool results (tokens are characters / 4; billed: cache reads at 0.1, "
        "writes at 1.25)</p>\n"
        f'<table style="border-collapse: collapse" cellpadding="3"><tr>{head}</tr>{"".join(rows)}</table>\n'
        "</div>\n"
    )


def _band_rows(inspection: Inspection) -> list[dict[str, Any]]:
    return [
        {"request": turn.turn, "band": band, "order": i, "tokens": tokens}
        for turn in inspection.turns
        for i, (band, tokens) in enumerate(zip(inspection.bands, turn.tokens, strict=True))
        if tokens
    ]


def _schedule_rows(inspection: Inspection) -> list[dict[str, Any]]:
    return [
        {
            "request": turn.turn,
            "schedule": schedule.name,
            "sent": turn.tokens,
            "cached": turn.prefix_tokens,
            "billed": round(Schedule.billed(turn), 1),
            "hits": round(Schedule.hit_share(turn), 4),
        }
        for schedule in inspection.schedules
        for turn in schedule.turns
    ]


def _bands(inspection: Inspection) -> altair.Chart:
    import altair as alt

    pick = alt.selection_point(name="pick_band", fields=["band"], bind="legend")
    colours = [BAND_COLOURS[min(i, len(BAND_COLOURS) - 1)] for i in range(len(inspection.bands))]
    bands: altair.Chart = (
        alt.Chart(alt.InlineData(values=_band_rows(inspection)), name="bands")
        .mark_bar()
        .encode(
            x=alt.X("request:O", title="request", axis=alt.Axis(labelOverlap=True, labelAngle=0)),
            y=alt.Y("sum(tokens):Q", title="tokens"),
            color=alt.Color(
                "band:N",
                title="band (click to pick)",
                scale=alt.Scale(domain=list(inspection.bands), range=colours),
                sort=list(inspection.bands),
            ),
            order=alt.Order("order:Q"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                alt.Tooltip("request:O"),
                alt.Tooltip("band:N"),
                alt.Tooltip("sum(tokens):Q", title="tokens", format=","),
            ],
        )
        .add_params(pick)
        .properties(width=WIDTH, height=HEIGHT, title="Tokens per request, by band (as the agent sent it)")
    )
    return bands


def _schedule_line(
    inspection: Inspection, name: str, field: str, title: str, axis_format: str
) -> altair.LayerChart:
    import altair as alt

    y_axis = alt.Axis(format=axis_format, title=title)
    # Requests are counted: whole ticks only, or a short session's axis reads 0.5, 1.5, ...
    request_axis = alt.Axis(tickMinStep=1, format="d")
    zoom = alt.selection_interval(name=f"zoom_{name}", bind="scales", encodings=["x"])
    pick = alt.selection_point(name=f"pick_{name}", fields=["schedule"], bind="legend")
    lines = (
        alt.Chart(alt.InlineData(values=_schedule_rows(inspection)), name=name)
        .mark_line(point=alt.OverlayMarkDef(size=18), strokeWidth=1.8)
        .encode(
            x=alt.X("request:Q", title="request", axis=request_axis),
            y=alt.Y(f"{field}:Q", axis=y_axis),
            color=alt.Color(
                "schedule:N",
                title="schedule (click to pick)",
                scale=alt.Scale(domain=list(SCHEDULES), range=list(SCHEDULE_COLOURS)),
                sort=list(SCHEDULES),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
            tooltip=[
                alt.Tooltip("request:Q"),
                alt.Tooltip("schedule:N"),
                alt.Tooltip("sent:Q", title="tokens sent", format=","),
                alt.Tooltip("cached:Q", title="read from the cache", format=","),
                alt.Tooltip("billed:Q", format=",.0f"),
                alt.Tooltip("hits:Q", title="cache hits", format=".1%"),
            ],
        )
        .add_params(zoom, pick)
    )
    cache_aware = inspection.schedule("cache-aware")
    events = [
        {"request": n, field: _value(cache_aware, n, field), "what": "cache-aware rewrite"}
        for n in cache_aware.events
    ]
    marks = (
        alt.Chart(alt.InlineData(values=events))
        .mark_point(shape="triangle-down", size=90, filled=True, color="#54a24b", yOffset=-10)
        .encode(
            x=alt.X("request:Q", axis=request_axis),
            y=alt.Y(f"{field}:Q", axis=y_axis),
            tooltip=[alt.Tooltip("request:Q"), alt.Tooltip("what:N")],
        )
    )
    layered: altair.LayerChart = alt.LayerChart(layer=[lines, marks]).properties(
        width=WIDTH, height=HEIGHT, title=f"{title} per request, by schedule (▼ a cache-aware rewrite)"
    )
    return layered


def _value(schedule: Schedule, n: int, field: str) -> float:
    turn = schedule.turns[n]
    if field == "sent":
        return turn.tokens
    if field == "billed":
        return round(Schedule.billed(turn), 1)
    return round(Schedule.hit_share(turn), 4)


def _sent(inspection: Inspection) -> altair.LayerChart:
    return _schedule_line(inspection, "sent", "sent", "Tokens sent", ",.0f")


def _billed(inspection: Inspection) -> altair.LayerChart:
    return _schedule_line(inspection, "billed", "billed", "Billed tokens", ",.0f")


def _hits(inspection: Inspection) -> altair.LayerChart:
    return _schedule_line(inspection, "hits", "hits", "Cache-hit share", ".0%")


def _largest(inspection: Inspection) -> altair.Chart:
    import altair as alt

    rows = [
        {
            "rank": rank,
            "result": f"#{rank} {r.tool}: {r.argument}"[:70],
            "tool": r.tool,
            "kind": r.kind,
            "tokens": r.tokens,
            "request": r.turn,
            "on": r.argument,
        }
        for rank, r in enumerate(inspection.largest, 1)
    ]
    largest: altair.Chart = (
        alt.Chart(alt.InlineData(values=rows), name="largest")
        .mark_bar()
        .encode(
            y=alt.Y("result:N", title=None, sort=alt.EncodingSortField("rank", order="ascending")),
            x=alt.X("tokens:Q", title="tokens"),
            color=alt.Color("kind:N", title="content kind", scale=alt.Scale(scheme="tableau10")),
            tooltip=[
                alt.Tooltip("tool:N"),
                alt.Tooltip("on:N"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("tokens:Q", format=","),
                alt.Tooltip("request:Q", title="first in request"),
            ],
        )
        .properties(width=WIDTH - 260, height=alt.Step(18), title="Largest tool results, by content kind")
    )
    return largest
