"""``relay eval --html``: one self-contained page with the table, the plots and, per case, the
summary each configuration produced beside the facts it lost; its data is the report's."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from relay._cli._main import main
from relay._eval._page import PAGE_FORMAT, page_data
from relay._eval._score import RunRecord
from tests.browser import browse, find_chromium, loaded, png_pixels
from tests.shells.timelines import read_page

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


@pytest.fixture(scope="module")
def eval_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if not HAS_MATPLOTLIB:
        pytest.skip("needs matplotlib (plots extra)")
    root = tmp_path_factory.mktemp("evalpage")
    small = root / "smoke"
    for case in sorted((CORPUS / "cases").iterdir())[:3]:
        shutil.copytree(case, small / case.name)
    html, report = root / "page.html", root / "report.json"
    status = main(["eval", str(small), "--matrix", str(CORPUS / "matrix.toml"),
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
    # The table and the plots.
    assert 'id="figures"' in text and 'id="kinds"' in text
    for name in configs:
        assert name in text
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


def test_html_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    assert main(["eval", str(CORPUS), "--html", str(tmp_path / "p.html")]) == 2
    err = capsys.readouterr().err
    assert "--html needs matplotlib" in err and "pip install 'relay-runtime[plots]'" in err
    assert not (tmp_path / "p.html").exists()
