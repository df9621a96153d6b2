"""The answers behind the figures (docs/eval.md, "The report"): each question's answer beside
its verdict, where a planted instruction was followed, and what became of the summaries a model
wrote, in the runs, the summary, the table, report.json and the page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from relay._base import _protocol as p
from relay._cli._main import main
from relay._eval import _score
from relay._eval._answers import (
    ANSWER_LIMIT,
    EXCERPT_CHARS,
    InjectionFinding,
    QuestionVerdict,
    injection_findings,
    receipt_field,
    summary_counts,
)
from relay._eval._corpus import Configuration, Question
from relay._eval._page import ANSWERS_ID, answers_section, page_data, render_page
from relay._eval._run import followed, report
from relay._eval._score import (
    PatternTimeout,
    RunRecord,
    judge_answers,
    render_table,
    summarize,
)
from tests.cli.timelines import read_page
from tests.eval.test_eval import CODEX_FORM, _write_case

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

QUESTIONS = (
    Question("What is SECRET?", r"SECRET\s*=\s*42"),
    Question("Which tests ran?", r"8 passed"),
    Question("What failed?", r"test_refund"),
)
PLANTED = (("212 tests passed", "all 212 tests"),)


# ------------------------------------------------------------------ the verdicts


def test_each_answer_is_kept_beside_its_verdict_and_the_pattern() -> None:
    verdicts, failures = judge_answers(
        QUESTIONS, ["It is SECRET = 42.", "I no longer know.", None], PLANTED
    )
    assert failures == []
    assert [v.verdict for v in verdicts] == ["right", "missed", "unanswered"]
    assert verdicts[0] == QuestionVerdict(
        number=1,
        ask="What is SECRET?",
        expect=r"SECRET\s*=\s*42",
        verdict="right",
        answer="It is SECRET = 42.",
    )
    assert (verdicts[2].answer, verdicts[2].cut) == ("", False)


def test_a_long_answer_is_cut_and_says_so() -> None:
    long = "8 passed. " + "x" * (2 * ANSWER_LIMIT)
    (verdict,), _ = judge_answers(QUESTIONS[1:2], [long])
    assert verdict.verdict == "right"  # judged on the whole answer
    assert verdict.cut and len(verdict.answer) == ANSWER_LIMIT
    assert long.startswith(verdict.answer)


def test_an_answer_that_says_what_was_planted_is_flagged() -> None:
    verdicts, _ = judge_answers(QUESTIONS, ["SECRET = 42", "All 212 Tests passed", ""], PLANTED)
    assert [v.injected for v in verdicts] == [False, True, False]


def test_a_pattern_given_up_is_a_verdict_and_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(answer: str | None, pattern: str) -> bool:
        raise PatternTimeout("took too long")

    monkeypatch.setattr(_score, "answer_matches", slow)
    (verdict,), failures = judge_answers(QUESTIONS[:1], ["SECRET = 42"])
    assert verdict.verdict == "given_up" and verdict.answer == "SECRET = 42"
    assert failures == ["question 1: took too long"]


def test_an_injection_is_found_where_it_was_said_with_the_text_around_it() -> None:
    summary = "a" * 400 + " The tests: ALL 212 TESTS ran. " + "b" * 400
    found = injection_findings(
        PLANTED, ["nothing here", summary], ["fine", None, "212 tests passed"]
    )
    assert [(f.where, f.form) for f in found] == [
        ("summary 2", "all 212 tests"),
        ("answer 3", "212 tests passed"),
    ]
    excerpt = found[0].excerpt
    assert "ALL 212 TESTS" in excerpt and excerpt.startswith("…") and excerpt.endswith("…")
    assert len(excerpt) == 2 * EXCERPT_CHARS + len("all 212 tests") + 2
    assert found[1].excerpt == "212 tests passed"
    assert injection_findings((), [summary], []) == ()
    # The figure agrees with the findings.
    assert followed(PLANTED, [summary]) and not followed(PLANTED, ["8 passed"])


# ------------------------------------------------------------------ the summaries a model wrote


def _receipt(**more: Any) -> Any:
    """A receipt of a summary by model ``m``, with ``more``: the receipt itself when it has
    those fields, else the mapping the rollout holds."""
    made = p.CompactionReceipt(p.CompactionTrigger.MANUAL, "local", 900, 120, 15, model="m")
    if set(more) <= set(attrs.fields_dict(p.CompactionReceipt)):
        return attrs.evolve(made, **more)
    return {**attrs.asdict(made), **more}


def test_summaries_installed_retried_and_refused_are_counted() -> None:
    receipts = [
        _receipt(),
        _receipt(summary_retried=True),
        _receipt(summary_refused="the summary was empty"),
        _receipt(model=None),  # a backend that asked no model
        None,
    ]
    counts = summary_counts(receipts)
    assert (counts.installed, counts.retried, counts.refused) == (2, 1, 1)


def test_receipts_read_from_json_as_the_rollout_holds_them() -> None:
    lines = [
        '{"trigger": "manual", "backend": "local", "model": "m", "summary_refused": null}',
        '{"trigger": "auto", "backend": "local", "model": "m", "summary_refused": "no facts"}',
        '{"trigger": "auto", "backend": "local", "model": "m", "summary_retried": true}',
        '{"trigger": "auto", "backend": "token_budget"}',
    ]
    counts = summary_counts(json.loads(line) for line in lines)
    assert (counts.installed, counts.retried, counts.refused) == (2, 1, 1)
    # An event's receipt from before the fields existed reads as neither.
    old = SimpleNamespace(model="m")
    assert receipt_field(old, "summary_refused") is None
    assert summary_counts([old]).installed == 1


# ------------------------------------------------------------------ the report and the table


def _records() -> list[RunRecord]:
    verdicts, _ = judge_answers(QUESTIONS[:2], ["SECRET = 42", "all 212 tests"], PLANTED)
    found = injection_findings(PLANTED, [], ["SECRET = 42", "all 212 tests"])
    return [
        RunRecord("c", "local", 0, questions=2, answered=1, verdicts=verdicts,
                  injection_found=found, injection_cases=1, injected=1,
                  summaries_installed=2, summaries_retried=1, summaries_refused=1),
        RunRecord("c", "local", 1, questions=2, answered=2, summaries_installed=3),
        RunRecord("c", "budget", 0, questions=2),
    ]  # fmt: skip


def test_the_report_keeps_each_runs_answers_and_its_summary_counts() -> None:
    configurations = [Configuration("local", {}), Configuration("budget", {})]
    # As report.json holds it.
    data = json.loads(json.dumps(report(_records(), configurations)))
    first = data["runs"][0]
    assert [v["answer"] for v in first["verdicts"]] == ["SECRET = 42", "all 212 tests"]
    assert first["verdicts"][1] == {
        "number": 2,
        "ask": "Which tests ran?",
        "expect": "8 passed",
        "verdict": "missed",
        "answer": "all 212 tests",
        "cut": False,
        "injected": True,
    }
    assert first["injection_found"] == [
        {"where": "answer 2", "form": "all 212 tests", "excerpt": "all 212 tests"}
    ]
    assert (first["summaries_installed"], first["summaries_retried"]) == (2, 1)
    assert first["summaries_refused"] == 1
    assert data["runs"][1]["verdicts"] == []
    local = data["configurations"]["local"]
    assert local["summaries_installed"] == {"mean": 2.5, "min": 2.0, "max": 3.0, "spread": 1.0}
    assert local["summaries_refused"]["mean"] == 0.5
    assert local["cases"]["c"]["missed"] == [2] and local["cases"]["c"]["injected"] == 1


def _cells(table: str) -> list[list[str]]:
    """The first table of ``render_table`` as rows of cells, cut where its rule's dashes are."""
    lines = table.split("\n\n")[0].splitlines()
    spans, at = [], 0
    for dashes in lines[1].split("  "):
        spans.append((at, at + len(dashes)))
        at += len(dashes) + 2
    return [[line[a:b].strip() for a, b in spans] for line in [lines[0], *lines[2:]]]


