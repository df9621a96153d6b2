"""The page of ``relay eval --html OUT``: one self-contained HTML file (docs/eval.md).

It shows the table of figures, retention by fact kind for each configuration, retention
against input tokens (both drawn by matplotlib and embedded as images), and, for every case,
the summary each configuration's compactions installed beside the facts that configuration
lost. The data behind it is embedded as JSON (``<script id="relay-eval">``).

Everything but the drawing is a pure function of the report and the runs.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from .. import _html as h
from ._score import RunRecord, render_kind_table, render_table

#: The format of the embedded data; a change that breaks a reader changes it.
PAGE_FORMAT = "relay-eval/1"

_CSS = """\
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
.plots img { max-width: 100%; border: 1px solid var(--rule); }
pre.table { background: var(--band); padding: 8px; overflow-x: auto; }
td.summary pre { max-height: 260px; }
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
        "<h2>Figures</h2>",
        _pre("figures", render_table(summary, latency, with_kinds=False)),
        "<h2>Retention by fact kind</h2>",
        _pre("kinds", render_kind_table(summary) or "no fact kinds"),
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
    body.append(h.json_script("relay-eval", dict(data)))
    return h.page("relay eval", "\n".join(body), css=_CSS)


def _pre(element_id: str, content: str) -> str:
    return f'<pre class="table" id={h.attr(element_id)}>{h.text(content)}</pre>'


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


def retention_plot(summary: Mapping[str, Any]) -> bytes:
    """Retention against input tokens, a point per configuration with its spread (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    for name, figures in summary.items():
        retention, tokens = figures["retention"], figures["input_tokens"]
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
    ax.set_ylabel("retention (%)")
    ax.set_ylim(-5, 105)
    ax.set_title("Retention against input tokens")
    return _png(fig)


def _png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes; the figure is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


__all__ = ["PAGE_FORMAT", "kind_plot", "page_data", "render_page", "retention_plot"]
