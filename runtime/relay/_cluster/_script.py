"""Op scripts in a session on a deployment: what ``relay cluster run`` does with each script.

The steps are those of ``relay run`` (``docs/cli.md``): ops submitted in order, ``wait_for``
counted on the pooled session's events, ``sleep_ms``; a failover in between changes nothing
for the script, since the pool resubmits nothing and the stream goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, assert_never

import anyio

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._errors import ScriptError
from .._base._util import single_exception
from .._drive._op_script import OpLine, Sleep, Step, WaitFor, matches
from ._session import ClusterSession, HostLostError


async def run_op_script(
    session: ClusterSession,
    steps: Sequence[Step],
    sink: Callable[[p.Event], None],
    *,
    script_name: str = "script",
    shut_down: bool = True,
) -> None:
    """Run an op script in a session on a deployment, as ``relay run`` does in a local one.

    Every event reaches ``sink`` in order. ``wait_for`` counts the events emitted since the
    caller began to follow the session (from its start, for a session it opened; replayed
    events of an attached session do not count); one that can no longer be met
    (the session is idle and every event has arrived) raises :class:`ScriptError`. After the
    last step the session is shut down once idle; with ``shut_down=False`` it is left running
    once idle and every event it emitted has reached ``sink``.
    """
    seen: list[dict[str, Any]] = []
    changed = anyio.Event()
    done = anyio.Event()

    async def consume() -> None:
        nonlocal changed
        try:
            async for event in session.events():
                if event.seq > (session.followed_at or 0):
                    seen.append(to_json(event.msg))
                sink(event)
                changed.set()
                changed = anyio.Event()
        finally:
            done.set()
            changed.set()

    def count(wait: WaitFor) -> int:
        return sum(1 for msg in seen if matches(wait, msg))

    async def wait_for(wait: WaitFor) -> None:
        while count(wait) < wait.count:
            if done.is_set():
                raise _unmet(script_name, wait, count(wait))
            idle_at: list[int] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(_first, tg, changed.wait)
                tg.start_soon(_first, tg, partial(_append, idle_at, session.wait_idle))
            if idle_at and count(wait) < wait.count:
                # Idle: once every event it emitted has arrived, nothing more will come.
                while session.taken_seq < idle_at[0] and not done.is_set():
                    waiting = changed
                    await waiting.wait()
                if count(wait) < wait.count:
                    raise _unmet(script_name, wait, count(wait))

    async def caught_up(seq: int) -> None:
        while session.taken_seq < seq and not done.is_set():
            waiting = changed
            await waiting.wait()

    try:
        await _run_steps(session, steps, script_name, consume, wait_for, done, caught_up, shut_down)
    except BaseExceptionGroup as group:
        raise single_exception(group) from None


async def _run_steps(
    session: ClusterSession,
    steps: Sequence[Step],
    script_name: str,
    consume: Callable[[], Coroutine[Any, Any, None]],
    wait_for: Callable[[WaitFor], Awaitable[None]],
    done: anyio.Event,
    caught_up: Callable[[int], Awaitable[None]],
    shut_down: bool,
) -> None:
    shutdown_sent = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        for step in steps:
            if session.closed:
                raise ScriptError(
                    f"{script_name} line {step.line}: the session has already shut down"
                )
            match step:
                case OpLine(line=line, id=sub_id, op=op):
                    try:
                        await session.submit_json(
                            to_json(op), id=sub_id, origin=f"{script_name} line {line}"
                        )
                    except HostLostError:
                        continue
                    if isinstance(op, p.Shutdown):
                        shutdown_sent = True
                case WaitFor():
                    await wait_for(step)
                case Sleep(ms=ms):
                    await anyio.sleep(ms / 1000)
                case _:
                    assert_never(step)
        if not shutdown_sent:
            idle = await session.wait_idle()
            if not shut_down:
                await caught_up(idle)
                tg.cancel_scope.cancel()
                return
            await session.shutdown()
        await done.wait()


async def _first(tg: anyio.abc.TaskGroup, waiter: Callable[[], Awaitable[Any]]) -> None:
    await waiter()
    tg.cancel_scope.cancel()


async def _append(into: list[int], getter: Callable[[], Awaitable[int]]) -> None:
    into.append(await getter())


def _unmet(script_name: str, wait: WaitFor, found: int) -> ScriptError:
    return ScriptError(
        f"{script_name} line {wait.line}: wait_for {wait.type!r} (count {wait.count}) can no "
        f"longer be met: the session is idle after {found} matching event(s)"
    )


__all__ = ["run_op_script"]