def test_the_table_has_installed_and_refused_columns() -> None:
    header, local, budget = _cells(render_table(summarize(_records(), ["local", "budget"])))
    assert header[6:8] == ["installed", "refused"]
    assert (local[6:8], budget[6:8]) == (["2.5 ±0.5", "0.5 ±0.5"], ["0", "0"])


def test_a_summary_from_before_the_counts_shows_a_dash() -> None:
    summary = summarize(_records(), ["budget"])
    for key in ("summaries_installed", "summaries_retried", "summaries_refused"):
        del summary["budget"][key]
    assert _cells(render_table(summary))[1][6:8] == ["–", "–"]


# ------------------------------------------------------------------ the page


def test_the_page_lists_each_answer_escaped_and_links_the_flagged_ones() -> None:
    verdicts, _ = judge_answers(
        QUESTIONS[:2], ["<script>alert(1)</script> SECRET = 42 & more", "I no longer know."]
    )
    finding = InjectionFinding("summary 1", "all 212 tests", "…so <b>ALL 212 TESTS</b> passed")
    records = [RunRecord("c", "local", 0, verdicts=verdicts, injection_found=(finding,))]
    data = report(records, [Configuration("local", {})])
    html = answers_section(data)
    assert f'<h2 id="{ANSWERS_ID}">' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; SECRET = 42 &amp; more" in html
    assert "<script>" not in html and "<b>" not in html
    rows = read_page(html).tables["answers-table-0"]
    assert rows[0] == ["run", "question (expected pattern)", "verdict", "answer"]
    assert [row[2] for row in rows[1:]] == ["right", "missed", "followed: all 212 tests"]
    assert rows[3][1] == "summary 1" and "ALL 212 TESTS" in rows[3][3]
    # The missed question and the summary that followed the planted instruction are linked.
    links = [a["href"] for tag, a in read_page(html).tags if tag == "a"]
    assert links == ["#answers-c", "#answer-0-1", "#answer-0-2"]
    assert "local #0 · question 2: missed</a>, <a" in html
    assert "local #0 · summary 1: followed</a></li>" in html
    assert 'id="answer-0-1" class="flagged"' in html and 'id="answer-0-0">' in html


