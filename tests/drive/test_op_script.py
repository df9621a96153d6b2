"""Op scripts: parsing, checking the whole script, and wait_for matching."""

from __future__ import annotations

import json
from typing import Any

import pytest

from relay._base import _protocol as p
from relay._base._codec import to_json
from relay._base._errors import ScriptError
from relay._drive._op_script import (
    OpLine,
    Sleep,
    WaitCounter,
    WaitFor,
    lookup,
    matches,
    parse_op_script,
)

INTERRUPT = {"type": "interrupt"}
HI = {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}


def problems(text: str) -> list[str]:
    with pytest.raises(ScriptError) as caught:
        parse_op_script(text, "s.jsonl")
    return str(caught.value).splitlines()


def lines(*rows: Any) -> str:
    return "\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows)


# ------------------------------------------------------------------ parsing


def test_blank_and_comment_lines_are_skipped_but_counted() -> None:
    script = lines(
        "# a comment",
        "",
        "   ",
        "   # an indented comment",
        {"op": INTERRUPT},
        "\t",
        {"id": "bye", "op": {"type": "shutdown"}},
    )
    assert parse_op_script(script) == [
        OpLine(5, None, p.Interrupt()),
        OpLine(7, "bye", p.Shutdown()),
    ]


def test_an_empty_script_has_no_steps() -> None:
    assert parse_op_script("") == []
    assert parse_op_script("# only\n\n# comments\n") == []


def test_op_lines_hold_the_decoded_op() -> None:
    assert parse_op_script(lines({"id": "t1", "op": HI})) == [
        OpLine(1, "t1", p.UserTurn(items=(p.Text("hi"),)))
    ]


def test_crlf_line_endings() -> None:
    script = json.dumps({"op": INTERRUPT}) + "\r\n" + json.dumps({"sleep_ms": 5}) + "\r\n"
    assert parse_op_script(script) == [OpLine(1, None, p.Interrupt()), Sleep(2, 5)]


def test_every_problem_is_reported_at_once_naming_its_line() -> None:
    script = lines(
        {"op": INTERRUPT},
        "# note",
        '{"op": {"type": "interrupt"}',
        {"op": {"type": "no_such_op"}},
        {"op": "not even an object"},
        {"sleep_ms": 1},
    )
    found = problems(script)
    assert [line.split(":")[0] for line in found] == [
        "s.jsonl line 3",
        "s.jsonl line 4",
        "s.jsonl line 5",
    ]
    assert "invalid JSON" in found[0]
    assert "unknown op type 'no_such_op'" in found[1]
    assert "expected a JSON object, got str" in found[2]


@pytest.mark.parametrize(
    "row",
    [[1, 2], '"just a string"', "42", "null", {"operation": INTERRUPT}, {}],
    ids=["array", "string", "number", "null", "wrong-key", "empty-object"],
)
def test_unknown_line_shapes_are_refused(row: Any) -> None:
    (found,) = problems(lines("# header", row))
    assert found.startswith("s.jsonl line 2: ")
    assert "'op'" in found
    assert "'wait_for'" in found


@pytest.mark.parametrize("sub_id", ["", 5, ["a"], True], ids=["empty", "int", "list", "bool"])
def test_a_bad_id_is_refused(sub_id: Any) -> None:
    assert problems(lines({"id": sub_id, "op": INTERRUPT})) == [
        "s.jsonl line 1: id must be a non-empty string"
    ]


def test_a_null_id_is_no_id() -> None:
    assert parse_op_script(lines({"id": None, "op": INTERRUPT})) == [OpLine(1, None, p.Interrupt())]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"op": {"type": "interupt"}}, "unknown op type 'interupt' (did you mean 'interrupt'?)"),
        (
            {"op": {**HI, "on_bsy": "queue"}},
            "op 'user_turn': unknown field 'on_bsy' (did you mean 'on_busy'?)",
        ),
        (
            {"op": {"type": "user_turn", "items": [{"type": "text", "txt": "hi"}]}},
            "op 'user_turn' items[0]: unknown field 'txt' (did you mean 'text'?)",
        ),
        ({"op": HI, "idd": "x"}, "unknown key 'idd' (did you mean 'id'?)"),
        ({"wiat_for": {"type": "turn_complete"}}, "(did you mean 'wait_for'?)"),
        (
            {"wait_for": {"type": "turn_complet"}},
            "unknown event type 'turn_complet' (did you mean 'turn_complete'?)",
        ),
        (
            {"wait_for": {"type": "item_started", "match": {"item.nme": "ls"}}},
            "unknown match key 'item.nme' (did you mean 'item.name'?)",
        ),
        (
            {"wait_for": {"type": "turn_aborted", "match": {"reasn": "shutdown"}}},
            "unknown match key 'reasn' (did you mean 'reason'?)",
        ),
    ],
)
def test_misspelt_names_get_a_did_you_mean(row: Any, expected: str) -> None:
    (found,) = problems(lines(row))
    assert found.startswith("s.jsonl line 1: ")
    assert expected in found


