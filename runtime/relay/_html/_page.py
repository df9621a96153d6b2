"""A self-contained HTML page: the policy that forbids fetches, the error capture, the shared
styles, and tables, labels and details.

The pages relay writes open from a file with no network: every style, script and drawing is
inline, nothing is fetched, and a content security policy forbids the browser to fetch
anything. A page's script only adds interaction; everything is readable without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._text import attr, text

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
        f"<th scope=col{' class=num' if index in numeric else ''}>{text(name)}</th>"
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


__all__ = [
    "BASE_CSS",
    "CONTENT_SECURITY_POLICY",
    "ERROR_CAPTURE",
    "details",
    "figure",
    "page",
    "row",
    "table",
    "tag",
]
