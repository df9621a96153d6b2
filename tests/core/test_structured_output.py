"""Structured output on the embedded scripted model: a turn that asks for JSON of a schema
asks for it in every request, and answers with it read, or fails naming what did not fit
(docs/session.md, Structured output)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._wire import open_http_client
from tests.core.captured import CapturedServer, chat_answer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"files": {"type": "array", "items": {"type": "string"}}},
    "required": ["files"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "name": "codex_output_schema", "schema": SCHEMA, "strict": True}


def formats(model: testing.ScriptedModel) -> list[Any]:
    """The response format of each request the model got (None: it asked for text)."""
    return [body.get("text", {}).get("format") for body in model.requests]


async def test_ask_with_a_schema_answers_with_the_json_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {"path": "."}}},
            {"json": {"files": ["a.txt", "b.txt"]}},
            "Two files.",
        ]
    }
    async with testing.open_test_session(script) as t:
        answer = await t.session.ask("Which files are here?", output_schema=SCHEMA)
        after = await t.session.ask("And now, in words?")
    assert answer.output == {"files": ["a.txt", "b.txt"]}
    assert answer.message == '{"files": ["a.txt", "b.txt"]}'
    # Every request of the turn asks for the schema; the next turn asks for text again.
    assert formats(t.model) == [FORMAT, FORMAT, None]
    assert (after.message, after.output) == ("Two files.", None)
    complete = t.recorder.of_type(relay.TurnComplete)
    assert [c.output for c in complete] == [{"files": ["a.txt", "b.txt"]}, None]
    assert t.recorder.of_type(relay.ErrorEvent) == []


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("The files are a.txt and b.txt.", "the answer is not JSON: Expecting value: line 1"),
        (
            {"json": {"files": ["a.txt", 2]}},
            "the answer does not fit the output schema at $.files[1]: 2 is not of type 'string'",
        ),
        (
            {"json": {"files": [], "dirs": []}},
            "the answer does not fit the output schema: Additional properties are not allowed "
            "('dirs' was unexpected)",
        ),
    ],
    ids=["prose", "wrong-type", "extra-field"],
)
async def test_an_answer_that_does_not_fit_fails_the_turn_naming_what(
    autojump_clock: trio.testing.MockClock, reply: Any, why: str
) -> None:
    async with testing.open_test_session({"responses": [reply, "still here"]}) as t:
        with pytest.raises(relay.TurnFailed) as failed:
            await t.session.ask("Which files are here?", output_schema=SCHEMA)
        later = await t.session.ask("Are you there?")
    error = failed.value.error
    assert error is not None and error.code is relay.ErrorCode.INVALID_OUTPUT
    assert error.message.startswith(why)
    assert str(failed.value).startswith(f"turn sub-1 failed: invalid_output: {why}")
    # The error, then the turn's end with its text and no output; the session goes on.
    ends = [m for m in t.recorder.msgs if isinstance(m, relay.ErrorEvent | relay.TurnComplete)]
    text = t.recorder.of_type(relay.AgentMessage)[0].message
    assert ends[:2] == [error, relay.TurnComplete("sub-1", text, 0, None)]
    assert later.message == "still here"


async def test_a_schema_that_is_no_json_schema_is_refused_before_anything_is_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session() as t:
        with pytest.raises(
            relay.InvalidOpError, match=r"not a JSON Schema: .* \(at \$\.required\)"
        ):
            await t.session.ask("hi", output_schema={"type": "object", "required": "files"})
        answer = await t.session.ask("hi")
    assert t.model.requests.total == 1
    assert answer.turn_id == "sub-1"
    assert t.recorder.types() == [
        "session_configured",
        *t.recorder.types("sub-1"),
        "shutdown_complete",
    ]


async def test_a_user_turn_in_json_with_a_bad_schema_is_an_invalid_op_and_the_session_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    op = {
        "type": "user_turn",
        "items": [{"type": "text", "text": "hi"}],
        "final_output_json_schema": {"type": "objekt"},
    }
    async with testing.open_test_session({"responses": [{"json": {"files": []}}]}) as t:
        t.session.submit_json_nowait(op, id="bad")
        t.session.submit_json_nowait({**op, "final_output_json_schema": SCHEMA}, id="good")
        await t.wait_for(relay.TurnComplete)
    (refused,) = t.recorder.of_type(relay.ErrorEvent)
    assert refused.code is relay.ErrorCode.INVALID_OP
    assert "final_output_json_schema: not a JSON Schema: 'objekt' is not valid" in refused.message
    assert t.recorder.of_type(relay.TurnComplete)[0].output == {"files": []}
    assert t.model.requests.total == 1


async def test_a_compaction_in_a_structured_turn_asks_for_a_summary_in_words(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}}, "total_tokens": 5000},
            {"text": "SUMMARY"},
            {"json": {"files": []}},
        ]
    }
    config = relay.Config(
        rollout=relay.RolloutConfig(enabled=False), model_auto_compact_token_limit=1000
    )
    async with testing.open_test_session(script, config=config) as t:
        answer = await t.session.ask("Which files?", output_schema=SCHEMA)
    assert [testing.is_compaction_request(r) for r in t.model.requests] == [False, True, False]
    assert formats(t.model) == [FORMAT, None, FORMAT]
    assert answer.output == {"files": []}


async def test_an_answer_cut_at_the_answer_limit_is_read_like_any_other(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A chat server's answer cut at its limit ("length") is kept, with a warning; under a
    # schema it is read too, and half a JSON value is no JSON.
    server = CapturedServer(
        [chat_answer(['{"files": ', '["a.t'], finish="length", prompt_tokens=9)]
    )
    provider = relay.ProviderConfig(
        name="local", base_url="http://local.invalid/v1", wire_api="chat"
    )
    config = relay.Config(
        rollout=relay.RolloutConfig(enabled=False),
        model_provider="local",
        model_providers={"local": provider},
    )
    async with (
        httpx2.AsyncClient(transport=server) as http,
        open_http_client(provider, api_key=None, http_client=http) as client,
        testing.open_test_session(model=client, config=config) as t,  # type: ignore[arg-type]
    ):
        with pytest.raises(relay.TurnFailed, match="invalid_output: the answer is not JSON: "):
            await t.session.ask("Which files?", output_schema=SCHEMA)
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert "cut off" in warning.message
    assert server.bodies[0]["response_format"]["json_schema"]["schema"] == SCHEMA


async def test_a_task_of_ones_own_gives_its_structured_output_with_a_turn_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Virtual time: the turn takes no time, however busy the machine (its duration is 0).
    class Answering(relay.SessionTask):
        kind = "answering"

        async def run(self, ctx: relay.TaskContext) -> relay.TurnResult:
            ctx.emit(relay.AgentMessage('{"ok": true}'))
            return relay.TurnResult(None, {"ok": True})

    async with testing.open_test_session(tasks={"answer": lambda op: Answering()}) as t:
        await t.session.submit(relay.CustomOp("answer"), id="c1")
        await t.wait_for(relay.TurnComplete)
    assert t.recorder.of_type(relay.TurnComplete) == [
        relay.TurnComplete("c1", '{"ok": true}', 0, {"ok": True})
    ]
