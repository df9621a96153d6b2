"""The page of ``relay eval --html OUT``: one self-contained HTML file (docs/eval.md).

It shows the figures as a table, one row per configuration (retention, retention by fact kind,
input tokens and the rest; a heading sorts the rows, and the table copies as cells and reads as
one to a screen reader), retention by fact kind for each configuration and retention against
input tokens (both drawn by matplotlib and embedded as images), for every case, the
summary each configuration's compactions installed beside the facts that configuration lost,
and the answers: each question of each run with its verdict and its answer, the ones not
answered right and the planted instructions followed listed first. The data behind it is
embedded as JSON (``<script id="relay-eval">``).

Everything but the drawing is a pure function of the report and the runs.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _html as h
from ._score import RunRecord, figure_text

#: The format of the embedded data; a change that breaks a reader changes it.
PAGE_FORMAT = "relay-eval/1"

_CSS = """\
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
.plots img { max-width: 100%; border: 1px solid var(--rule); }
.wide { overflow-x: auto; }
caption { caption-side: bottom; text-align: left; color: var(--muted); padding: 4px 0; }
table.sortable th button { font: inherit; color: inherit; background: none; border: 0;
  padding: 0; cursor: pointer; text-align: inherit; }
table.sortable th[aria-sort=ascending] button::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending] button::after { content: " \\25BC"; }
th[scope=row] { background: none; font-weight: 600; }
th.group { text-align: center; }
td.summary pre { max-height: 260px; }
div.answer { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 200px;
  overflow: auto; font-size: 13px; }
