"""``outputSchema`` at ``relay app-server``'s edge, checked in bounded work
(``_base/_schema_check.py``): a pattern relay cannot match in linear time is refused naming the
field, and an answer over a bound fails its turn naming the bound while the thread goes on. The
real command over pipes, every line checked against the schema (:mod:`.client`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from relay._base._schema_check import MAX_DEPTH

from .client import app_server, write_script


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def test_a_pattern_relay_cannot_match_in_linear_time_is_refused_naming_the_field(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path / "model.json", {"json": {"word": "a"}})
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        schema = {"type": "object", "properties": {"word": {"pattern": "^(?=a)a$"}}}
        asked = {"threadId": thread, "input": text("a word?"), "outputSchema": schema}
        error = server.error(server.request("turn/start", asked))
        assert error["code"] == -32602
        assert error["message"] == (
            "outputSchema: not a JSON Schema: the pattern '^(?=a)a$' is refused: (?=...) is a "
            "lookaround, which needs backtracking: relay matches patterns in linear time, "
            "without it (at $.properties.word.pattern)"
        )
        # The same schema with a pattern RE2 takes: the turn runs and its answer fits.
        schema["properties"]["word"]["pattern"] = "^(a+)+$"
        server.call("turn/start", asked)
        done = server.next("turn/completed", threadId=thread)["turn"]
        assert done["status"] == "completed", done
        assert done["items"][-1]["text"] == '{"word": "a"}'
        assert server.close_input() == 0


def test_an_answer_over_a_bound_fails_its_turn_naming_it_and_the_thread_goes_on(
    tmp_path: Path,
) -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH):
        deep = [deep]
    backtracks = "a" * 40 + "!"  # 2**40 steps of Python's re
    script = write_script(
        tmp_path / "model.json", {"json": {"tree": deep}}, {"json": backtracks}, "Fine."
    )
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread(cwd=str(tmp_path))
        server.call(
            "turn/start",
            {"threadId": thread, "input": text("a tree?"), "outputSchema": {"type": "object"}},
        )
        failed = server.next("turn/completed", threadId=thread)["turn"]
        assert failed["status"] == "failed"
        assert failed["error"]["message"] == (
            f"the answer is nested more than {MAX_DEPTH} levels deep, relay's bound for "
            "checking an answer"
        )
        word = {"type": "string", "pattern": "^(a+)+$"}
        server.call("turn/start", {"threadId": thread, "input": text("a?"), "outputSchema": word})
        refused = server.next("turn/completed", threadId=thread)["turn"]
        assert refused["status"] == "failed"
        assert refused["error"]["message"].endswith("does not match '^(a+)+$'")
        server.call("turn/start", {"threadId": thread, "input": text("still there?")})
        later = server.next("turn/completed", threadId=thread)["turn"]
        assert later["status"] == "completed"
        assert later["items"][-1]["text"] == "Fine."
        assert server.close_input() == 0
