"""A cancellation that no cancel scope of relay's made, out of a task or a tool (an asyncio
task someone else cancelled, awaited by the code), and ``sys.exit`` in a library the code calls:
each is that task's or tool's failure, and the session goes on."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import attrs
import pytest

import relay
from relay import testing

BACKENDS = ["asyncio", "trio"]


async def stray_cancellation() -> None:
    """What awaiting a future someone else cancelled does: on asyncio, the real thing; on trio,
    where no asyncio future can be awaited, the same exception raised by the code."""
    if anyio.get_cancelled_exc_class() is asyncio.CancelledError:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future
    raise asyncio.CancelledError()


async def library_exit() -> None:
    await anyio.lowlevel.checkpoint()
    sys.exit(2)


FAULTS: Mapping[str, Callable[[], Awaitable[None]]] = {
    "cancelled": stray_cancellation,
    "exit": library_exit,
}


@attrs.frozen
class Faulty(relay.SessionTask):
    fault: Callable[[], Awaitable[None]]

    @property
    def kind(self) -> str:
        return "faulty"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        await self.fault()
        return None


def run_session(
    body: Callable[[testing.TestSession], Awaitable[Any]], backend: str, **kw: Any
) -> testing.TestSession:
    async def main() -> testing.TestSession:
        async with testing.open_test_session(**kw) as t:
            await body(t)
        return t

    result: testing.TestSession = anyio.run(main, backend=backend)
    return result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_task_whose_code_strays_fails_and_the_session_goes_on(backend: str, fault: str) -> None:
    async def body(t: testing.TestSession) -> None:
        await t.submit(relay.CustomOp("faulty", {}), id="f1")
        await t.wait_for(relay.TurnComplete)
        answer = await t.session.ask("still here?")
        assert answer.message == "echo: still here?"

    tasks = {"faulty": lambda op: Faulty(FAULTS[fault])}
    t = run_session(body, backend, script={"responses": []}, tasks=tasks)
    of_f1 = [e.msg for e in t.recorder.events if e.id == "f1"]
    assert [type(m) for m in of_f1] == [relay.TurnStarted, relay.ErrorEvent, relay.TurnComplete]
    error = of_f1[1]
    assert isinstance(error, relay.ErrorEvent)
    assert error.message.startswith("the faulty task failed: ")
    assert isinstance(t.recorder.msgs[-1], relay.ShutdownComplete)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_tool_whose_code_strays_fails_and_the_turn_goes_on(backend: str, fault: str) -> None:
    async def handler(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        await FAULTS[fault]()
        return "never"

    tool = relay.Tool("faulty", "Fails.", {"type": "object", "properties": {}}, handler)
    script = {"responses": [{"function_call": {"name": "faulty", "arguments": {}}}, {"text": "ok"}]}

    async def body(t: testing.TestSession) -> None:
        await t.turn("go", id="t1")
        await t.wait_for(relay.TurnComplete)

    t = run_session(body, backend, script=script, tools=[tool])
    outputs = [i for i in t.session.history if isinstance(i, relay.FunctionCallOutput)]
    assert [o.output.startswith("error: faulty failed unexpectedly") for o in outputs] == [True]
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "ok"