def test_match_keys_follow_the_event_shape() -> None:
    script = lines(
        {"wait_for": {"type": "item_completed", "match": {"item.receipt.trigger": "manual"}}},
        {"wait_for": {"type": "token_count", "match": {"info.last_token_usage.total_tokens": 5}}},
        {"wait_for": {"type": "turn_aborted", "match": {"reason": "shutdown", "type": "x"}}},
    )
    assert [step.line for step in parse_op_script(script)] == [1, 2, 3]


def test_nothing_may_follow_a_shutdown() -> None:
    assert problems(lines({"op": {"type": "shutdown"}}, "# fine", {"op": INTERRUPT})) == [
        "s.jsonl line 3: nothing runs after the shutdown on line 1"
    ]


def test_wait_for_lines() -> None:
    script = lines(
        {"wait_for": {"type": "turn_complete"}},
        {"wait_for": {"type": "item_completed", "count": 2, "match": {"item.type": "tool_call"}}},
    )
    assert parse_op_script(script) == [
        WaitFor(1, "turn_complete", 1, {}),
        WaitFor(2, "item_completed", 2, {"item.type": "tool_call"}),
    ]


def test_sleep_lines() -> None:
    assert parse_op_script(lines({"sleep_ms": 0}, {"sleep_ms": 250})) == [
        Sleep(1, 0),
        Sleep(2, 250),
    ]


@pytest.mark.parametrize(
    "wait_for",
    [
        "turn_complete",
        {},
        {"type": 5},
        {"type": "turn_complete", "count": 0},
        {"type": "turn_complete", "count": -1},
        {"type": "turn_complete", "count": "2"},
        {"type": "turn_complete", "count": 1.5},
        {"type": "turn_complete", "count": True},
        {"type": "turn_complete", "match": ["item.type"]},
        {"type": "turn_complete", "match": "item.type=tool_call"},
        {"type": "turn_complete", "timeout_ms": 100},
    ],
    ids=[
        "string",
        "no-type",
        "int-type",
        "zero",
        "negative",
        "string-count",
        "float-count",
        "bool-count",
        "list-match",
        "string-match",
        "unknown-key",
    ],
)
def test_a_malformed_wait_for_is_a_script_error_naming_the_line(wait_for: Any) -> None:
    found = problems(lines({"op": INTERRUPT}, "", {"wait_for": wait_for}))
    assert found and all(line.startswith("s.jsonl line 3: wait_for") for line in found)


def test_an_unknown_wait_for_key_is_named() -> None:
    (found,) = problems(lines({"wait_for": {"type": "turn_complete", "timeout_ms": 1}}))
    assert "'timeout_ms'" in found


@pytest.mark.parametrize("value", [-1, "10", 1.5, None, True, [10]])
def test_a_malformed_sleep_is_a_script_error_naming_the_line(value: Any) -> None:
    assert problems(lines("# pause", {"sleep_ms": value})) == [
        "s.jsonl line 2: sleep_ms must be a non-negative integer"
    ]


# ------------------------------------------------------------------ matching


def wait(type_: str, match: dict[str, Any] | None = None, count: int = 1) -> WaitFor:
    return WaitFor(1, type_, count, match or {})


def test_matches_on_type_alone() -> None:
    assert matches(wait("turn_complete"), {"type": "turn_complete", "turn_id": "t"})
    assert not matches(wait("turn_complete"), {"type": "turn_started", "turn_id": "t"})
    assert not matches(wait("turn_complete"), {"turn_id": "t"})


def test_matches_a_dotted_path_in_a_real_event() -> None:
    tool_done = to_json(p.ItemCompleted("t1", p.ToolCallItem("c1", "read_file", "{}", "x")))
    message_done = to_json(p.ItemCompleted("t1", p.AgentMessageItem("a1", "hi")))
    rule = wait("item_completed", {"item.type": "tool_call"})
    assert matches(rule, tool_done)
    assert not matches(rule, message_done)
    assert matches(
        wait("item_completed", {"item.type": "tool_call", "item.name": "read_file"}), tool_done
    )
    assert not matches(
        wait("item_completed", {"item.type": "tool_call", "item.name": "ls"}), tool_done
    )


