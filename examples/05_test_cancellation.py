"""Test your own cancellation semantics with relay.testing, in virtual time.

Run it with pytest (`pytest examples/05_test_cancellation.py`). Under trio's autojump_clock a
model that takes a minute answers at once in real time, while the session's clock still sees
the minute pass; ordering is checked on events, never with sleeps.
"""

from collections.abc import Mapping
from typing import Any

import anyio
import trio
import trio.testing

import relay
from relay import testing

cleanups: list[str] = []


async def upload(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
    """A tool whose cleanup must run even when the turn is interrupted."""
    try:
        await anyio.sleep(60)
        return "uploaded"
    finally:
        # Cleanup that awaits runs shielded, with a bound, inside the 100 ms abort grace.
        with anyio.move_on_after(0.05, shield=True):
            await anyio.sleep(0.01)
            cleanups.append(ctx.turn_id)


UPLOAD = relay.Tool("upload", "Upload the build.", {"type": "object"}, upload)


async def test_interrupting_an_upload_runs_its_cleanup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"responses": [{"function_call": {"name": "upload", "arguments": {}}}]}
    async with testing.open_test_session(script, tools=[UPLOAD]) as t:
        await t.turn("ship it", id="t1")
        await t.wait_for(testing.tool_call_started)
        started = trio.current_time()
        await t.submit(relay.Interrupt())
        aborted = await t.wait_for(relay.TurnAborted)
        assert trio.current_time() - started == 0.01  # the cleanup's own time, in virtual time
    assert aborted.msg == relay.TurnAborted("t1", relay.AbortReason.INTERRUPTED, 10)
    assert cleanups == ["t1"]
    # The next request would see the call answered "aborted" and the interrupt marker.
    assert relay.FunctionCallOutput("call_1", "aborted") in t.session.history.items
