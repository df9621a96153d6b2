"""``relay eval`` end to end: hand-built cases with known figures, the shipped corpus, the CLI."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._cli._main import main
from relay._eval._corpus import Configuration, load_corpus, load_matrix
from relay._eval._run import report, run_matrix

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "eval"
SECRET = "SECRET = 42"
#: The history Codex makes: no work-state record, no file placed back (both on by default).
CODEX_FORM: dict[str, Any] = {"features": {"work_state": False}, "recent_reads_token_budget": 0}


def _write_case(folder: Path, *, reread: bool, fail: bool = False) -> None:
    """Read a.py, compact, go on (reading a.py again when ``reread``), one question."""
    fixture = folder / "fixture"
    fixture.mkdir(parents=True)
    (fixture / "a.py").write_text(f"{SECRET}\n", encoding="utf-8")
    steps: list[dict[str, Any]] = []
    for turn, text in (("one", "Constraint: keep it small. Read a.py."), ("two", "Go on.")):
        steps.append(
            {"id": turn, "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}
        )
        steps.append({"wait_for": {"type": "turn_complete", "match": {"turn_id": turn}}})
        if turn == "one":
            steps.append({"id": "compact", "op": {"type": "compact"}})
            steps.append({"wait_for": {"type": "turn_complete", "match": {"turn_id": "compact"}}})
    (folder / "ops.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    read = {"function_call": {"name": "read_file", "arguments": {"path": "a.py"}}}
    responses: list[Any] = [read, "Read it."]
    if fail:
        responses = [{"http_error": {"status": 400, "message": "bad request"}}]
    else:
        responses += [read, "Again."] if reread else ["Going on."]
    (folder / "model.json").write_text(json.dumps({"responses": responses}))
    probes = {
        "facts": ["Constraint: keep it small", SECRET],
        "questions": [{"ask": "What is SECRET?", "expect": r"SECRET\s*=\s*42"}],
    }
    (folder / "probes.json").write_text(json.dumps(probes))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write_case(root / "again", reread=True)
    _write_case(root / "once", reread=False)
    return root


async def test_hand_built_cases_give_the_known_figures(corpus: Path) -> None:
    records = await run_matrix(
        load_corpus(corpus), [Configuration("local", CODEX_FORM)], {}, repeats=2, parallel=4
    )
    by_case = {(r.case, r.repeat): r for r in records}
    assert sorted(by_case) == [("again", 0), ("again", 1), ("once", 0), ("once", 1)]
    again, once = by_case["again", 0], by_case["once", 0]
    # The summary keeps the user's request but not what the tool read.
    for run in (again, once):
        assert (run.compactions, run.facts_checked, run.facts_kept) == (1, 2, 1)
        assert run.missing == (SECRET,)
        assert run.failure is None
        assert run.input_tokens > 0
    # Reading a.py again after the compaction is one re-read, and brings the answer back.
    assert (again.rereads, again.answered) == (1, 1)
    assert (once.rereads, once.answered) == (0, 0)
    summary = report(records, [Configuration("local", CODEX_FORM)])["configurations"]["local"]
    assert summary["retention"]["mean"] == 0.5
    assert summary["accuracy"] == {"mean": 0.5, "min": 0.5, "max": 0.5, "spread": 0.0}
    assert summary["rereads"]["mean"] == 1.0


async def test_the_default_configuration_places_back_what_the_tool_read(corpus: Path) -> None:
    records = await run_matrix(load_corpus(corpus), [Configuration("default", {})], {}, repeats=1)
    for run in records:
        # The file read before the compaction is in the history after it: every fact kept,
        # and the question is answered without reading it again.
        assert (run.facts_checked, run.facts_kept, run.missing) == (2, 2, ())
    assert {r.case: r.answered for r in records} == {"again": 1, "once": 1}


async def test_a_failing_run_is_counted_and_the_others_still_run(corpus: Path) -> None:
    _write_case(corpus / "broken", reread=False, fail=True)
    records = await run_matrix(
        load_corpus(corpus), [Configuration("local", CODEX_FORM)], {}, repeats=1
    )
    failed = {r.case: r.failure for r in records}
    assert failed["again"] is None and failed["once"] is None
    assert failed["broken"] is not None and "bad request" in failed["broken"]
    summary = report(records, [Configuration("local", CODEX_FORM)])["configurations"]["local"]
    assert summary["failures"]["mean"] == 1.0


async def test_configurations_of_a_matrix_are_laid_over_the_base(corpus: Path) -> None:
    configurations = [
        Configuration("local", CODEX_FORM),
        Configuration(
            "budget", {**CODEX_FORM, "features": {"work_state": False, "token_budget": True}}
        ),
    ]
    records = await run_matrix(load_corpus(corpus), configurations, {}, repeats=1)
    kept = {(r.config, r.case): r.facts_kept for r in records}
    # The token budget starts a fresh window with the user's latest request in it, and no
    # summary: the fact is kept, in fewer tokens than the summary's history takes.
    assert kept["budget", "once"] == kept["local", "once"] == 1
    tokens = {(r.config, r.case): r.input_tokens for r in records}
    assert tokens["budget", "once"] < tokens["local", "once"]


#: The configurations of the shipped matrix, in order (docs/eval.md).
MATRIX_NAMES = [
    "local",
    "local+work_state",
    "local+masking",
    "token_budget",
    "local+reads",
    "local+work_state+reads",
    "local+work_state+reads+masking",
]


def _smoke_corpus(tmp_path: Path) -> Path:
    small = tmp_path / "smoke"
    for case in sorted((CORPUS / "cases").iterdir())[:2]:
        shutil.copytree(case, small / case.name)
    return small


async def test_smoke_the_shipped_corpus_under_its_matrix(tmp_path: Path) -> None:
    cases = load_corpus(_smoke_corpus(tmp_path))
    configurations = load_matrix(CORPUS / "matrix.toml")
    assert [c.name for c in configurations] == MATRIX_NAMES
    first = report(await run_matrix(cases, configurations, {}, repeats=2), configurations)
    figures = first["configurations"]
    assert all(f["failures"]["max"] == 0 for f in figures.values())
    assert all(f["retention"]["spread"] == 0 for f in figures.values())
    assert all(f["compactions"]["mean"] == 4 for f in figures.values())
    retention = {name: f["retention"]["mean"] for name, f in figures.items()}
    assert retention["local+work_state"] > retention["local"] > retention["token_budget"]
    # The record, the lines that stood out and the files placed back keep every planted fact.
    assert retention["local+work_state+reads"] == 1.0
    best = figures["local+work_state+reads"]["retention_by_kind"]
    assert {kind: figure["mean"] for kind, figure in best.items()} == dict.fromkeys(
        ["path", "constant", "check_result", "exit_status", "log_line", "constraint", "decision"],
        1.0,
    )
    assert (
        figures["local+masking"]["input_tokens"]["mean"] < figures["local"]["input_tokens"]["mean"]
    )


def test_the_command_prints_a_table_and_writes_the_same_json_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = _smoke_corpus(tmp_path)
    outs = []
    for n in range(2):
        out = tmp_path / f"report{n}.json"
        assert main(["eval", str(small), "--matrix", str(CORPUS / "matrix.toml"),
                     "--trust-corpus", "--repeats", "1", "--json", str(out)]) == 0  # fmt: skip
        outs.append(out.read_bytes())
        assert json.loads((tmp_path / f"report{n}.timing.json").read_text())["local"]
    assert outs[0] == outs[1]
    heading = f"2 case(s) × {len(MATRIX_NAMES)} configuration(s) × 1 repeat(s)\n"
    table = capsys.readouterr().out.split(heading)
    assert len(table) == 3
    rows = table[2].split("\n\n")[0].splitlines()[2:]
    assert [line.split()[0] for line in rows] == MATRIX_NAMES


def test_plot_without_matplotlib_names_the_extra(
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["eval", str(corpus), "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "relay-runtime[plots]" in err[0] and "matplotlib" in err[0]
    assert not (tmp_path / "p.png").exists()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs the bench extra")
def test_plot_writes_an_image(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    assert main(["eval", str(corpus), "--repeats", "1", "--plot", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ("[[configuration]]\nfeatures = {}\n", "configuration 1 has no name"),
        ('[[configuration]]\nname = "a"\n[[configuration]]\nname = "a"\n', "used twice"),
        ('[[configuration]]\nname = "a"\nmodel_auto_compact = 3\n', "model_auto_compact"),
        ('name = "a"\n', "[[configuration]]"),
    ],
)
def test_a_bad_matrix_is_refused_before_anything_runs(
    corpus: Path, tmp_path: Path, matrix: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    assert main(["eval", str(corpus), "--matrix", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_folder_without_cases_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(tmp_path)]) == 2
    assert "no case in it" in capsys.readouterr().err


def test_a_malformed_probe_file_names_the_file(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (corpus / "once" / "probes.json").write_text('{"facts": [1]}')
    assert main(["eval", str(corpus)]) == 2
    assert "once/probes.json" in capsys.readouterr().err


def test_the_committed_corpus_is_what_the_generator_writes(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("eval_corpus", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(CORPUS)
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name != "generate.py" and "__pycache__" not in p.parts
    )
    assert written == committed
    assert len(list((tmp_path / "cases").iterdir())) >= 20
    for path in written:
        assert (CORPUS / path).read_bytes() == (tmp_path / path).read_bytes(), path


def test_live_without_a_model_server_is_refused(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(corpus), "--live"]) == 2
    assert "no model server is configured" in capsys.readouterr().err
