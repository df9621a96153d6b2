"""``relay eval --live`` and its corpus (docs/eval.md, "The live corpus")."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relay._base import _protocol as p
from relay._base._errors import ScriptError
from relay._base._tokens import approx_tokens
from relay._drive._op_script import OpLine, WaitFor
from relay._eval._corpus import INJECTION, baselines, load_case, load_corpus
from relay._eval._run import followed, fresh_window_compactor, without_compactions
from relay._eval._score import RunRecord, add_baselines, render_live_table, summarize
from relay._models._prompt_cache import (
    MIN_CACHED_TOKENS,
    PromptCache,
    reported,
    request_pieces,
    tool_tokens,
    with_cached,
)

CORPUS = Path(__file__).parents[2] / "examples" / "eval-live"
KINDS = {"constant", "failing_test", "path", "decision", "constraint"}


def test_the_committed_live_corpus_is_what_its_generator_writes(tmp_path: Path) -> None:
    _generator().write(tmp_path)
    written = sorted(q.relative_to(tmp_path) for q in tmp_path.rglob("*") if q.is_file())
    committed = sorted(
        q.relative_to(CORPUS)
        for q in CORPUS.rglob("*")
        if q.is_file() and q.name != "generate.py" and "__pycache__" not in q.parts
    )
    assert written == committed
    for path in written:
        assert (CORPUS / path).read_bytes() == (tmp_path / path).read_bytes(), path


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("live_corpus", CORPUS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_held_out_corpus_has_the_same_kinds_and_none_of_the_shipped_words(
    tmp_path: Path,
) -> None:
    generator = _generator()
    generator.main(["--held-out", str(tmp_path)])
    shipped, held_out = load_corpus(CORPUS), load_corpus(tmp_path)
    assert len(held_out) == len(shipped)
    assert [bool(c.injection) for c in held_out] == [bool(c.injection) for c in shipped]
    for theirs, ours in zip(held_out, shipped, strict=True):
        assert set(theirs.kinds) == set(ours.kinds) and len(theirs.questions) == 3
        # A case that compacts twice runs the tests again between the two compactions.
        assert set(theirs.lead) - {"rerun"} == set(ours.lead)
    # No fact, question or planted text of the shipped corpus is in the held-out one.
    shipped_words = {f["text"] for c in CORPUS.glob("cases/*/probes.json") for f in
                     json.loads(c.read_text())["facts"] if "text" in f}  # fmt: skip
    held_out_text = "".join(q.read_text() for q in tmp_path.glob("cases/*/**/*") if q.is_file())
    assert not [word for word in shipped_words if word in held_out_text]
    assert generator.SHIPPED.planted not in held_out_text


#: A line each runner's output has, failing or passing, that no other runner's has.
RUNNER_MARKS = {
    "unittest": "Ran 8 tests in",
    "go": "=== RUN   Test",
    "jest": "Test Suites: ",
    "vitest": " Test Files  ",
    "cargo": "   Doc-tests ",
    "mocha": " passing (",
    "rspec": "Randomized with seed",
    "maven": "[INFO]  T E S T S",
}


def _sh(fixture: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "tools/check.sh"], cwd=fixture, capture_output=True, text=True, check=False
    )


def test_the_held_out_test_scripts_print_other_runners_outputs_failing_then_passing(
    tmp_path: Path,
) -> None:
    _generator().main(["--held-out", str(tmp_path)])
    shapes: list[str] = []
    for folder in sorted((tmp_path / "cases").iterdir()):
        probes = json.loads((folder / "probes.json").read_text())
        (name,) = [f["text"] for f in probes["facts"] if f["kind"] == "failing_test"]
        failing = _sh(folder / "fixture")
        assert failing.returncode == 1, folder.name
        lines = [line for line in failing.stdout.splitlines() if line.strip()]
        # The runner's tail (counts, timings, footers) comes after the failing test's name.
        assert name in failing.stdout and not [line for line in lines[-3:] if name in line]
        (shape,) = [r for r, mark in RUNNER_MARKS.items() if mark in failing.stdout]
        shapes.append(shape)
        # Every question about the failing test matches the name as the runner prints it.
        for question in probes["questions"]:
            if "failed" in question["ask"]:
                assert re.search(question["expect"], name, re.IGNORECASE), folder.name
        # The case's edit is the fix: the script then prints the same runner's passing output.
        (edit,) = json.loads((folder / "lead.json").read_text())["edit"]
        subprocess.run(edit["function_call"]["arguments"]["argv"], cwd=folder / "fixture",
                       check=True)  # fmt: skip
        passing = _sh(folder / "fixture")
        assert passing.returncode == 0 and RUNNER_MARKS[shape] in passing.stdout, folder.name
        assert "FAIL" not in passing.stdout.replace("Failures: 0", "")
        if "injection-command" in folder.name:
            assert "187 tests" in failing.stdout and "187 tests" not in passing.stdout
    assert sorted(set(shapes)) == sorted(RUNNER_MARKS) and len(set(map(shapes.count, shapes))) == 1


def test_four_held_out_cases_compact_again_after_rerunning_the_tests(tmp_path: Path) -> None:
    _generator().main(["--held-out", str(tmp_path)])
    twice = []
    for case in load_corpus(tmp_path):
        ops = [s for s in case.steps if isinstance(s, OpLine)]
        turns, compacts = [s.id for s in ops], [s.id for s in ops if isinstance(s.op, p.Compact)]
        assert turns[-1] == compacts[-1] and set(case.lead) == set(turns[1:]) - set(compacts)
        if len(compacts) == 2:
            twice.append(case)
            assert turns[-3:] == ["compact", "rerun", "compact-again"] and not case.injection
            # The rerun is not the first run's call again, which would count as a re-read.
            calls = [case.lead[t][0]["function_call"]["arguments"] for t in ("check", "rerun")]
            assert calls[0] != calls[1]
    assert len(twice) == 4


def test_every_case_carries_project_instructions_that_name_none_of_its_facts() -> None:
    for folder in sorted((CORPUS / "cases").iterdir()):
        instructions = (folder / "fixture" / "AGENTS.md").read_text()
        facts = json.loads((folder / "probes.json").read_text())["facts"]
        assert len(instructions) > 1000
        assert not [f["text"] for f in facts if "text" in f and f["text"] in instructions]


def test_the_live_corpus_plants_every_kind_and_eight_injections() -> None:
    cases = load_corpus(CORPUS)
    plain = [c for c in cases if not c.injection]
    planted = [c for c in cases if c.injection]
    assert len(plain) >= 16 and len(planted) >= 8
    assert {c.name.rsplit("-", 1)[1] for c in planted} == {"file", "command", "mcp"}
    for case in cases:
        assert set(case.kinds) >= KINDS and len(case.questions) == 3
        assert (INJECTION in case.kinds) == bool(case.injection)
        turns = [s.id for s in case.steps if isinstance(s, OpLine)]
        # Each turn that works opens with its tool call; then the compaction, then questions.
        assert turns[-1] == "compact" and set(case.lead) == set(turns[1:-1])


def test_a_lead_is_refused_for_a_turn_the_op_script_does_not_have(tmp_path: Path) -> None:
    case = tmp_path / "c"
    shutil.copytree(CORPUS / "cases" / "01-billing", case)
    (case / "lead.json").write_text('{"nowhere": ["hello"]}')
    with pytest.raises(ScriptError, match="'nowhere' is not the id of an op"):
        load_case(case)


def test_the_ceiling_skips_the_compact_ops_and_their_waits() -> None:
    case = load_case(CORPUS / "cases" / "01-billing")
    steps = without_compactions(case.steps)
    assert not any(isinstance(s, OpLine) and isinstance(s.op, p.Compact) for s in steps)
    assert not any(isinstance(s, WaitFor) and s.match.get("turn_id") == "compact" for s in steps)
    assert len(steps) == len(case.steps) - 2


def test_an_injection_counts_when_a_summary_or_an_answer_says_what_it_asked() -> None:
    forms = [["212 tests passed", "all 212 tests"]]
    assert followed(forms, ["The tests: ALL 212 TESTS passed."])
    assert not followed(forms, ["test_refund_rounding failed; 8 passed."])
    assert not followed([], ["212 tests passed"])


def record(config: str, answered: int, **more: Any) -> RunRecord:
    return RunRecord(case="c", config=config, repeat=0, questions=4, answered=answered, **more)


def test_each_configuration_is_placed_between_the_floor_and_the_ceiling() -> None:
    records = [record("ceiling", 4), record("floor", 1), record("local", 3)]
    summary = summarize(records, ["ceiling", "floor", "local"])
    add_baselines(summary)
    assert (summary["local"]["of_ceiling"], summary["local"]["gap_closed"]) == (0.75, 0.6667)
    assert (summary["floor"]["of_ceiling"], summary["floor"]["gap_closed"]) == (0.25, 0.0)
    table = render_live_table(summary)
    assert table.splitlines()[0].split()[:2] == ["task", "success"]
    assert "75.0%" in table.splitlines()[-1]


def test_injection_and_the_first_request_after_a_compaction_are_figures() -> None:
    records = [
        record(
            "local",
            2,
            injection_cases=1,
            injected=1,
            first_requests=2,
            prefilled_after=300,
            cached_after=900,
        ),
        record(
            "local",
            2,
            injection_cases=1,
            injected=0,
            first_requests=1,
            prefilled_after=0,
            cached_after=0,
        ),
    ]
    figures = summarize(records, ["local"])["local"]
    assert figures["injection"]["mean"] == 0.5
    assert figures["prefill_after_compaction"]["mean"] == 100
    assert figures["cached_after_compaction"]["mean"] == 300


def body(*texts: str, key: str = "s1") -> dict[str, Any]:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
        for t in texts
    ]
    return {"instructions": "be brief", "tools": [], "input": items, "prompt_cache_key": key}


def test_a_prompt_cache_holds_the_prefix_a_request_shares_with_an_earlier_one() -> None:
    cache = PromptCache()
    long = "x" * 4 * 2000
    assert cache.cached(body(long, "first")) == 0
    shared = sum(len(piece) for n, piece in enumerate(request_pieces(body(long))) if n != 1) // 4
    assert cache.cached(body(long, "second")) == reported(shared) > MIN_CACHED_TOKENS
    assert cache.cached(body(long, key="other")) == 0
    assert cache.cached(body("y" + long)) == 0  # the first item differs


def test_cached_tokens_go_into_the_completion_unless_the_script_gave_some() -> None:
    usage = {"input_tokens": 2000, "output_tokens": 5, "total_tokens": 2005}
    done = {"type": "response.completed", "response": {"id": "r", "usage": usage}}
    (out,) = with_cached([done], 5000)
    assert out["response"]["usage"]["input_tokens_details"] == {"cached_tokens": 2000}
    given = {**usage, "input_tokens_details": {"cached_tokens": 7}}
    (kept,) = with_cached([{**done, "response": {"id": "r", "usage": given}}], 1024)
    assert kept["response"]["usage"]["input_tokens_details"] == {"cached_tokens": 7}


def test_a_prompt_cache_counts_the_tool_list_as_openai_does() -> None:
    # A head of 700 estimated tokens and a tool list of some 500: OpenAI caches the two
    # together, past its 1,024-token minimum, and counts the tools among the input tokens.
    shell = {"type": "function", "name": "shell", "description": "d" * 2000, "parameters": {}}
    first = {**body("x" * 4 * 700, "first"), "tools": [shell]}
    second = {**body("x" * 4 * 700, "second"), "tools": [shell]}
    tools = tool_tokens(second)
    assert tools >= 500 and tool_tokens(body("x")) == 0
    cache = PromptCache()
    assert cache.cached(first) == 0
    held = cache.cached(second)
    instructions, _, brief, _ = (approx_tokens(piece) for piece in request_pieces(second))
    assert instructions + brief < MIN_CACHED_TOKENS
    assert held == reported(instructions + tools + brief) >= MIN_CACHED_TOKENS
    usage = {"input_tokens": 760, "output_tokens": 5, "total_tokens": 765}
    done = {"type": "response.completed", "response": {"id": "r", "usage": usage}}
    (out,) = with_cached([done], held, tools)
    counted = out["response"]["usage"]
    assert counted["input_tokens"] == 760 + tools and counted["total_tokens"] == 765 + tools
    assert counted["input_tokens_details"] == {"cached_tokens": held}


@pytest.mark.slow  # two processes: a mock server and relay eval, which runs 8 sessions
def test_relay_eval_live_runs_the_baselines_beside_the_matrix(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for name in ("01-billing", "18-injection-command"):
        shutil.copytree(CORPUS / "cases" / name, corpus / name)
    (corpus / "matrix.toml").write_text(
        '[[configuration]]\nname = "local"\ntools = { shell = true }\n\n'
        '[[configuration]]\nname = "cache_aware"\ntools = { shell = true }\n'
        'compaction = { placement = "cache_aware" }\n'
    )
    script = tmp_path / "echo.json"
    script.write_text("{}")
    server = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script), "--prompt-cache"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        (tmp_path / "config.toml").write_text(
            f'model = "m"\nmodel_provider = "mock"\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{base_url}"\nwire_api = "responses"\n'
        )
        result = subprocess.run(
            [sys.executable, "-m", "relay", "eval", str(corpus), "--live", "--repeats", "1",
             "--parallel", "1", "--config", str(tmp_path / "config.toml"), "--trust-corpus",
             "--json", str(tmp_path / "report.json")],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())["configurations"]
    assert list(report) == ["ceiling", "floor", "local", "cache_aware"]
    assert report["ceiling"]["compactions"]["mean"] == 0
    assert report["floor"]["retention"]["mean"] == 0
    assert report["local"]["compactions"]["mean"] == 2
    # The mock server echoes: no answer is right, so no share of the ceiling's 0 is given.
    assert report["ceiling"]["accuracy"]["mean"] == 0 and report["local"]["of_ceiling"] is None
    assert report["local"]["injection"]["mean"] is not None
    progress = [line for line in result.stderr.splitlines() if line.startswith("relay eval [")]
    assert len(progress) == 8 and progress[-1].startswith("relay eval [8/8] cache_aware")
    assert "task success" in result.stdout


def test_the_floor_opens_a_fresh_window_without_changing_the_turns() -> None:
    ceiling, floor = baselines()
    assert not ceiling.compacts and floor.fresh_window
    # The token-budget feature would offer the model two more tools: the floor's turns before
    # the compaction must be the same requests as every other configuration's.
    assert "token_budget" not in floor.overrides["features"]
    compactor = fresh_window_compactor()
    assert list(compactor.backends) == ["token_budget"]
    assert compactor.select(None, None) == "token_budget"
