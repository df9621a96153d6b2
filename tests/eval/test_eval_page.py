"""``relay eval --html``: one self-contained page with the table, the plots and, per case, the
summary each configuration produced beside the facts it lost; its data is the report's."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from relay._cli._main import main
from relay._eval._page import FIGURES_ID, PAGE_FORMAT, figures_table, page_data
from relay._eval._score import RunRecord, figure_text, summarize
from tests.browser import browse, evaluate, find_chromium, loaded, png_pixels
from tests.cli.timelines import read_page

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "eval"
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
needs_matplotlib = pytest.mark.skipif(not HAS_MATPLOTLIB, reason="needs matplotlib (plots extra)")


def test_the_page_data_groups_summaries_and_lost_facts_by_case_and_configuration() -> None:
    records = [
        RunRecord("a", "local", 0, missing=("x",), summaries=("first", "second")),
        RunRecord("a", "local", 1, missing=("x", "y"), summaries=("first",)),
        RunRecord("a", "budget", 0, failure="boom"),
    ]
    data = page_data({"configurations": {}}, records)
    assert data["format"] == PAGE_FORMAT
    assert data["cases"]["a"]["local"] == {
        "summaries": ["first", "second"],
        "lost": ["x", "y"],
        "failures": [],
    }
    assert data["cases"]["a"]["budget"]["failures"] == ["boom"]


def kinds_summary() -> dict[str, Any]:
    records = [
        RunRecord("a", "local", 0, facts_checked=4, facts_kept=3, input_tokens=1200,
                  by_kind=(("path", 2, 2), ("decision", 2, 1))),
        RunRecord("a", "local", 1, facts_checked=4, facts_kept=4, input_tokens=1000,
                  by_kind=(("path", 2, 2), ("decision", 2, 2))),
        RunRecord("a", "none", 0, facts_checked=4, facts_kept=1, input_tokens=900,
                  by_kind=(("path", 2, 1),), failure="boom"),
        RunRecord("a", "none", 1, facts_checked=4, facts_kept=1, input_tokens=900,
                  by_kind=(("path", 2, 1),)),
    ]  # fmt: skip
    return summarize(records, ["local", "none"])


def test_the_figures_are_a_table_with_a_row_per_configuration() -> None:
    summary = kinds_summary()
    html = figures_table(summary)
    rows = read_page(html).tables[FIGURES_ID]
    # Two rows of headings: the kinds are grouped under one.
    assert rows[0] == [
        "configuration",
        "retention",
        "retention by fact kind",
        "recallable",
        "accuracy",
        "input tokens",
        "compactions",
        "installed",
        "refused",
        "re-reads",
        "failures",
    ]
    assert rows[1] == ["path", "decision"]
    local = summary["local"]
    assert rows[2] == [
        "local",
        figure_text(local["retention"], "percent"),
        "100.0%",
        figure_text(local["retention_by_kind"]["decision"], "percent"),
        "0.0%",
        "–",
        "1,100 ±100",
        "0",
        "0",
        "0",
        "0",
        "0",
    ]
    assert rows[3][:6] == ["none", "25.0%", "50.0%", "–", "0.0%", "–"]
    assert rows[3][-1] == "0.5 ±0.5"
    # Headings a screen reader reads as such: columns, the group of kinds, and each row's.
    assert len(re.findall(r"<th scope=col ", html)) == 2 + 2 + 8
    assert html.count("<th scope=colgroup") == 1
    assert re.findall(r"<th scope=row [^>]*>([^<]*)</th>", html) == ["local", "none"]
    assert "<caption>" in html
    # What sorting reads: the mean, not the text shown.
    assert 'data-value="1100.0"' in html and 'data-value=""' in html


def test_without_fact_kinds_the_table_has_one_row_of_headings() -> None:
    records = [RunRecord("a", "only", 0, facts_checked=2, facts_kept=2, input_tokens=10)]
    html = figures_table(summarize(records, ["only"]), {"only": {"compaction_latency_ms": {
        "mean": 12.0, "min": 12.0, "max": 12.0, "spread": 0.0}}})  # fmt: skip
    rows = read_page(html).tables[FIGURES_ID]
    assert rows[0][-3:] == ["latency ms", "re-reads", "failures"]
    assert "rowspan" not in html and "colgroup" not in html
    assert rows[1][0] == "only" and rows[1][-3] == "12"


@pytest.fixture(scope="module")
def eval_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not HAS_MATPLOTLIB:
        pytest.skip("needs matplotlib (plots extra)")
    root = tmp_path_factory.mktemp("evalpage")
    small = root / "smoke"
    for case in sorted((CORPUS / "cases").iterdir())[:3]:
        shutil.copytree(case, small / case.name)
    html, report = root / "page.html", root / "report.json"
    status = main(["eval", str(small), "--matrix", str(CORPUS / "matrix.toml"), "--trust-corpus",
                   "--repeats", "1", "--json", str(report), "--html", str(html)])  # fmt: skip
    assert status == 0
    return html, report


@needs_matplotlib
def test_the_page_holds_the_table_the_plots_and_every_case(eval_page: tuple[Path, Path]) -> None:
    html, report_path = eval_page
    text = html.read_text(encoding="utf-8")
    page = read_page(text)
    data = page.data("relay-eval")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    # The data is the report (and its runs), plus what only the page shows.
    assert data["report"]["configurations"] == report["configurations"]
    assert data["report"]["runs"] == report["runs"]
    configs = list(report["configurations"])
    cases = sorted({run["case"] for run in report["runs"]})
    assert sorted(data["cases"]) == cases
    for case in cases:
        assert f'id="case-{case}"' in text
        assert sorted(data["cases"][case]) == sorted(configs)
        for config in configs:
            lost = {f for r in report["runs"] if (r["case"], r["config"]) == (case, config)
                    for f in r["missing"]}  # fmt: skip
            assert set(data["cases"][case][config]["lost"]) == lost
    # The summaries a local compaction installed are there, beside the facts lost.
    local = data["cases"][cases[0]]["local"]
    assert local["summaries"] and all(s in text for s in local["summaries"][:1])
    # The table (one row per configuration, no text laid out in a <pre>) and the plots.
    assert "<pre class" not in text
    rows = page.tables[FIGURES_ID]
    assert [row[0] for row in rows[2:]] == configs
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 2
    # Nothing is fetched.
    assert not re.search(r"(?:src|href)=\"(?!data:|#)", text)


@needs_matplotlib
def test_the_page_has_every_fact_kind_of_the_corpus(eval_page: tuple[Path, Path]) -> None:
    data = read_page(eval_page[0].read_text(encoding="utf-8")).data("relay-eval")
    kinds = data["report"]["configurations"]["local"]["retention_by_kind"]
    assert set(kinds) == {
        "path", "constant", "check_result", "exit_status", "log_line", "constraint", "decision",
    }  # fmt: skip


@pytest.mark.slow  # a browser
@needs_matplotlib
def test_the_page_loads_with_no_error_and_shows_its_plots(
    eval_page: tuple[Path, Path],
) -> None:
    chromium = find_chromium()
    html = eval_page[0]
    assert loaded(chromium, html).get("data-errors") is None
    shot = html.parent / "eval.png"
    browse(chromium, html, f"--screenshot={shot}", "--window-size=1280,1400")
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1400)
    assert len(set(pixels)) > 50, "a blank (or nearly blank) screenshot"
    [(_, most)] = Counter(pixels).most_common(1)
    assert most < 0.97 * len(pixels)


#: Reads the table of figures in the browser: the configuration of each row, in order, and
#: the heading's sort state; presses a heading's button first when one is named.
TABLE_STATE = """
(function (press) {
  var table = document.getElementById("figures");
  var pressed = [];
  press.forEach(function (heading) {
    var buttons = table.querySelectorAll("th button");
    var button = Array.prototype.filter.call(buttons, function (b) {
      return b.textContent === heading;
    })[0];
    button.click();
    pressed.push(button.parentElement.getAttribute("aria-sort"));
  });
  var rows = Array.prototype.map.call(table.tBodies[0].rows, function (row) {
    return row.cells[0].textContent;
  });
  var errors = document.documentElement.getAttribute("data-errors");
  return {rows: rows, pressed: pressed, errors: errors};
})
"""


@pytest.mark.slow  # a browser
@needs_matplotlib
def test_the_table_sorts_by_a_heading_in_the_browser(eval_page: tuple[Path, Path]) -> None:
    chromium = find_chromium()
    html, report_path = eval_page
    summary = json.loads(report_path.read_text(encoding="utf-8"))["configurations"]
    configs = list(summary)
    shown = evaluate(chromium, html, TABLE_STATE + "([])")
    assert shown == {"rows": configs, "pressed": [], "errors": None}
    tokens = {name: summary[name]["input_tokens"]["mean"] for name in configs}
    ascending = sorted(configs, key=lambda name: tokens[name])
    once = evaluate(chromium, html, TABLE_STATE + '(["input tokens"])')
    assert once == {"rows": ascending, "pressed": ["ascending"], "errors": None}
    twice = evaluate(chromium, html, TABLE_STATE + '(["input tokens", "input tokens"])')
    descending = sorted(configs, key=lambda name: -tokens[name])
    assert twice == {"rows": descending, "pressed": ["ascending", "descending"], "errors": None}
    by_name = evaluate(chromium, html, TABLE_STATE + '(["configuration"])')
    assert by_name["rows"] == sorted(configs)


def test_html_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert main(["eval", str(CORPUS), "--html", str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err
    assert "--html needs matplotlib" in err and "pip install 'relay-runtime[plots]'" in err
    assert not (tmp_path / "p.html").exists()
