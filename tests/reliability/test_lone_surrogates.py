"""Text that UTF-8 cannot carry, in-process (docs/decisions.md, "Text that UTF-8 cannot
carry"): an op of the Python API that holds a lone surrogate is refused where it is made,
naming the field; a model's reply that holds one is carried with U+FFFD; the session goes
on either way. The helpers of :mod:`relay._base._unicode` as plain functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
import trio.testing
from hypothesis import given

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._errors import InvalidOpError
from relay._base._model import Completed, OutputItemDone, OutputTextDelta
from relay._base._unicode import lone_surrogate_at, mend_json, mended, why_not_text
from relay._models._responses import ResponseStreamParser, stream_events_for
from relay._wire.chat import ChatStreamParser

BAD = "a \ud800 b"
MENDED = "a \ufffd b"

# ============================================================================ the Python API

#: Each op (or input item) of the Python API, made with a lone surrogate in one text field:
#: the field its refusal names.
OPS_WITH_BAD_TEXT = [
    (lambda: relay.Text(BAD), "text"),
    (lambda: relay.Image(BAD), "image_url"),
    (lambda: relay.LocalImage(BAD), "path"),
    (lambda: relay.UserTurn(items=[relay.Text("hi")], cwd=BAD), "cwd"),
    (lambda: relay.UserTurn(items=[relay.Text("hi")], model=BAD), "model"),
    (lambda: relay.Compact(instructions=BAD), "instructions"),
    (lambda: relay.OverrideTurnContext(effort=BAD), "effort"),
    (lambda: relay.Unpin(BAD), "text"),
    (lambda: relay.ExecApproval(BAD, relay.ReviewDecision.APPROVED), "id"),
    (lambda: relay.CustomOp("review", {"paths": ["ok", BAD]}), "fields.paths[1]"),
    (lambda: relay.CustomOp("review", {BAD: 1}), "fields.a \\ud800 b"),
]


@pytest.mark.parametrize(("make", "field"), OPS_WITH_BAD_TEXT)
def test_an_op_with_a_lone_surrogate_is_refused_where_it_is_made(make: Any, field: str) -> None:
    with pytest.raises(InvalidOpError) as refused:
        make()
    assert str(refused.value) == f"{field}: {why_not_text(BAD)}"


def test_text_that_utf8_can_carry_is_taken_as_it_is() -> None:
    assert relay.Text("a \U0001f600 \ufffd b").text == "a \U0001f600 \ufffd b"
    assert relay.CustomOp("review", {"path": "é", "n": 1}).fields == {"path": "é", "n": 1}


async def test_a_refused_op_leaves_the_session_as_it_was(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session() as t:
        with pytest.raises(InvalidOpError):
            await t.session.submit(relay.UserTurn(items=[relay.Text(BAD)]))
        with pytest.raises(InvalidOpError):
            await t.session.ask(BAD)
        await t.turn("still there?")
        await t.wait_for(relay.TurnComplete)
        await t.session.wait_idle()
    (complete,) = t.recorder.of_type(relay.TurnComplete)
    assert complete.last_agent_message
    assert not t.recorder.of_type(relay.ErrorEvent)


# ============================================================================ the model's reply


async def test_a_lone_surrogate_in_a_scripted_reply_is_carried_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"text": f"bad {BAD}"}, "Second."]}
    async with testing.open_test_session(model=testing.ScriptedModel(script)) as t:
        await t.turn("one")
        await t.wait_for(relay.TurnComplete)
        await t.turn("two")
        await t.wait_for(relay.TurnComplete, 2)
    completes = t.recorder.of_type(relay.TurnComplete)
    assert [c.last_agent_message for c in completes] == [f"bad {MENDED}", "Second."]
    assert not t.recorder.of_type(relay.ErrorEvent)
    assert not t.recorder.of_type(relay.StreamErrorEvent)


async def test_a_model_servers_error_and_a_tool_calls_arguments_are_carried_too(
    tmp_path: Path,
) -> None:
    # Both reached the rollout with the surrogate and ended the session: an error message of
    # the server, and the escape of one in a call's JSON arguments (text until a tool reads
    # them). The rollout is on: it is where UTF-8 is written first.
    argv = json.dumps({"argv": ["echo", f"x{BAD}"]})
    assert "\\ud800" in argv
    script = {
        "responses": [
            {"http_error": {"status": 400, "message": f"refused {BAD}"}},
            {"function_call": {"name": "shell", "arguments": argv, "call_id": "c1"}},
            "Done.",
        ]
    }
    config = relay.Config(
        tools={"shell": True},
        cwd=str(tmp_path),
        approval_policy="never",
        rollout=relay.RolloutConfig(enabled=True, dir=str(tmp_path)),
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("one")
        await t.wait_for(relay.TurnComplete)
        await t.turn("two")
        await t.wait_for(relay.TurnComplete, 2)
    (error,) = t.recorder.of_type(relay.ErrorEvent)
    assert error.message == f"refused {MENDED}"
    (ran,) = [
        e.msg.item
        for e in t.recorder.events
        if isinstance(e.msg, relay.ItemCompleted) and isinstance(e.msg.item, relay.ToolCallItem)
    ]
    assert json.loads(ran.arguments) == {"argv": ["echo", f"x{MENDED}"]}
    assert f"x{MENDED}" in (ran.output or "")
    assert t.recorder.of_type(relay.TurnComplete)[-1].last_agent_message == "Done."
    (rollout,) = tmp_path.glob("**/rollout-*.jsonl")
    assert f"refused {MENDED}" in rollout.read_text(encoding="utf-8")


def test_the_responses_parser_mends_deltas_items_and_errors() -> None:
    arguments = json.dumps({"p": BAD}, ensure_ascii=False)
    output: list[p.ResponseItem] = [
        p.assistant_message(f"x{BAD}"),
        p.FunctionCall("f", arguments, "c1"),
    ]
    parser = ResponseStreamParser()
    events = [e for frame in stream_events_for("r1", output, None) for e in parser.feed(frame)]
    deltas = "".join(e.delta for e in events if isinstance(e, OutputTextDelta))
    items = [e.item for e in events if isinstance(e, OutputItemDone)]
    assert deltas == f"x{MENDED}"
    mended_arguments = json.dumps({"p": MENDED}, ensure_ascii=False)
    assert items == [
        p.assistant_message(f"x{MENDED}", id="r1-msg-0"),
        p.FunctionCall("f", mended_arguments, "c1"),
    ]
    assert isinstance(events[-1], Completed)
    with pytest.raises(relay.ModelError) as failed:
        ResponseStreamParser().feed({"type": "error", "message": f"no {BAD}"})
    assert str(failed.value).endswith(f"no {MENDED}")


def test_the_chat_parser_mends_text_and_tool_calls() -> None:
    parser = ChatStreamParser()
    events = parser.feed(
        {
            "id": "c1",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "content": BAD,
                        "tool_calls": [
                            {"index": 0, "id": "k", "function": {"name": "f", "arguments": BAD}}
                        ],
                    },
                    "finish_reason": "stop",
                }
            ],
        }
    )
    events += parser.finish()
    assert events[0] == OutputTextDelta("c1", MENDED)
    assert events[1] == OutputItemDone(p.assistant_message(MENDED, id="c1"))
    assert events[2] == OutputItemDone(p.FunctionCall("f", MENDED, "k"))


# ============================================================================ the helpers


def test_a_pair_held_as_two_code_points_is_joined_and_a_half_is_replaced() -> None:
    assert mended("\ud83d\ude00") == "\U0001f600"
    assert mended("\ude00\ud83d") == "\ufffd\ufffd"
    assert mended("plain é") == "plain é"


def test_the_first_lone_surrogate_is_named_as_a_field_is() -> None:
    params = {"threadId": "t", "input": [{"text": "ok"}, {"type": "text", "text": BAD}]}
    assert lone_surrogate_at(params) == ("input[1].text", BAD)
    assert lone_surrogate_at({"config": {"k\udc80": 1}}) == ("config.k\\udc80", "k\udc80")
    assert lone_surrogate_at(BAD, "params") == ("params", BAD)
    assert lone_surrogate_at({"a": [1, None, True, "é"]}) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_a_mended_value_can_be_written_as_utf8_and_text_is_left_as_it_is(value: Any) -> None:
    mended_value = mend_json(value)
    json.dumps(mended_value, ensure_ascii=False).encode("utf-8")
    assert lone_surrogate_at(mended_value) is None
    if lone_surrogate_at(value) is None:
        assert mended_value is value
