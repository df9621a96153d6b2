"""Charts as inline SVG, drawn in Python: axes with round ticks, lines, steps and dots, and
markers that may link to what they mark.

A chart is a pure function of its data, so a page is the same for the same data; the page's
script only maps the pointer back to an x value (``data-x-max``, ``data-left``,
``data-plot-width`` on the ``svg`` element).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import attrs

from ._text import attr, text


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


__all__ = ["Chart", "Marker", "Series", "legend", "nice_ticks", "short_figure", "svg_chart"]