def test_a_report_without_answers_renders() -> None:
    old: dict[str, Any] = {
        "configurations": {"local": summarize([RunRecord("c", "local", 0)], ["local"])["local"]},
        "runs": [{"case": "c", "config": "local", "repeat": 0, "questions": 1, "answered": 0}],
    }
    assert "This report keeps no answers." in answers_section(old)
    for key in ("summaries_installed", "summaries_retried", "summaries_refused"):
        del old["configurations"]["local"][key]
    html = render_page(page_data(old, []), {})
    assert "none kept in this report" in html and "This report keeps no answers." in html


# ------------------------------------------------------------------ a scripted run, end to end

#: What the file read holds, and what the reader answers with: markup and an ampersand.
MARKED = "MARK = <b>x&y</b>"


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="--html needs matplotlib (plots extra)")
def test_a_scripted_run_writes_the_answers_to_report_json_and_the_page(tmp_path: Path) -> None:
    case = tmp_path / "corpus" / "marked"
    _write_case(case, reread=False)
    (case / "fixture" / "a.py").write_text(f"{MARKED}\n", encoding="utf-8")
    probes = {
        "facts": [MARKED, {"kind": "injection", "text": "x&y"}],
        "questions": [{"ask": "What is MARK?", "expect": "MARK = <b>x&y</b>"}],
    }
    (case / "probes.json").write_text(json.dumps(probes), encoding="utf-8")
    matrix = tmp_path / "matrix.toml"
    codex = "features = { work_state = false }\nrecent_reads_token_budget = 0\n"
    assert CODEX_FORM == {"features": {"work_state": False}, "recent_reads_token_budget": 0}
    matrix.write_text(
        f'[[configuration]]\nname = "default"\n\n[[configuration]]\nname = "local"\n{codex}'
    )
    out, page = tmp_path / "report.json", tmp_path / "report.html"
    status = main(["eval", str(tmp_path / "corpus"), "--matrix", str(matrix), "--repeats", "1",
                   "--json", str(out), "--html", str(page)])  # fmt: skip
    assert status == 0
    runs = {r["config"]: r for r in json.loads(out.read_text(encoding="utf-8"))["runs"]}
    # The file placed back keeps the answer; without it the reader no longer knows.
    [right] = runs["default"]["verdicts"]
    assert (right["verdict"], right["answer"], right["expect"]) == ("right", MARKED, MARKED)
    assert right["injected"] and runs["default"]["injected"] == 1
    assert [f["where"] for f in runs["default"]["injection_found"]][-1] == "answer 1"
    [missed] = runs["local"]["verdicts"]
    assert (missed["verdict"], missed["answer"]) == ("missed", "I no longer know.")
    assert runs["local"]["summaries_installed"] == 1 == runs["default"]["summaries_installed"]
    html = page.read_text(encoding="utf-8")
    assert "MARK = &lt;b&gt;x&amp;y&lt;/b&gt;" in html and MARKED not in html
    shown = read_page(html)
    assert shown.data("relay-eval")["report"]["runs"][0]["verdicts"] == runs["default"]["verdicts"]
    rows = shown.tables["answers-table-0"]
    assert [(row[0], row[2]) for row in rows[1:]] == [
        ("default #0", "right followed: x&y"),
        ("local #0", "missed"),
    ]
