"""``relay exec --output-schema`` checks the answer in bounded work, as a real subprocess: a
pattern matched in linear time, a pattern it cannot match refused before the session opens, and
an answer over a bound a failed turn naming it (``_base/_schema_check.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from relay._base._schema_check import MAX_DEPTH
from tests.cli.test_exec_codex import lines, relay


def _exec(tmp_path: Path, schema: Any, answer: Any) -> list[dict[str, Any]]:
    """The JSON lines of one ``relay exec`` whose model answers ``answer`` under ``schema``;
    the run fails (exit 1), its turn refused."""
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "model.json").write_text(json.dumps({"responses": [{"json": answer}]}))
    result = relay(
        "exec", "--experimental-json", "--output-schema", "schema.json", "--model-script",
        "model.json", "--rollout-dir", "r", cwd=tmp_path, stdin="Answer.",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    return lines(result.stdout)


def test_a_backtracking_pattern_ends_the_turn_with_its_answer_refused(tmp_path: Path) -> None:
    # Python's re would take 2**40 steps over this answer; the run would never end.
    schema = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}
    failed = _exec(tmp_path, schema, {"word": "a" * 40 + "!"})[-1]
    message = failed["error"]["message"]
    assert failed["type"] == "turn.failed"
    assert message.startswith("the answer does not fit the output schema at $.word: ")
    assert message.endswith("does not match '^(a+)+$'")


def test_an_answer_over_a_bound_ends_the_turn_naming_the_bound(tmp_path: Path) -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert _exec(tmp_path, {"type": "object"}, {"tree": deep})[-1] == {
        "type": "turn.failed",
        "error": {
            "message": f"the answer is nested more than {MAX_DEPTH} levels deep, relay's bound "
            "for checking an answer"
        },
    }


def test_a_pattern_relay_cannot_match_in_linear_time_is_exit_2_naming_it(tmp_path: Path) -> None:
    schema = {"properties": {"twice": {"pattern": "^(a)\\1$"}}}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    result = relay(
        "exec", "--output-schema", "schema.json", "--rollout-dir", "r", cwd=tmp_path, stdin="hi"
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "relay: --output-schema: schema.json is not a JSON Schema: the pattern '^(a)\\\\1$' is "
        "refused: \\1 is a backreference, which needs backtracking: relay matches patterns in "
        "linear time, without it (at $.properties.twice.pattern)\n"
    )
    assert not (tmp_path / "r").exists()
