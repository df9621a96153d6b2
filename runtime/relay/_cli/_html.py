"""Self-contained HTML pages: escaping, embedded data, tables and SVG charts.

The pages relay writes (``relay show --html``, docs/timeline.md) open from a file with no
network: every style, script and drawing is inline, nothing is fetched, and a content security
policy forbids the browser to fetch anything. Charts are SVG drawn here, in Python; the page's
script only adds interaction (a readout under the pointer, opening what a marker points to).

Everything here is a pure function of its arguments, so that a page is the same for the same
data and can be tested without a browser.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import attrs

from ._pretty import visible

#: Forbids every fetch: no source is allowed but the page's own inline styles and scripts, and
#: ``data:`` images.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
)

#: The first script of every page: it writes every uncaught error and every ``console.error``
#: into the ``data-errors`` attribute of ``<html>``, where a test (or a person with the
#: inspector) sees it.
ERROR_CAPTURE = """\
(function () {
  var seen = [];
  function note(text) {
    seen.push(String(text));
    document.documentElement.setAttribute("data-errors", seen.join(" | "));
  }
  window.addEventListener("error", function (e) {
    note(e.message || "error");
  });
  window.addEventListener("unhandledrejection", function (e) {
    note("unhandled rejection: " + e.reason);
  });
  var original = console.error;
  console.error = function () {
    note(Array.prototype.join.call(arguments, " "));
    return original.apply(console, arguments);
  };
})();
"""

#: Styles shared by the pages: tables, details, the chart's axes and marks.
BASE_CSS = """\
:root { color-scheme: light; --ink: #1d2330; --muted: #5d6675; --rule: #d9dde4;
  --band: #f4f6f9; --accent: #2563eb; --warn: #b45309; --bad: #c81e1e; --good: #15803d; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); margin: 0 auto; padding: 24px; max-width: 1240px; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid var(--rule);
  padding-bottom: 4px; }
code, .mono, td.num { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
  font-size: 12.5px; }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--rule);
  vertical-align: top; }
