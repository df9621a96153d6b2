"""``relay eval --otel`` (docs/observability.md): a span for the evaluation, one per run of a
case within it (its case, configuration, repeat, outcome and figures), and each run's session
traced under its run; read through the SDK's in-memory exporter on a tracer provider of the
test's own, and from the command's standard error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._eval._corpus import Configuration, load_corpus
from relay._eval._run import run_matrix
from relay._eval._score import RunRecord
from relay._eval._trace import EvalTracer, run_attributes
from relay._otel import _names as n
from tests.eval.test_eval import CODEX_FORM, _write_case
from tests.otel.test_otel import Traced, attributes

CONFIGURATIONS = [
    Configuration("local", CODEX_FORM),
    Configuration(
        "masking", {**CODEX_FORM, "features": {"work_state": False, "tool_output_masking": True}}
    ),
]


def test_a_runs_span_says_its_outcome_and_its_figures() -> None:
    record = RunRecord(
        "again", "local", 1, compactions=2, facts_checked=4, facts_kept=3, questions=2,
        answered=1, input_tokens=900, rereads=1,
    )  # fmt: skip
    assert run_attributes(record) == {
        n.RELAY_EVAL_OUTCOME: "completed",
        n.RELAY_EVAL_RETENTION: 0.75,
        n.RELAY_EVAL_FACTS_CHECKED: 4,
        n.RELAY_EVAL_FACTS_KEPT: 3,
        n.RELAY_EVAL_QUESTIONS: 2,
        n.RELAY_EVAL_ANSWERED: 1,
        n.RELAY_EVAL_COMPACTIONS: 2,
        n.RELAY_EVAL_INPUT_TOKENS: 900,
        n.RELAY_EVAL_REREADS: 1,
    }
    failed = run_attributes(RunRecord("broken", "local", 0, failure="ModelError: bad request"))
    assert failed[n.RELAY_EVAL_OUTCOME] == "failed"
    # Nothing was looked for: no retention to say.
    assert n.RELAY_EVAL_RETENTION not in failed


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write_case(root / "again", reread=True)
    _write_case(root / "broken", reread=False, fail=True)
    return root


async def test_an_evaluation_is_a_span_with_a_span_per_run_and_its_session_within(
    corpus: Path,
) -> None:
    traced = Traced()
    tracing = EvalTracer(traced.provider, content=True)
    records = await run_matrix(load_corpus(corpus), CONFIGURATIONS, {}, repeats=2, tracing=tracing)
    evaluation = traced.one(n.EVAL_SPAN)
    assert evaluation.parent is None
    assert attributes(evaluation) == {
        n.RELAY_EVAL_CASES: 2,
        n.RELAY_EVAL_CONFIGURATIONS: ("local", "masking"),
        n.RELAY_EVAL_REPEATS: 2,
        n.RELAY_EVAL_RUNS: 8,
        n.RELAY_EVAL_FAILED_RUNS: 4,
        n.RELAY_VERSION: attributes(evaluation)[n.RELAY_VERSION],
        n.ERROR_TYPE: "run_failed",
    }
    assert evaluation.status.description == "4 of 8 run(s) failed"
    runs = traced.named(n.EVAL_RUN_SPAN)
    assert all(traced.parent_of(run) is evaluation for run in runs)
    by_run = {
        (a[n.RELAY_EVAL_CASE], a[n.RELAY_EVAL_CONFIGURATION], a[n.RELAY_EVAL_REPEAT]): (run, a)
        for run in runs
        if (a := attributes(run))
    }
    assert sorted(by_run) == sorted((r.case, r.config, r.repeat) for r in records)
    for record in records:
        run, said = by_run[record.case, record.config, record.repeat]
        assert said == {
            n.RELAY_EVAL_CASE: record.case,
            n.RELAY_EVAL_CONFIGURATION: record.config,
            n.RELAY_EVAL_REPEAT: record.repeat,
            **run_attributes(record),
            **({n.ERROR_TYPE: "run_failed"} if record.failure else {}),
        }
        if record.failure is None:
            assert said[n.RELAY_EVAL_RETENTION] == 0.5
        else:
            assert "bad request" in str(run.status.description)
        # The run's session is traced within it, in the evaluation's trace.
        [session] = [s for s in traced.named(n.SESSION_SPAN) if traced.parent_of(s) is run]
        assert session.context.trace_id == evaluation.context.trace_id
    assert len(traced.named(n.SESSION_SPAN)) == 8


def relay_eval(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-m", "relay", "eval", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environ, **(env or {})},
        timeout=120,
        check=False,
    )


@pytest.mark.slow  # a process
def test_relay_eval_otel_writes_one_json_line_per_span_to_stderr(corpus: Path) -> None:
    result = relay_eval(str(corpus), "--repeats", "1", "--otel", cwd=corpus.parent)
    assert result.returncode == 1  # the broken case fails
    assert result.stdout.startswith("2 case(s) × 1 configuration(s) × 1 repeat(s)\n")
    lines = [line for line in result.stderr.splitlines() if line.startswith("{")]
    spans = [json.loads(line) for line in lines]
    named = sorted(span["name"] for span in spans if span["name"].startswith("relay.eval"))
    assert named == ["relay.eval", "relay.eval.case", "relay.eval.case"]
    runs = {
        span["attributes"][n.RELAY_EVAL_CASE]: span["attributes"]
        for span in spans
        if span["name"] == n.EVAL_RUN_SPAN
    }
    assert runs["again"][n.RELAY_EVAL_OUTCOME] == "completed"
    assert runs["again"][n.RELAY_EVAL_CONFIGURATION] == "default"
    assert runs["broken"][n.RELAY_EVAL_OUTCOME] == "failed"
    assert sum(span["name"] == n.SESSION_SPAN for span in spans) == 2
    # Content is not recorded: a failure's message may quote it, and is left out.
    (broken,) = [s for s in spans if s["attributes"].get(n.RELAY_EVAL_CASE) == "broken"]
    assert broken["status"]["description"] == (
        "run_failed: the message is left out (content recording is off)"
    )
    # Besides the spans, stderr says which run failed, as without --otel.
    others = [line for line in result.stderr.splitlines() if not line.startswith("{")]
    assert len(others) == 1 and others[0].startswith("failed: default broken #0: ")


@pytest.mark.slow  # a process
def test_relay_eval_otel_without_the_sdk_is_a_usage_error(corpus: Path, tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys; sys.modules['opentelemetry.sdk'] = None\n")
    result = relay_eval(str(corpus), "--otel", cwd=tmp_path, env={"PYTHONPATH": str(hide)})
    assert result.returncode == 2
    assert result.stderr.startswith("relay eval: --otel needs the OpenTelemetry SDK")
    assert result.stdout == ""
