"""Op scripts: parsing and wait_for matching (SPEC §9.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import _protocol as p
from runtime._codec import to_json
from runtime._errors import ScriptError
from runtime._op_script import (
    BadOpLine,
    OpLine,
    Sleep,
    WaitFor,
    lookup,
    matches,
    parse_op_script,
)

INTERRUPT = {"type": "interrupt"}


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
        OpLine(5, None, INTERRUPT),
        OpLine(7, "bye", {"type": "shutdown"}),
    ]


def test_an_empty_script_has_no_steps() -> None:
    assert parse_op_script("") == []
    assert parse_op_script("# only\n\n# comments\n") == []


def test_op_lines_keep_the_op_undecoded() -> None:
    # The session decodes the op, so that a bad op is reported in order as an error event.
    script = lines(
        {"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}},
        {"op": {"type": "no_such_op"}},
        {"op": "not even an object"},
    )
    assert parse_op_script(script) == [
        OpLine(1, "t1", {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}),
        OpLine(2, None, {"type": "no_such_op"}),
        OpLine(3, None, "not even an object"),
    ]


def test_crlf_line_endings() -> None:
    script = json.dumps({"op": INTERRUPT}) + "\r\n" + json.dumps({"sleep_ms": 5}) + "\r\n"
    assert parse_op_script(script) == [OpLine(1, None, INTERRUPT), Sleep(2, 5)]


def test_invalid_json_is_a_bad_line_with_its_number() -> None:
    script = lines({"op": INTERRUPT}, "# note", '{"op": {"type": "interrupt"}', {"sleep_ms": 1})
    steps = parse_op_script(script)
    assert steps[0] == OpLine(1, None, INTERRUPT)
    assert steps[2] == Sleep(4, 1)
    bad = steps[1]
    assert isinstance(bad, BadOpLine)
    assert bad.line == 3
    assert bad.error.startswith("invalid JSON")


@pytest.mark.parametrize(
    "row",
    [[1, 2], '"just a string"', "42", "null", {"operation": INTERRUPT}, {}],
    ids=["array", "string", "number", "null", "wrong-key", "empty-object"],
)
def test_unknown_line_shapes_are_bad_lines(row: Any) -> None:
    steps = parse_op_script(lines("# header", row))
    assert len(steps) == 1
    assert isinstance(steps[0], BadOpLine)
    assert steps[0].line == 2
    assert "'op'" in steps[0].error
    assert "'wait_for'" in steps[0].error


@pytest.mark.parametrize("sub_id", ["", 5, ["a"], True], ids=["empty", "int", "list", "bool"])
def test_a_bad_id_is_a_bad_line(sub_id: Any) -> None:
    steps = parse_op_script(lines({"id": sub_id, "op": INTERRUPT}))
    assert steps == [BadOpLine(1, "id must be a non-empty string")]


def test_a_null_id_is_no_id() -> None:
    assert parse_op_script(lines({"id": None, "op": INTERRUPT})) == [OpLine(1, None, INTERRUPT)]


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
    script = lines({"op": INTERRUPT}, "", {"wait_for": wait_for})
    with pytest.raises(ScriptError, match=r"^line 3: .*wait_for"):
        parse_op_script(script)


def test_an_unknown_wait_for_key_is_named() -> None:
    with pytest.raises(ScriptError, match="timeout_ms"):
        parse_op_script(lines({"wait_for": {"type": "x", "timeout_ms": 1}}))


@pytest.mark.parametrize("value", [-1, "10", 1.5, None, True, [10]])
def test_a_malformed_sleep_is_a_script_error_naming_the_line(value: Any) -> None:
    script = lines("# pause", {"sleep_ms": value})
    with pytest.raises(ScriptError, match=r"^line 2: sleep_ms"):
        parse_op_script(script)


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
