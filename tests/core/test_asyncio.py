"""A subset of the session tests on asyncio: relay embeds in asyncio programs too."""

from __future__ import annotations

import asyncio

import relay
from relay import testing


def test_two_turns_with_a_tool_call_on_asyncio() -> None:
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}},
            {"text": "slept"},
            {"text": "bye"},
        ]
    }

    async def main() -> testing.TestSession:
        async with testing.open_test_session(script) as t:
            await t.turn("nap", id="t1")
            await t.wait_for(relay.TurnComplete)
            await t.turn("again", id="t2")
            await t.wait_for(relay.TurnComplete, 2)
        return t

    t = asyncio.run(main())
    completes = t.recorder.of_type(relay.TurnComplete)
    assert [c.last_agent_message for c in completes] == ["slept", "bye"]
    assert isinstance(t.recorder.msgs[-1], relay.ShutdownComplete)
    assert relay.FunctionCallOutput("c1", "slept 0 seconds") in t.session.history.items


def test_interrupt_and_replace_on_asyncio() -> None:
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 30}, "call_id": "c1"}},
            {"text": "slow", "delay_ms": 30000},
            {"text": "fast"},
        ]
    }

    async def main() -> testing.TestSession:
        async with testing.open_test_session(script) as t:
            await t.turn("nap", id="t1")
            await t.wait_for(testing.tool_call_started)
            await t.submit(relay.Interrupt())
            await t.wait_for(relay.TurnAborted)
            await t.turn("slow one", id="t2")
            await t.wait_for(relay.UserMessage, 2)
            await t.turn("fast one", id="t3", on_busy="replace")
            await t.wait_for(relay.TurnComplete)
        return t

    t = asyncio.run(main())
    ends = [
        (e.id, type(e.msg).__name__)
        for e in t.recorder.events
        if isinstance(e.msg, relay.TurnAborted | relay.TurnComplete)
    ]
    assert ends == [("t1", "TurnAborted"), ("t2", "TurnAborted"), ("t3", "TurnComplete")]
    reasons = [m.reason for m in t.recorder.of_type(relay.TurnAborted)]
    assert reasons == [relay.AbortReason.INTERRUPTED, relay.AbortReason.REPLACED]
