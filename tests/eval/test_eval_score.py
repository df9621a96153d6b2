"""The figures of ``relay eval`` on hand-built data where the right figure is known."""

from __future__ import annotations

import json

from relay._eval._score import (
    RunRecord,
    answer_matches,
    count_rereads,
    missing_facts,
    oracle_answer,
    render_table,
    spread,
    summarize,
    summarize_latency,
)


def _request(*texts: str) -> dict[str, object]:
    return {
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}
            for t in texts
        ],
    }


def test_a_fact_missing_from_the_request_is_named_and_present_ones_are_not() -> None:
    request = _request("MAX_RETRIES = 5 in src/retry.py", 'the user said "never touch vendor/"')
    facts = ["MAX_RETRIES = 5", "src/retry.py", 'said "never touch vendor/"', "exit 2"]
    assert missing_facts(request, facts) == ["exit 2"]


def test_a_chat_request_is_searched_in_its_messages() -> None:
    request = {"messages": [{"role": "tool", "content": "check: 3 issues"}]}
    assert missing_facts(request, ["check: 3 issues", "exit 1"]) == ["exit 1"]


def test_a_call_repeated_after_a_compaction_is_a_reread() -> None:
    read = ("read_file", '{"path": "a.py"}')
    assert count_rereads([read, None, ("read_file", '{ "path":"a.py" }')]) == 1


def test_a_call_repeated_without_a_compaction_between_is_not_a_reread() -> None:
    read = ("read_file", '{"path": "a.py"}')
    other = ("read_file", '{"path": "b.py"}')
    assert count_rereads([read, read, None, other]) == 0
    # Made after the compaction first, then again: the second is no re-read either.
    assert count_rereads([None, read, read]) == 0


def test_each_repeat_of_an_earlier_call_counts_and_compactions_accumulate() -> None:
    a = ("shell", '{"argv": ["make"]}')
    b = ("read_file", '{"path": "b.py"}')
    assert count_rereads([a, None, b, a, None, a, b]) == 3


def test_answers_match_their_pattern_in_any_case() -> None:
    assert answer_matches("It is max_retries = 5.", r"MAX_RETRIES\s*=\s*5")
    assert not answer_matches("It is 6.", r"MAX_RETRIES\s*=\s*5")
    assert not answer_matches(None, "anything")


def test_the_oracle_answers_only_from_its_context() -> None:
    context = "log line\nTOP_K = 10\nmore"
    assert oracle_answer(context, r"TOP_K\s*=\s*10") == "TOP_K = 10"
    assert not answer_matches(oracle_answer("log line", r"TOP_K\s*=\s*10"), r"TOP_K\s*=\s*10")


def test_spread_over_repeats() -> None:
    assert spread([0.5, 1.0, 0.75]) == {"mean": 0.75, "min": 0.5, "max": 1.0, "spread": 0.5}
    assert spread([None, None]) == {"mean": None, "min": None, "max": None, "spread": None}


def _run(config: str, case: str, repeat: int, **figures: object) -> RunRecord:
    return RunRecord(case=case, config=config, repeat=repeat, **figures)  # type: ignore[arg-type]


def test_a_repeat_that_differs_shows_as_spread_and_names_the_lost_fact() -> None:
    records = [
        _run("a", "c1", 0, compactions=1, facts_checked=4, facts_kept=4, input_tokens=100),
        _run(
            "a",
            "c1",
            1,
            compactions=1,
            facts_checked=4,
            facts_kept=2,
            input_tokens=140,
            missing=("x", "y"),
        ),
        _run("a", "c2", 0, compactions=0, questions=2, answered=2, input_tokens=10),
        _run(
            "a",
            "c2",
            1,
            compactions=0,
            questions=2,
            answered=1,
            input_tokens=10,
            failure="model_error: boom",
            rereads=2,
        ),
    ]
    summary = summarize(records, ["a"])["a"]
    assert summary["repeats"] == 2
    assert summary["retention"] == {"mean": 0.75, "min": 0.5, "max": 1.0, "spread": 0.5}
    assert summary["accuracy"] == {"mean": 0.75, "min": 0.5, "max": 1.0, "spread": 0.5}
    assert summary["input_tokens"] == {"mean": 130.0, "min": 110.0, "max": 150.0, "spread": 40.0}
    assert summary["rereads"]["max"] == 2.0
    assert summary["failures"] == {"mean": 0.5, "min": 0.0, "max": 1.0, "spread": 1.0}
    assert summary["cases"]["c1"]["lost"] == ["x", "y"]
    assert summary["cases"]["c2"]["retention"]["mean"] is None
    assert summary["cases"]["c2"]["failures"] == ["model_error: boom"]


def test_a_corpus_without_compactions_has_no_retention_figure() -> None:
    summary = summarize([_run("a", "c", 0, questions=1, answered=1)], ["a"])
    assert summary["a"]["retention"]["mean"] is None
    assert "–" in render_table(summary)


def test_latency_is_kept_apart_from_the_summary() -> None:
    records = [
        _run("a", "c", 0, compactions=2, latencies_ms=(10, 30)),
        _run("a", "c", 1, compactions=2, latencies_ms=(40, 40)),
    ]
    assert "latenc" not in json.dumps(summarize(records, ["a"]))
    assert summarize_latency(records, ["a"])["a"]["compaction_latency_ms"] == {
        "mean": 30.0,
        "min": 20.0,
        "max": 40.0,
        "spread": 20.0,
    }
    # Records that differ only in wall-clock time are the same record.
    assert records[0] == _run("a", "c", 0, compactions=2, latencies_ms=(99,))


def test_the_table_has_one_row_per_configuration_in_order() -> None:
    records = [
        _run("b", "c", 0, compactions=1, facts_checked=2, facts_kept=1, input_tokens=1000),
        _run("a", "c", 0, compactions=1, facts_checked=2, facts_kept=2, input_tokens=2000),
    ]
    lines = render_table(summarize(records, ["b", "a"])).splitlines()
    assert [line.split()[0] for line in lines[2:]] == ["b", "a"]
    assert "50.0%" in lines[2] and "1,000" in lines[2]
    assert "100.0%" in lines[3]


def test_a_fact_with_alternatives_is_kept_by_any_of_them_and_named_by_the_first() -> None:
    fact = ["[exit code 1]", "check.py → exit 1"]
    assert missing_facts(_request("python3 check.py → exit 1"), [fact]) == []
    assert missing_facts(_request("exit 2"), [fact]) == ["[exit code 1]"]