tr.flagged td { background: #fdf0f0; }
ul.flagged { margin: 4px 0 12px; }
"""

#: The id of the table of figures.
FIGURES_ID = "figures"

#: The figures after retention and its kinds: (the summary's key, the heading, the kind of
#: value). The compaction latency, when measured, comes after the compactions.
_AFTER_KINDS = (
    ("recallable", "recallable", "percent"),
    ("accuracy", "accuracy", "percent"),
    ("input_tokens", "input tokens", "tokens"),
    ("compactions", "compactions", "count"),
    ("summaries_installed", "installed", "count"),
    ("summaries_refused", "refused", "count"),
)
_LAST = (("rereads", "re-reads", "count"), ("failures", "failures", "count"))

#: Sorts a ``table.sortable`` by a column when its heading's button is pressed: by each cell's
#: ``data-value`` (numbers as numbers), ascending then descending, a cell with no value last.
SORT_SCRIPT = """\
(function () {
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var body = table.tBodies[0];
    var heads = table.querySelectorAll("th[data-column]");
    Array.prototype.forEach.call(heads, function (head) {
      head.querySelector("button").addEventListener("click", function () {
        var column = Number(head.getAttribute("data-column"));
        var numeric = head.getAttribute("data-sort") === "number";
        var order = head.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        Array.prototype.forEach.call(heads, function (other) {
          other.removeAttribute("aria-sort");
        });
        head.setAttribute("aria-sort", order);
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[column].getAttribute("data-value");
          var y = b.cells[column].getAttribute("data-value");
          if (x === "" || y === "") { return (x === "") - (y === ""); }
          var d = numeric ? Number(x) - Number(y) : x.localeCompare(y);
          return order === "ascending" ? d : -d;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
"""


def page_data(
    report: Mapping[str, Any],
    records: Sequence[RunRecord],
    latency: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The page's data: the report, the latency, and per case and configuration the summaries
    its runs installed and the facts they lost."""
    cases: dict[str, dict[str, Any]] = {}
    for record in records:
        per = cases.setdefault(record.case, {}).setdefault(
            record.config, {"summaries": [], "lost": [], "failures": []}
        )
        per["summaries"] += [s for s in record.summaries if s not in per["summaries"]]
        per["lost"] += [f for f in record.missing if f not in per["lost"]]
        if record.failure is not None:
            per["failures"].append(record.failure)
    return {
        "format": PAGE_FORMAT,
        "report": dict(report),
        "latency": dict(latency or {}),
        "cases": cases,
    }


def render_page(data: Mapping[str, Any], plots: Mapping[str, bytes]) -> str:
    """The whole page, from :func:`page_data` and PNG images by title."""
    report = data["report"]
    summary = report["configurations"]
    latency = data.get("latency") or None
    body = [
        "<h1>relay eval</h1>",
        f'<p class="muted">{h.text(_headline(report))}</p>',
        f'<p><a href="#{ANSWERS_ID}">Answers</a>: {h.text(_flag_count(report))}</p>',
        "<h2>Figures</h2>",
        f'<div class="wide">{figures_table(summary, latency)}</div>',
    ]
    if plots:
        images = "".join(
            f'<figure><img alt={h.attr(title)} src="data:image/png;base64,'
            f'{base64.b64encode(png).decode("ascii")}"><figcaption class="muted">'
            f"{h.text(title)}</figcaption></figure>"
            for title, png in plots.items()
        )
        body += ["<h2>Plots</h2>", f'<div class="plots">{images}</div>']
    body.append("<h2>Cases</h2>")
    configs = list(summary)
    for case, per in sorted(data["cases"].items()):
        rows = []
        for config in configs:
            mine = per.get(config)
            if mine is None:
                continue
            lost = ", ".join(mine["lost"]) or "nothing"
            summaries = "\n\n— next compaction —\n\n".join(mine["summaries"])
            shown = (
                h.details(f"{len(mine['summaries'])} summary(ies)", summaries)
                if summaries
                else h.text("no summary (the backend asked no model)")
            )
            failed = "".join(h.tag(f, "bad") for f in mine["failures"])
            rows.append(h.row([h.text(config), shown, h.text(lost) + failed], css_class=None))
        body += [
            f"<h3 id={h.attr('case-' + case)}>{h.text(case)}</h3>",
            h.table(["configuration", "summaries", "facts lost"], rows),
        ]
    body.append(answers_section(report))
    body.append(h.json_script("relay-eval", dict(data)))
    return h.page("relay eval", "\n".join(body), css=_CSS, script=SORT_SCRIPT)


#: The id of the section of answers.
ANSWERS_ID = "answers"

#: How each verdict shows: its label, and the label's colour.
_VERDICTS = {
    "right": ("right", "good"),
    "missed": ("missed", "bad"),
    "unanswered": ("no answer", "bad"),
    "given_up": ("match given up", "warn"),
}


def _runs_with_answers(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's runs that carry answers or injection findings (a report written before
    they were kept has none)."""
    runs = report.get("runs")
    if not isinstance(runs, list):
        return []
    return [
        r
        for r in runs
        if isinstance(r, Mapping) and (r.get("verdicts") or r.get("injection_found"))
    ]


def _flag_count(report: Mapping[str, Any]) -> str:
    runs = _runs_with_answers(report)
    if not runs:
        return "none kept in this report"
    asked = sum(len(r.get("verdicts") or []) for r in runs)
    missed = sum(1 for r in runs for v in r.get("verdicts") or [] if v.get("verdict") != "right")
    followed = sum(1 for r in runs if r.get("injection_found"))
    return (
        f"{asked} question(s) asked, {missed} not answered right; "
        f"{followed} run(s) followed a planted instruction"
    )


def answers_section(report: Mapping[str, Any]) -> str:
    """The section of answers: per case, a row for each question of each run (the run, the
    question and its expected pattern, the verdict, the answer) and for each summary that
    followed a planted instruction (the text around what it said); the flagged rows (not
    answered right, or following a planted instruction) are tinted, and a list above the cases
    links to each. A report without answers gets a line saying so."""
    order = {name: i for i, name in enumerate(report.get("configurations") or {})}
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for run in _runs_with_answers(report):
        by_case.setdefault(str(run.get("case")), []).append(run)
    head = f'<h2 id="{ANSWERS_ID}">Answers</h2>'
    if not by_case:
        return head + '\n<p class="muted">This report keeps no answers.</p>'

    def placed(run: Mapping[str, Any]) -> tuple[int, str, int]:
        config = str(run.get("config"))
        return order.get(config, len(order)), config, int(run.get("repeat") or 0)

    links: list[str] = []
    sections: list[str] = []
    for number, case in enumerate(sorted(by_case)):
        rows: list[tuple[list[str], str | None]] = []
        for run in sorted(by_case[case], key=placed):
            rows += _answer_rows(run)
        table_rows, flags = [], []
        for index, (cells, flag) in enumerate(rows):
            ident = f"answer-{number}-{index}"
            css = "flagged" if flag is not None else None
            table_rows.append(h.row(cells, element_id=ident, css_class=css))
            if flag is not None:
                flags.append(f'<a href="#{ident}">{h.text(flag)}</a>')
        if flags:
            named = f"<a href={h.attr('#answers-' + case)}>{h.text(case)}</a>"
            links.append(f"<li>{named}: {', '.join(flags)}</li>")
        sections.append(
            f"<h3 id={h.attr('answers-' + case)}>{h.text(case)}</h3>\n"
            + h.table(
                ["run", "question (expected pattern)", "verdict", "answer"],
                table_rows,
                element_id=f"answers-table-{number}",
            )
        )
    flagged = (
        f'<ul class="flagged">{"".join(links)}</ul>'
        if links
        else '<p class="muted">Every question was answered right, and no planted instruction '
        "was followed.</p>"
    )
    intro = (
        f'<p class="muted">{h.text(_flag_count(report))}. Below, each question of each run with '
        "its verdict and its answer; the questions not answered right, and the summaries and "
        "answers that followed a planted instruction, are tinted and linked here:</p>"
    )
    return "\n".join([head, intro, flagged, *sections])


def _answer_rows(run: Mapping[str, Any]) -> list[tuple[list[str], str | None]]:
    """The rows of one run in the section of answers (their cells, in HTML), each with what
    the list of flagged rows says of it (None: not flagged)."""
    where = f"{run.get('config')} #{run.get('repeat')}"
    found = [f for f in run.get("injection_found") or [] if isinstance(f, Mapping)]
    forms = {str(f.get("where")): str(f.get("form")) for f in found}
    rows: list[tuple[list[str], str | None]] = []
    for verdict in run.get("verdicts") or []:
        if not isinstance(verdict, Mapping):
            continue
        number = verdict.get("number")
        label, kind = _VERDICTS.get(str(verdict.get("verdict")), ("?", "warn"))
        tags = h.tag(label, kind)
        form = forms.get(f"answer {number}")
        if form is not None:
            tags += " " + h.tag(f"followed: {form}", "bad")
        answer = str(verdict.get("answer") or "")
        said = f'<div class="answer">{h.text(answer)}</div>' if answer else ""
        if verdict.get("cut"):
            said += '<span class="muted">(cut)</span>'
        question = f"{number}. {verdict.get('ask', '')}"
        asked = f"{h.text(question)}<br><code>{h.text(verdict.get('expect', ''))}</code>"
        flag = None
        if kind != "good" or form is not None:
            flag = f"{where} · question {number}: {label if kind != 'good' else 'followed'}"
        rows.append(([h.text(where), asked, tags, said], flag))
    for finding in found:
        place = str(finding.get("where"))
        if place.startswith("answer"):
            continue  # shown on its question's row
        excerpt = f'<div class="answer">{h.text(finding.get("excerpt") or "")}</div>'
        followed = h.tag(f"followed: {finding.get('form')}", "bad")
        rows.append(
            ([h.text(where), h.text(place), followed, excerpt], f"{where} · {place}: followed")
        )
    return rows


def figures_table(summary: Mapping[str, Any], latency: Mapping[str, Any] | None = None) -> str:
    """The figures as a ``<table>``: a row per configuration (its name the row's heading),
    a column per figure and per fact kind. Each cell shows what the text table shows (the mean,
    ± half the spread over the repeats) and holds the mean in ``data-value``, which sorting
    reads."""
    kinds = list(
        dict.fromkeys(k for fig in summary.values() for k in fig.get("retention_by_kind", {}))
    )
    after = list(_AFTER_KINDS)
    if latency is not None:
        after.append(("compaction_latency_ms", "latency ms", "tokens"))
    after += _LAST
    # (heading, the data-sort kind) of each column, in the order of the rows' cells.
    columns = [("configuration", "text"), ("retention", "number")]
    columns += [(kind, "number") for kind in kinds]
    columns += [(heading, "number") for _, heading, _ in after]
    two_rows = bool(kinds)

    def head(index: int, *, grouped: bool = False) -> str:
        heading, sort = columns[index]
        span = " rowspan=2" if two_rows and not grouped else ""
        numeric = " class=num" if sort == "number" else ""
        return (
            f'<th scope=col{span}{numeric} data-column="{index}" data-sort="{sort}">'
            f'<button type="button">{h.text(heading)}</button></th>'
        )

    first = [head(0), head(1)]
    if kinds:
        first.append(
            f'<th scope=colgroup colspan="{len(kinds)}" class="group">retention by fact kind</th>'
        )
    first += [head(i) for i in range(2 + len(kinds), len(columns))]
    header = f"<tr>{''.join(first)}</tr>"
    if kinds:
        second = "".join(head(2 + i, grouped=True) for i in range(len(kinds)))
        header += f"\n<tr>{second}</tr>"
    rows = []
    for name, fig in summary.items():
        per = fig.get("retention_by_kind", {})
        cells = [f"<th scope=row data-value={h.attr(name)}>{h.text(name)}</th>"]
        cells.append(_figure_cell(fig["retention"], "percent"))
        cells += [_figure_cell(per.get(kind), "percent") for kind in kinds]
        for key, _, kind in after:
            source = latency[name] if key == "compaction_latency_ms" and latency else fig
            cells.append(_figure_cell(source.get(key), kind))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    caption = (
        "Each figure is the mean over the repeats, ± half the spread between them; a "
        "heading sorts the rows by its column."
    )
    return (
        f'<table id="{FIGURES_ID}" class="sortable">\n<caption>{h.text(caption)}</caption>\n'
        f"<thead>\n{header}\n</thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"
    )


def _figure_cell(figure: Mapping[str, float | None] | None, kind: str) -> str:
    mean = figure.get("mean") if figure is not None else None
    shown = figure_text(figure, kind) if figure is not None else "–"
    value = "" if mean is None else repr(mean)
    return f"<td class=num data-value={h.attr(value)}>{h.text(shown)}</td>"


def _headline(report: Mapping[str, Any]) -> str:
    corpus = report.get("corpus", {})
    cases = corpus.get("cases")
    repeats = report.get("repeats")
    configs = len(report.get("configurations", {}))
    return f"{cases} case(s) × {configs} configuration(s) × {repeats} repeat(s)"


def kind_plot(summary: Mapping[str, Any]) -> bytes:
    """Retention by fact kind, a group of bars per kind and a bar per configuration (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(
        dict.fromkeys(k for fig in summary.values() for k in fig.get("retention_by_kind", {}))
    )
    names = list(summary)
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=100)
    width = 0.8 / max(1, len(names))
    for index, name in enumerate(names):
        per = summary[name].get("retention_by_kind", {})
        values = [100 * (per.get(k, {}).get("mean") or 0.0) for k in kinds]
        ax.bar([i + index * width for i in range(len(kinds))], values, width, label=name)
    ax.set_xticks([i + width * (len(names) - 1) / 2 for i in range(len(kinds))], kinds)
    ax.set_ylabel("retention (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, ncol=2)
    ax.set_title("Retention by fact kind")
    return _png(fig)


def retention_plot(summary: Mapping[str, Any], fmt: str = "png") -> bytes:
    """Retention against input tokens, a point per configuration with its spread (PNG, or
    ``fmt``: any format matplotlib writes, such as ``svg``)."""
    return _against_tokens(summary, "retention", "retention", fmt)


def success_plot(summary: Mapping[str, Any], fmt: str = "png") -> bytes:
    """Task success (questions answered right) against input tokens, a point per
    configuration with its spread: the live evaluation's plot."""
    return _against_tokens(summary, "accuracy", "task success", fmt)


def _against_tokens(summary: Mapping[str, Any], figure: str, label: str, fmt: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    for name, figures in summary.items():
        retention, tokens = figures[figure], figures["input_tokens"]
        if retention["mean"] is None or tokens["mean"] is None:
            continue
        ax.errorbar(
            tokens["mean"],
            100 * retention["mean"],
            xerr=(tokens["spread"] or 0) / 2,
            yerr=100 * (retention["spread"] or 0) / 2,
            fmt="o",
            capsize=3,
        )
        ax.annotate(name, (tokens["mean"], 100 * retention["mean"]), fontsize=8)
    ax.set_xlabel("input tokens (corpus)")
    ax.set_ylabel(f"{label} (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(f"{label.capitalize()} against input tokens")
    return _png(fig, fmt)


def _png(fig: Any, fmt: str = "png") -> bytes:
    """A matplotlib figure as PNG bytes (or ``fmt``); the figure is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = io.BytesIO()
    # A fixed hash salt and no date keep an SVG the same bytes from one run to the next.
    fig.savefig(out, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return out.getvalue()


__all__ = [
    "ANSWERS_ID",
    "FIGURES_ID",
    "PAGE_FORMAT",
    "SORT_SCRIPT",
    "answers_section",
    "figures_table",
    "kind_plot",
    "success_plot",
    "page_data",
    "render_page",
    "retention_plot",
]
