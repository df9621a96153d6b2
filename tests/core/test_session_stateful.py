"""Random op sequences against the actor, in virtual time, checking the invariants of
docs/reliability.md after every step."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings

import relay
from relay import testing
from tests.hypothesis_profiles import examples
from tests.invariants import check_event_invariants

EXAMPLES = examples(300)

replies = st.one_of(
    st.builds(
        lambda text, delay, stall: {"text": text, "delay_ms": delay, "stall_ms": stall},
        st.text(min_size=1, max_size=20),
        st.sampled_from([0, 10, 500]),
        st.sampled_from([0, 5, 200]),
    ),
    st.builds(
        lambda seconds: {"function_call": {"name": "sleep", "arguments": {"seconds": seconds}}},
        st.sampled_from([0, 0.05, 1, 30]),
    ),
    st.just({"function_call": {"name": "nope", "arguments": {}}}),
    st.just({"http_error": {"status": 503, "message": "busy"}}),
    st.just({"http_error": {"status": 400, "code": "context_length_exceeded"}}),
    st.just({"text": "cut", "cut_after_events": 3}),
    st.just({"text": "failed", "stream_error": {"code": "server_error", "message": "bad"}}),
)

actions = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(["steer", "replace", "queue"])),
    st.tuples(st.just("interrupt"), st.none()),
    st.tuples(st.just("override"), st.sampled_from(["gpt-5", "scripted"])),
    st.tuples(st.just("advance"), st.sampled_from([0, 0.01, 0.05, 0.3, 2.0])),
    st.tuples(st.just("shutdown"), st.none()),
)


@pytest.mark.slow  # 300 examples
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script=st.lists(replies, max_size=8), data=st.data())
def test_random_op_sequences_keep_the_event_invariants(
    script: list[dict[str, Any]], data: st.DataObject
) -> None:
    async def main() -> None:
        async with testing.open_test_session({"responses": script}) as t:
            for step in range(data.draw(st.integers(1, 12), label="steps")):
                action, arg = data.draw(actions, label=f"action {step}")
                match action:
                    case "turn":
                        await t.turn(f"input {step}", on_busy=arg)
                    case "interrupt":
                        await t.submit(relay.Interrupt())
                    case "override":
                        await t.submit(relay.OverrideTurnContext(model=arg))
                    case "advance":
                        await trio.sleep(arg)
                    case "shutdown":
                        await t.submit(relay.Shutdown())
                        await t.wait_for(relay.ShutdownComplete)
                        break
                await trio.testing.wait_all_tasks_blocked()
                check_event_invariants(t.recorder.events, finished=False)
        check_event_invariants(t.recorder.events, finished=True)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
