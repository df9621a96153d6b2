"""The page of ``relay show --html`` (docs/timeline.md): a :class:`~._timeline.Timeline` as one
self-contained HTML document.

The chart of the context in use is SVG drawn here; the tables say the same figures as text; the
data itself is embedded as JSON (``<script type="application/json" id="relay-timeline">``).
The page's script adds a readout under the pointer and opens a compaction's summary when its
marker is followed; everything is readable without it. A patch's diffs and the turns' plans are
drawn by :mod:`._timeline_edits`. A pure function of the timeline.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core._work_state import KIND_HEADINGS, kind_heading
from .._html import (
    Chart,
    Marker,
    Series,
    details,
    figure,
    json_script,
    legend,
    page,
    row,
    svg_chart,
    table,
    tag,
    text,
)
from ._timeline import Compaction, Stretch, Timeline, ToolCall, Turn, timeline_json
from ._timeline_agents_page import CSS as AGENTS_CSS
from ._timeline_agents_page import agents_section, spawned_row
from ._timeline_edits import CSS as EDITS_CSS
from ._timeline_edits import patch_html, plans_html

#: The id of the embedded JSON.
DATA_ID = "relay-timeline"
#: Up to this many points, each model call is marked with a dot on the line.
DOTS_UP_TO = 300

CONTEXT_COLOR = "#2563eb"
WINDOW_COLOR = "#6b7280"
LIMIT_COLOR = "#d97706"
COMPACTION_COLOR = "#7c3aed"
ERROR_COLOR = "#c81e1e"
INTERRUPT_COLOR = "#b45309"

#: The page's script: the pointer readout, opening a summary a marker points to, and
#: ``data-drawn`` (the points of the context line the browser laid out) on ``<html>``.
SCRIPT = """\
(function () {
  var data = JSON.parse(document.getElementById("relay-timeline").textContent);
  var calls = data.model_calls;
  var svg = document.getElementById("chart");
  var line = document.getElementById("context-line");
  var readout = document.getElementById("readout");
  var cursor = document.getElementById("chart-cursor");
  var drawn = 0;
  if (line && line.points && line.getBBox) {
    line.getBBox();
    drawn = line.points.numberOfItems;
  }
  document.documentElement.setAttribute("data-drawn", String(drawn));
  function fmt(n) {
    return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
  }
  function share(n, of) {
    return of ? " (" + Math.round(n * 100 / of) + "% of " + fmt(of) + ")" : "";
  }
  function nearest(x) {
    var lo = 0, hi = calls.length - 1;
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (calls[mid].index < x) { lo = mid; } else { hi = mid; }
    }
    return Math.abs(calls[lo].index - x) <= Math.abs(calls[hi].index - x) ? calls[lo] : calls[hi];
  }
  if (svg && calls.length) {
    var xMax = Number(svg.getAttribute("data-x-max")) || 1;
    var left = Number(svg.getAttribute("data-left"));
    var width = Number(svg.getAttribute("data-plot-width"));
    var viewWidth = svg.viewBox.baseVal.width;
    svg.addEventListener("mousemove", function (event) {
      var box = svg.getBoundingClientRect();
      var x = ((event.clientX - box.left) * viewWidth / box.width - left) / width * xMax;
      var call = nearest(Math.max(0, Math.min(xMax, x)));
      var at = left + call.index / xMax * width;
      cursor.setAttribute("x1", at);
      cursor.setAttribute("x2", at);
      cursor.setAttribute("visibility", "visible");
      readout.textContent = (call.estimated ? "estimate after a compaction" : "model call")
        + " #" + fmt(call.index + 1) + " · turn " + (call.turn_id || "–") + " · "
        + fmt(call.context_tokens) + " tokens in context"
        + share(call.context_tokens, call.window)
        + (call.limit ? ", limit " + fmt(call.limit) : "")
        + " · input " + fmt(call.input_tokens) + ", output " + fmt(call.output_tokens)
        + (call.time ? " · " + call.time : "");
    });
    svg.addEventListener("mouseleave", function () {
      cursor.setAttribute("visibility", "hidden");
    });
  }
  function reveal() {
    var target = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (!target) { return; }
    var opened = target.querySelector("details");
    if (opened) { opened.open = true; }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
})();
"""

CSS = """\
header p { margin: 2px 0; }
.figures { font-size: 15px; margin: 8px 0 0; }
.figures b { font-weight: 600; }
.note { color: var(--muted); font-size: 13px; margin: 4px 0; }
ul.record { margin: 4px 0 8px; padding-left: 20px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
"""


def _time(value: str | None) -> str:
    """``2026-01-02T03:04:05.123Z`` as ``2026-01-02 03:04:05``."""
    return text(value[:19].replace("T", " ")) if value else "–"


def _duration(ms: int | None) -> str:
    if ms is None:
        return "–"
    if ms < 1_000:
        return f"{ms} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms / 60_000:.1f} min"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _header(timeline: Timeline) -> str:
    session, counts = timeline.session, timeline.counts
    window = figure(session.model_context_window) if session.model_context_window else "unknown"
    limit = (
        figure(session.auto_compact_token_limit)
        if session.auto_compact_token_limit is not None
        else "not recorded"
    )
    facts = [
        f"{text(session.model or '?')} via {text(session.model_provider or '?')}",
        f"window {window}",
        f"auto-compaction limit {limit}",
    ]
    if session.created:
        facts.append(f"created {_time(session.created)}")
    if session.resumed:
        facts.append(f"resumed {_plural(session.resumed, 'time')}")
    if session.relay_version:
        facts.append(f"relay {text(session.relay_version)}")
    responses = counts.model_calls - counts.estimates
    patches = []
    if counts.patches:
        failed = f", {counts.patches_failed:,} not applied" if counts.patches_failed else ""
        patches = [f"{counts.patches:,} patch{'' if counts.patches == 1 else 'es'}{failed}"]
    figures = [
        _plural(counts.turns, "turn"),
        _plural(responses, "model call"),
        _plural(counts.compactions, "compaction"),
        f"{_plural(counts.tool_calls, 'tool call')} ({counts.masked:,} masked, "
        f"{counts.recalled:,} recalled)",
        _plural(counts.errors, "error"),
        _plural(counts.interrupts, "aborted turn"),
        *patches,
        *([_plural(counts.agents, "sub-agent")] if counts.agents else []),
    ]
    return (
        f"<header>\n<h1>Session <code>{text(session.id or 'unknown')}</code></h1>\n"
        f'<p class="muted">{" · ".join(facts)}</p>\n'
        f'<p class="muted">rollout <code>{text(session.rollout)}</code>'
        + (f" · cwd <code>{text(session.cwd)}</code>" if session.cwd else "")
        + "</p>\n"
        f'<p class="figures">{" · ".join(f"<b>{f}</b>" for f in figures)}</p>\n</header>'
    )


def _chart(timeline: Timeline) -> str:
    calls = timeline.model_calls
    if not calls:
        return '<p class="note">No model call was recorded: there is nothing to draw.</p>'
    x_max = float(max(timeline.counts.model_calls - 1, 1))
    tops = [call.context_tokens for call in calls]
    tops += [call.window for call in calls if call.window]
    tops += [call.limit for call in calls if call.limit]
    y_max = max(max(tops) * 1.08, 10)
    series = [
        Series(
            "context window",
            [(call.index, call.window) for call in calls],
            WINDOW_COLOR,
            kind="step",
            dashed=True,
        ),
        Series(
            "auto-compaction limit",
            [(call.index, call.limit) for call in calls],
            LIMIT_COLOR,
            kind="step",
            dashed=True,
        ),
        Series(
            "tokens in context",
            [(call.index, call.context_tokens) for call in calls],
            CONTEXT_COLOR,
            element_id="context-line",
        ),
        Series(
            "model call",
            [(c.index, c.context_tokens) for c in calls if not c.estimated]
            if len(calls) <= DOTS_UP_TO
            else [],
            CONTEXT_COLOR,
            kind="dots",
        ),
        Series(
            "estimate after a compaction",
            [(call.index, call.context_tokens) for call in calls if call.estimated],
            COMPACTION_COLOR,
            kind="dots",
        ),
    ]
    markers = [
        Marker(
            max(0.0, c.at_call - 0.5),
            f"#{c.number}",
            f"compaction #{c.number}: {c.backend or '?'}, {c.trigger or '?'}, "
            f"{figure(c.tokens_before)} → {figure(c.tokens_after)} tokens",
            COMPACTION_COLOR,
            href=f"#compaction-{c.number}",
        )
        for c in timeline.compactions
    ]
    markers += [
        Marker(
            max(0.0, e.at_call - 0.5),
            "!",
            f"error in turn {e.turn_id or '–'}: [{e.code}] {e.message[:200]}",
            ERROR_COLOR,
            style="tick",
            href=f"#error-{number}",
        )
        for number, e in enumerate(timeline.errors, 1)
    ]
    markers += [
        Marker(
            max(0.0, i.at_call - 0.5),
            "",
            f"turn {i.turn_id} aborted ({i.reason})",
            INTERRUPT_COLOR,
            style="tick",
            href=f"#interrupt-{number}",
        )
        for number, i in enumerate(timeline.interrupts, 1)
    ]
    chart = Chart(
        x_max=x_max,
        y_max=y_max,
        series=series,
        markers=markers,
        x_label="token counts, in order (model calls, and the estimate after each compaction)",
        y_label="tokens in context",
        whole_x=True,
    )
    notes = []
    if timeline.sampled:
        notes.append(
            f"{len(calls):,} of {timeline.counts.model_calls:,} points are drawn: those around "
            "every compaction, error and aborted turn, and the lowest and highest of each "
            "stretch between."
        )
    if timeline.session.auto_compact_token_limit is None and not any(c.limit for c in calls):
        notes.append(
            "The rollout records no auto-compaction limit (a session without one, or a rollout "
            "written before turns recorded it)."
        )
    entries = [("tokens in context", CONTEXT_COLOR)]
    if any(call.window for call in calls):
        entries.append(("context window", WINDOW_COLOR))
    if any(call.limit for call in calls):
        entries.append(("auto-compaction limit", LIMIT_COLOR))
    if timeline.compactions:
        entries.append(("compaction (follow its mark for the receipt)", COMPACTION_COLOR))
    if timeline.errors:
        entries.append(("error", ERROR_COLOR))
    if timeline.interrupts:
        entries.append(("aborted turn", INTERRUPT_COLOR))
    return (
        svg_chart(chart)
        + "\n"
        + legend(entries)
        + '\n<p class="readout" id="readout">Point at the chart to read a call.</p>\n'
        + "".join(f'<p class="note">{text(note)}</p>\n' for note in notes)
    )


def _compaction_row(c: Compaction) -> str:
    flags = []
    if c.background:
        flags.append(tag("background", "info"))
    if c.cut:
        flags.append(tag("summary cut at the answer limit", "warn"))
    if c.masked_outputs:
        flags.append(tag(f"{c.masked_outputs} output{'s' if c.masked_outputs != 1 else ''} masked"))
    if c.summary is not None:
        label = f"summary ({len(c.summary):,} characters{', cut here' if c.summary_cut else ''})"
        summary = details(label, c.summary)
    else:
        summary = '<span class="muted">none</span>'
    return row(
        [
            f"#{c.number}",
            text(c.turn_id or "–"),
            _time(c.time),
            text(c.trigger or "–"),
            text(c.backend or "–"),
            f"{figure(c.tokens_before)} → {figure(c.tokens_after)}",
            _duration(c.duration_ms),
            " ".join(flags),
            summary,
        ],
        numeric=(5, 6),
        element_id=f"compaction-{c.number}",
    )


COMPACTION_HEADERS = [
    *("#", "turn", "time", "trigger", "backend", "tokens before → after", "took", ""),
    "summary",
]

_OUTCOME_KIND = {"completed": "good", "failed": "bad", "aborted": "warn", "unfinished": "warn"}


def _turn_row(turn: Turn) -> str:
    outcome = turn.outcome + (f" ({turn.reason})" if turn.reason else "")
    return row(
        [
            f"<code>{text(turn.id)}</code>",
            _time(turn.started),
            _duration(turn.duration_ms),
            tag(outcome, _OUTCOME_KIND.get(turn.outcome, "")),
            figure(turn.model_calls),
            figure(turn.tool_calls),
            figure(turn.compactions),
            figure(turn.errors),
            text(turn.input or ""),
        ],
        numeric=(4, 5, 6, 7),
        element_id=f"turn-{turn.id}",
    )


def _held(stretch: Stretch) -> str:
    """What a collapsed stretch held: ``no compaction, no error``, or how many."""
    held = [
        _plural(stretch.compactions, "compaction") if stretch.compactions else "no compaction",
        _plural(stretch.errors, "error") if stretch.errors else "no error",
    ]
    if stretch.aborted:
        held.append(f"{stretch.aborted:,} not completed")
    return ", ".join(held)


def _stretch_row(stretch: Stretch) -> str:
    said = (
        f"turns <code>{text(stretch.first)}</code> – <code>{text(stretch.last)}</code>: "
        f"{stretch.turns:,} turns, {_held(stretch)} "
        f"({_plural(stretch.model_calls, 'model call')}, "
        f"{_plural(stretch.tool_calls, 'tool call')}; {_time(stretch.started)} to "
        f"{_time(stretch.ended)})"
    )
    return row([said], css_class="collapsed", colspan_last=9)


def _turns(timeline: Timeline) -> str:
    rows: list[str] = []
    stretches = list(timeline.collapsed)
    for index, turn in enumerate(timeline.turns):
        while stretches and stretches[0].at <= index:
            rows.append(_stretch_row(stretches.pop(0)))
        rows.append(_turn_row(turn))
        rows.append(spawned_row(timeline.agents, timeline.session.id, turn.id, 9))
    rows = [html for html in rows if html] + [_stretch_row(stretch) for stretch in stretches]
    headers = ["turn", "started", "took", "outcome", "model calls", "tool calls"]
    headers += ["compactions", "errors", "input"]
    note = ""
    if timeline.collapsed:
        hidden = sum(stretch.turns for stretch in timeline.collapsed)
        eventful = any(s.compactions or s.errors or s.aborted for s in timeline.collapsed)
        note = (
            f'<p class="note">{hidden:,} of {timeline.counts.turns:,} turns are collapsed: '
            "stretches with no compaction, no error and no aborted turn"
            + (", and the eventful turns past the first and last listed" if eventful else "")
            + ".</p>\n"
        )
    return note + table(headers, rows, numeric=(4, 5, 6, 7), element_id="turns")


def _tool_row(tool: ToolCall, cwd: str | None) -> str:
    marks = []
    if tool.masked:
        by = f" by #{tool.masked_by}" if tool.masked_by else ""
        link = f'<a href="#compaction-{tool.masked_by}">' if tool.masked_by else "<span>"
        end = "</a>" if tool.masked_by else "</span>"
        marks.append(f"{link}{tag('masked' + by, 'warn')}{end}")
    if tool.recalled:
        marks.append(tag("recalled", "info"))
    if tool.reference is not None:
        marks.append(f"recalls <code>{text(tool.reference)}</code>")
    if tool.patch is not None:
        marks.append(patch_html(tool.patch, cwd))
    return row(
        [
            text(tool.turn_id or "–"),
            f"<code>{text(tool.name)}</code>",
            f"<code>{text(tool.call_id)}</code>",
            _time(tool.time),
            " ".join(marks),
        ]
    )


def _tools(timeline: Timeline) -> str:
    note = ""
    if len(timeline.tool_calls) < timeline.counts.tool_calls:
        note = (
            f'<p class="note">The {len(timeline.tool_calls):,} tool calls of the turns listed '
            f"above; {timeline.counts.tool_calls:,} in all.</p>\n"
        )
    rows = [_tool_row(tool, timeline.session.cwd) for tool in timeline.tool_calls]
    return note + table(["turn", "tool", "call id", "time", "marks"], rows, element_id="tool-calls")


def _problems(timeline: Timeline) -> str:
    rows: list[tuple[str, str]] = []
    for number, error in enumerate(timeline.errors, 1):
        cells = [
            _time(error.time),
            text(error.turn_id or "–"),
            tag(f"error: {error.code}", "bad"),
            text(error.message),
        ]
        rows.append((error.time or "", row(cells, element_id=f"error-{number}")))
    for number, stop in enumerate(timeline.interrupts, 1):
        cells = [
            _time(stop.time),
            text(stop.turn_id),
            tag(f"aborted: {stop.reason}", "warn"),
            text(f"after {_duration(stop.duration_ms)}"),
        ]
        rows.append((stop.time or "", row(cells, element_id=f"interrupt-{number}")))
    rows.sort(key=lambda pair: pair[0])
    counts = timeline.counts
    left_out = counts.errors + counts.interrupts - len(timeline.errors) - len(timeline.interrupts)
    return _left_out(left_out, "errors and aborted turns") + table(
        ["time", "turn", "what", "detail"],
        [html for _, html in rows],
        element_id="problems",
        empty="no error, no aborted turn",
    )


def _left_out(count: int, what: str) -> str:
    """The note over a list that leaves ``count`` entries out."""
    if not count:
        return ""
    return (
        f'<p class="note">{count:,} {what} are not listed: those of the turns collapsed, and '
        "past the first and last listed.</p>\n"
    )


def _warnings(timeline: Timeline) -> str:
    rows = [
        row([_time(w.time), text(w.turn_id or "–"), text(w.message)]) for w in timeline.warnings
    ]
    left_out = _left_out(timeline.counts.warnings - len(timeline.warnings), "warnings")
    return left_out + table(["time", "turn", "warning"], rows, element_id="warnings")


def _work_state(timeline: Timeline) -> str:
    record = timeline.work_state
    entries: Sequence[dict[str, str]] = record.get("entries", [])
    pinned: Sequence[str] = record.get("pinned", [])
    if not entries and not pinned:
        return (
            '<p class="note" id="work-state">No work-state record: the session kept none '
            "(<code>features.work_state</code> is off), or nothing was recorded.</p>"
        )
    parts = ['<div id="work-state">']
    kinds = [*KIND_HEADINGS, *sorted({e["kind"] for e in entries} - set(KIND_HEADINGS))]
    for kind in kinds:
        texts = [e["text"] for e in entries if e["kind"] == kind]
        if texts:
            parts.append(f"<h3>{text(kind_heading(kind))} ({len(texts):,})</h3>")
            parts.append(
                '<ul class="record">'
                + "".join(f"<li><code>{text(t)}</code></li>" for t in texts)
                + "</ul>"
            )
    if pinned:
        parts.append(f"<h3>Pinned messages ({len(pinned):,})</h3>")
        parts.append(
            '<ul class="record">' + "".join(f"<li>{text(t)}</li>" for t in pinned) + "</ul>"
        )
    parts.append("</div>")
    return "\n".join(parts)


def _notes(timeline: Timeline) -> str:
    if not timeline.notes:
        return ""
    items = "".join(f"<li>{text(note)}</li>" for note in timeline.notes)
    left_out = _left_out(timeline.counts.notes - len(timeline.notes), "malformed lines")
    return (
        f"<h2>Lines of the rollout that could not be read ({timeline.counts.notes:,})</h2>\n"
        f'{left_out}<ul id="notes">{items}</ul>'
    )


def render_page(timeline: Timeline) -> str:
    """The whole page of ``timeline`` (condense a long one first:
    :func:`~._timeline_condense.condense`)."""
    session = timeline.session
    body = "\n".join(
        part
        for part in [
            _header(timeline),
            "<h2>Context in use</h2>",
            _chart(timeline),
            f"<h2>Compactions ({timeline.counts.compactions:,})</h2>",
            table(
                COMPACTION_HEADERS,
                [_compaction_row(c) for c in timeline.compactions],
                numeric=(5, 6),
                element_id="compactions",
            ),
            f"<h2>Turns ({timeline.counts.turns:,})</h2>",
            _turns(timeline),
            agents_section(
                timeline.agents,
                timeline.counts.agents,
                timeline.session.id or "the session",
                [t for turn in timeline.turns for t in (turn.started, turn.ended)],
            ),
            f"<h2>Tool calls ({timeline.counts.tool_calls:,})</h2>",
            _tools(timeline),
            plans_html(timeline.plans, timeline.counts.plan_updates),
            "<h2>Errors and aborted turns "
            f"({timeline.counts.errors + timeline.counts.interrupts:,})</h2>",
            _problems(timeline),
            f"<h2>Warnings ({timeline.counts.warnings:,})</h2>",
            _warnings(timeline),
            "<h2>Work-state record at the end</h2>",
            _work_state(timeline),
            _notes(timeline),
            f"<footer>Written by <code>relay show --html</code> from <code>"
            f"{text(session.rollout)}</code>. The page's data is embedded as JSON in the "
            f"element <code>#{DATA_ID}</code> (its fields: docs/timeline.md).</footer>",
            json_script(DATA_ID, timeline_json(timeline)),
        ]
        if part  # a section with nothing to show (no plan, no malformed line) is left out
    )
    title = f"relay session {session.id or 'unknown'}"
    return page(title, body, css=CSS + EDITS_CSS + AGENTS_CSS, script=SCRIPT)


__all__ = ["DATA_ID", "SCRIPT", "render_page"]