th { font-weight: 600; background: var(--band); }
td.num, th.num { text-align: right; white-space: nowrap; }
tr.collapsed td { background: var(--band); color: var(--muted); font-style: italic; }
tr:target td { background: #fff7d6; }
details > summary { cursor: pointer; color: var(--accent); }
details pre { white-space: pre-wrap; background: var(--band); padding: 8px; margin: 6px 0;
  border-radius: 4px; max-height: 420px; overflow: auto; }
.tag { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px;
  background: var(--band); border: 1px solid var(--rule); white-space: nowrap; }
.tag.bad { color: var(--bad); border-color: #f3b4b4; background: #fdf0f0; }
.tag.warn { color: var(--warn); border-color: #f1d3a5; background: #fdf6ec; }
.tag.good { color: var(--good); border-color: #b6e0c3; background: #eef9f1; }
.tag.info { color: var(--accent); border-color: #bfd3fb; background: #eef3fe; }
svg.chart { width: 100%; height: auto; display: block; background: #fff; }
svg.chart text { font: 11px system-ui, sans-serif; fill: var(--muted); }
svg.chart .grid { stroke: #eceff3; stroke-width: 1; }
svg.chart .axis { stroke: #9aa3b1; stroke-width: 1; }
svg.chart .series { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
svg.chart .dots { stroke: none; }
svg.chart .cursor { stroke: #9aa3b1; stroke-dasharray: 2 3; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 6px 0; color: var(--muted);
  font-size: 13px; }
.legend span::before { content: ""; display: inline-block; width: 14px; height: 3px;
  vertical-align: middle; margin-right: 5px; background: var(--swatch); }
.readout { min-height: 1.5em; color: var(--ink); font-size: 13px; margin: 2px 0 0; }
"""


def text(value: object) -> str:
    """``value`` as HTML text: escaped, control characters written out (``\\x1b``)."""
    return html.escape(visible(str(value)), quote=True)


def attr(value: object) -> str:
    """``value`` as a quoted attribute value."""
    return f'"{text(value)}"'


def json_script(element_id: str, data: Any) -> str:
    """``data`` as ``<script type="application/json">``: JSON that no text inside it can end
    early (``</script>``, ``<!--``) and that parses back to ``data``."""
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    encoded = (
        encoded.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return f'<script type="application/json" id={attr(element_id)}>{encoded}</script>'


def page(title: str, body: str, *, css: str = "", script: str = "") -> str:
    """A whole page: the policy that forbids fetches, the error capture, styles, ``body`` and
    then ``script`` (run once the body is there)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content={attr(CONTENT_SECURITY_POLICY)}>\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{text(title)}</title>\n"
        f"<script>\n{ERROR_CAPTURE}</script>\n"
        f"<style>\n{BASE_CSS}{css}</style>\n"
        f"</head>\n<body>\n{body}\n"
        + (f"<script>\n{script}</script>\n" if script else "")
        + "</body>\n</html>\n"
    )


def table(
    headers: Sequence[str],
    rows: Iterable[str],
    *,
    numeric: Sequence[int] = (),
    element_id: str | None = None,
    empty: str = "none",
) -> str:
    """A table with ``headers``; each of ``rows`` is a whole ``<tr>`` (see :func:`row`).
    ``numeric``: the columns aligned right."""
    head = "".join(
        f"<th{' class=num' if index in numeric else ''}>{text(name)}</th>"
        for index, name in enumerate(headers)
    )
    body = "\n".join(rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="muted">{text(empty)}</td></tr>'
    ident = f" id={attr(element_id)}" if element_id else ""
    return f"<table{ident}>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def row(
    cells: Sequence[str],
    *,
    numeric: Sequence[int] = (),
    element_id: str | None = None,
    css_class: str | None = None,
    colspan_last: int = 1,
) -> str:
    """A ``<tr>`` of cells already in HTML (escape text with :func:`text`)."""
    out = []
    for index, cell in enumerate(cells):
        classes = " class=num" if index in numeric else ""
        span = f' colspan="{colspan_last}"' if index == len(cells) - 1 and colspan_last > 1 else ""
        out.append(f"<td{classes}{span}>{cell}</td>")
    ident = f" id={attr(element_id)}" if element_id else ""
    klass = f" class={attr(css_class)}" if css_class else ""
    return f"<tr{ident}{klass}>{''.join(out)}</tr>"


def tag(label: str, kind: str = "") -> str:
    """A small label (``bad``, ``warn``, ``good``, ``info`` colour it)."""
    return f"<span class={attr(('tag ' + kind).strip())}>{text(label)}</span>"


def details(label: str, content: str, *, element_id: str | None = None) -> str:
    """``content`` (plain text) behind a ``label`` the reader opens: shown on demand, with no
    script needed."""
    ident = f" id={attr(element_id)}" if element_id else ""
    return f"<details{ident}><summary>{text(label)}</summary><pre>{text(content)}</pre></details>"


def figure(value: int | None) -> str:
    """A count with thousands separators; ``–`` for None."""
    return "–" if value is None else f"{value:,}"


def short_figure(value: float) -> str:
    """An axis label: ``950``, ``12k``, ``1.5M``."""
    magnitude = abs(value)
    if magnitude >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if magnitude >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.3g}" if value != int(value) else str(int(value))


def nice_ticks(top: float, count: int = 5, *, whole: bool = False) -> list[float]:
    """Round values from 0 to at least ``top``, about ``count`` of them (steps of 1, 2, 2.5
    or 5 times a power of ten; ``whole``: steps of at least 1)."""
    if top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    if whole:
        step = max(1.0, math.ceil(step))
    ticks = [0.0]
    while ticks[-1] < top:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


@attrs.frozen
class Series:
    """A set of points drawn in a chart.

    ``line`` joins the points; ``step`` holds each value until the next point (a limit that
    changes at times), breaking where a value is None; ``dots`` marks each point.
    """

    name: str
    points: Sequence[tuple[float, float | None]]
    color: str
    kind: Literal["line", "step", "dots"] = "line"
    dashed: bool = False
    element_id: str | None = None


@attrs.frozen
class Marker:
    """A vertical mark at ``x``: a line across the plot with a label on top (``flag``), or a
    small triangle on the x axis (``tick``). ``href`` makes it a link (``#anchor``)."""

    x: float
    label: str
    title: str
    color: str
    style: Literal["flag", "tick"] = "flag"
    href: str | None = None


@attrs.frozen
class Chart:
    """A chart of numbered x values (0 … ``x_max``) against y (0 … ``y_max``)."""

    x_max: float
    y_max: float
    series: Sequence[Series]
    markers: Sequence[Marker] = ()
    x_label: str = ""
    y_label: str = ""
    whole_x: bool = False
    """Whether x counts things (ticks at whole numbers only)."""
    width: int = 1160
    height: int = 360
    left: int = 64
    right: int = 16
    top: int = 40
    bottom: int = 44
    element_id: str = "chart"


def _number(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class _Scale:
    def __init__(self, chart: Chart) -> None:
        self.chart = chart
        self.plot_width = chart.width - chart.left - chart.right
        self.plot_height = chart.height - chart.top - chart.bottom

    def x(self, value: float) -> float:
        span = self.chart.x_max or 1
        return self.chart.left + value / span * self.plot_width

    def y(self, value: float) -> float:
        span = self.chart.y_max or 1
        return self.chart.top + self.plot_height - min(value, span) / span * self.plot_height


def svg_chart(chart: Chart) -> str:
    """The chart as inline SVG: grid and axes with labels, each series, then the markers.

    The ``svg`` element carries ``data-x-max``, ``data-left``, ``data-plot-width`` so that a
    script can map a pointer position back to an x value.
    """
    scale = _Scale(chart)
    parts: list[str] = []
    bottom = chart.top + scale.plot_height
    for tick in nice_ticks(chart.y_max):
        if tick > chart.y_max:
            break
        y = _number(scale.y(tick))
        parts.append(
            f'<line class="grid" x1="{chart.left}" x2="{chart.width - chart.right}" '
            f'y1="{y}" y2="{y}"/>'
            f'<text x="{chart.left - 6}" y="{y}" text-anchor="end" dy="4">'
            f"{text(short_figure(tick))}</text>"
        )
    for tick in nice_ticks(chart.x_max, 10, whole=chart.whole_x):
        if tick > chart.x_max:
            break
        x = _number(scale.x(tick))
        parts.append(
            f'<line class="axis" x1="{x}" x2="{x}" y1="{bottom}" y2="{bottom + 4}"/>'
            f'<text x="{x}" y="{bottom + 16}" text-anchor="middle">'
            f"{text(short_figure(tick))}</text>"
        )
    parts.append(
        f'<line class="axis" x1="{chart.left}" x2="{chart.width - chart.right}" '
        f'y1="{bottom}" y2="{bottom}"/>'
        f'<line class="axis" x1="{chart.left}" x2="{chart.left}" y1="{chart.top}" '
        f'y2="{bottom}"/>'
    )
    if chart.x_label:
        parts.append(
            f'<text x="{chart.left + scale.plot_width / 2:.0f}" y="{chart.height - 6}" '
            f'text-anchor="middle">{text(chart.x_label)}</text>'
        )
    if chart.y_label:
        parts.append(
            f'<text x="{chart.left}" y="14" text-anchor="start">{text(chart.y_label)}</text>'
        )
    parts += [_series(series, scale) for series in chart.series]
    parts += [_marker(marker, scale) for marker in chart.markers]
    parts.append(
        f'<line class="cursor" id="{chart.element_id}-cursor" x1="0" x2="0" '
        f'y1="{chart.top}" y2="{bottom}" visibility="hidden"/>'
    )
    return (
        f'<svg class="chart" id={attr(chart.element_id)} role="img" '
        f'viewBox="0 0 {chart.width} {chart.height}" data-x-max="{_number(chart.x_max)}" '
        f'data-left="{chart.left}" data-plot-width="{scale.plot_width}">\n'
        + "\n".join(parts)
        + "\n</svg>"
    )


def _series(series: Series, scale: _Scale) -> str:
    ident = f" id={attr(series.element_id)}" if series.element_id else ""
    dash = ' stroke-dasharray="6 4"' if series.dashed else ""
    title = f"<title>{text(series.name)}</title>"
    if series.kind == "dots":
        dots = "".join(
            f'<circle cx="{_number(scale.x(x))}" cy="{_number(scale.y(y))}" r="3"/>'
            for x, y in series.points
            if y is not None
        )
        return f'<g class="dots"{ident} fill="{series.color}">{title}{dots}</g>'
    if series.kind == "line":
        points = " ".join(
            f"{_number(scale.x(x))},{_number(scale.y(y))}"
            for x, y in series.points
            if y is not None
        )
        return (
            f'<polyline class="series"{ident} stroke="{series.color}"{dash} '
            f'points="{points}">{title}</polyline>'
        )
    path: list[str] = []
    run: tuple[float, float] | None = None  # where the current value started, and the value
    for x, y in [*series.points, (scale.chart.x_max, None)]:
        if run is not None and y != run[1]:
            path.append(f"M{_number(scale.x(run[0]))} {_number(scale.y(run[1]))}")
            path.append(f"H{_number(scale.x(x))}")
            run = None
        if run is None and y is not None:
            run = (x, y)
    return (
        f'<path class="series"{ident} stroke="{series.color}"{dash} d="{"".join(path)}">'
        f"{title}</path>"
    )


def _marker(marker: Marker, scale: _Scale) -> str:
    chart = scale.chart
    x = _number(scale.x(marker.x))
    bottom = chart.top + scale.plot_height
    if marker.style == "flag":
        shape = (
            f'<line x1="{x}" x2="{x}" y1="{chart.top}" y2="{bottom}" stroke="{marker.color}" '
            f'stroke-width="1.2" stroke-dasharray="3 3"/>'
            f'<text x="{x}" y="{chart.top - 4}" text-anchor="middle" '
            f'style="fill:{marker.color};font-weight:600">{text(marker.label)}</text>'
        )
    else:
        tip = scale.x(marker.x)
        shape = (
            f'<path d="M{_number(tip)} {bottom - 9}l-5 9h10z" fill="{marker.color}"/>'
            f'<text x="{x}" y="{bottom - 12}" text-anchor="middle" '
            f'style="fill:{marker.color}">{text(marker.label)}</text>'
        )
    inner = f"<title>{text(marker.title)}</title>{shape}"
    if marker.href:
        return f'<a class="marker" href={attr(marker.href)}>{inner}</a>'
    return f'<g class="marker">{inner}</g>'


def legend(entries: Sequence[tuple[str, str]]) -> str:
    """A line of ``(label, colour)`` swatches under a chart."""
    spans = "".join(
        f'<span style="--swatch:{color}">{text(label)}</span>' for label, color in entries
    )
    return f'<div class="legend">{spans}</div>'


__all__ = [
    "BASE_CSS",
    "CONTENT_SECURITY_POLICY",
    "ERROR_CAPTURE",
    "Chart",
    "Marker",
    "Series",
    "attr",
    "details",
    "figure",
    "json_script",
    "legend",
    "nice_ticks",
    "page",
    "row",
    "short_figure",
    "svg_chart",
    "table",
    "tag",
    "text",
]