def test_matches_nested_enum_values_by_their_json_value() -> None:
    aborted = to_json(p.TurnAborted("t1", p.AbortReason.INTERRUPTED, 3))
    assert matches(wait("turn_aborted", {"reason": "interrupted"}), aborted)
    assert not matches(wait("turn_aborted", {"reason": "replaced"}), aborted)
    compacted = to_json(
        p.ItemCompleted(
            "t1",
            p.ContextCompactionItem(
                "c", p.CompactionReceipt(p.CompactionTrigger.MANUAL, "local", 10, 2, 1)
            ),
        )
    )
    assert matches(wait("item_completed", {"item.receipt.trigger": "manual"}), compacted)


def test_matches_list_indexes() -> None:
    msg = {"type": "x", "items": [{"text": "first"}, {"text": "second"}], "grid": [[1, 2]]}
    assert matches(wait("x", {"items.0.text": "first"}), msg)
    assert matches(wait("x", {"items.1.text": "second"}), msg)
    assert matches(wait("x", {"grid.0.1": 2}), msg)
    assert not matches(wait("x", {"items.1.text": "first"}), msg)
    assert not matches(wait("x", {"items.2.text": "first"}), msg)
    assert not matches(wait("x", {"items.first.text": "first"}), msg)


def test_a_missing_path_never_matches_even_null() -> None:
    assert not matches(wait("x", {"a.b": None}), {"type": "x", "a": {}})
    assert not matches(wait("x", {"a.b": None}), {"type": "x", "a": "text"})
    assert matches(wait("x", {"a.b": None}), {"type": "x", "a": {"b": None}})


def test_match_values_compare_whole_values() -> None:
    msg = {"type": "x", "info": {"model_context_window": 1000, "tags": ["a", "b"]}}
    assert matches(wait("x", {"info.tags": ["a", "b"]}), msg)
    assert not matches(wait("x", {"info.tags": ["a"]}), msg)
    assert matches(wait("x", {"info": {"model_context_window": 1000, "tags": ["a", "b"]}}), msg)
    assert not matches(wait("x", {"info.model_context_window": "1000"}), msg)


def test_lookup() -> None:
    data = {"a": {"b": [10, {"c": "deep"}]}}
    assert lookup(data, "a.b.0") == 10
    assert lookup(data, "a.b.1.c") == "deep"
    assert lookup(data, "a") == {"b": [10, {"c": "deep"}]}
    missing = lookup(data, "a.z")
    assert missing is lookup(data, "a.b.5")
    assert missing is not None


# ------------------------------------------------------------------ counting as events arrive


def test_a_wait_counter_looks_at_each_event_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import relay._drive._op_script as op_script

    looked_at: list[dict[str, Any]] = []
    real = op_script.matches

    def counting(wait: WaitFor, msg: dict[str, Any]) -> bool:
        looked_at.append(msg)
        return real(wait, msg)

    monkeypatch.setattr(op_script, "matches", counting)
    counter = WaitCounter(wait("turn_complete", count=3))
    totals = []
    for n in range(200):
        counter.observe({"type": "turn_complete" if n % 50 == 49 else "token_count"})
        totals.append(counter.count)
    assert totals[-1] == 4 and totals[48] == 0 and totals[49] == 1
    assert len(looked_at) == 200


# ------------------------------------------------------------------ a factory's own check


def test_a_factory_with_validate_checks_its_ops_before_anything_runs() -> None:
    from relay._drive._op_script import validate_ops

    def review(op: p.CustomOp) -> object:
        raise AssertionError("a check builds no task")

    def check(op: p.CustomOp) -> None:
        path = op.fields.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError("a review op needs a 'path' string")

    review.validate = check  # type: ignore[attr-defined]
    script = lines(
        {"op": {"type": "review", "path": "a.py"}},
        {"op": {"type": "review"}},
        {"op": {"type": "lint"}},
        {"op": {"type": "review", "path": 3}},
    )
    steps = parse_op_script(script, "s.jsonl", {"review", "lint"})
    with pytest.raises(ScriptError) as caught:
        validate_ops(steps, {"review": review, "lint": lambda op: None}, "s.jsonl")
    assert str(caught.value).splitlines() == [
        "s.jsonl line 2: review: a review op needs a 'path' string",
        "s.jsonl line 4: review: a review op needs a 'path' string",
    ]
