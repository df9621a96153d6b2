"""Drives a session from an op script and hands every event to a sink."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, assert_never

import anyio

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._errors import ErrorCode, ScriptError
from .._core._session import Session
from ._op_script import OpLine, Sleep, Step, WaitCounter, WaitFor


class ScriptRunner:
    """Submits the steps of an op script and reads the session's events meanwhile.

    Every event reaches ``sink`` in order, and its JSON line reaches ``lines`` first when that is
    given (the session then makes each event's JSON once, for the rollout and the line).
    ``wait_for`` steps count events from the start of the session; one that can no longer be
    met (the session is idle and every event has been read) fails with :class:`ScriptError`
    instead of hanging. The runner keeps no event: each condition of the script is counted as
    its events arrive, so a long run holds a few counters rather than everything it has read.
    :meth:`stop` ends the script early: no further step runs and the session shuts down, its
    events still read to the last. A session that shuts itself down (its rollout can no longer
    be written: ``error{rollout}``) ends the script the same way.

    With ``answers_approvals`` (the session has no approval callback: the script's
    ``exec_approval`` ops decide), a ``wait_for`` or the script's end that only a decision
    could get past fails with :class:`ScriptError` naming the call, rather than wait forever:
    an ``exec_approval_request`` was read and no line of the script has decided it since.
    """

    def __init__(
        self,
        session: Session,
        sink: Callable[[p.Event, dict[str, Any]], None],
        *,
        script_name: str = "script",
        lines: Callable[[str], None] | None = None,
        answers_approvals: bool = True,
    ) -> None:
        self.session = session
        self.sink = sink
        self.lines = lines
        self.answers_approvals = answers_approvals
        if lines is not None:
            session.keep_event_json()
        self.script_name = script_name
        self.events_read = 0
        self._counters: dict[tuple[str, str], WaitCounter] = {}
        self._counters_by_type: dict[str, list[WaitCounter]] = {}
        # The requests read that no line of the script has decided, by call id (the turn of
        # each): while one is here and the session has nothing else to do, it waits on the
        # script. Any op but a decision empties it (an interrupt, a replacing turn, a
        # shutdown may end the waits), so that it never names a call that no longer waits.
        self._undecided: dict[str, tuple[str | None, str]] = {}
        # Set (and replaced) when an event is read while a step waits for one, and when a
        # counter counts one or the session goes idle: a running session wakes a waiting step
        # only when its count may have been reached.
        self._read = anyio.Event()
        self._read_awaited = False
        self._wake = anyio.Event()
        self._done = anyio.Event()
        self._steps = anyio.CancelScope()

    async def _consume(self) -> None:
        try:
            session = self.session
            async for event in session.events():
                kept = session.event_json(event.seq)
                msg, text = (to_json(event.msg), None) if kept is None else kept
                self.events_read += 1
                counted = False
                # A sub-agent's events are shown, but a script's waits are on the session's
                # own (a child's turn_complete is not the turn the script waits for).
                if event.agent is None:
                    for counter in self._counters_by_type.get(msg["type"], ()):
                        counted |= counter.observe(msg)
                counted |= self._note_approvals(event.msg, event.agent)
                if self.lines is not None:
                    self.lines(json_line(event, msg, text))
                self.sink(event, msg)
                if isinstance(event.msg, p.ErrorEvent) and event.msg.code == ErrorCode.ROLLOUT:
                    self._steps.cancel()  # the session is shutting down by itself
                if counted:
                    self._wake.set()
                    self._wake = anyio.Event()
                if self._read_awaited:
                    self._read_awaited = False
                    self._read.set()
                    self._read = anyio.Event()
        finally:
            self._done.set()
            self._read.set()
            self._wake.set()

    def _note_approvals(self, msg: p.EventMsg, agent: p.AgentRef | None = None) -> bool:
        """Keep ``_undecided`` as events arrive (a sub-agent's calls too: the script's
        decision goes down to it); True while a call waits on the script: a waiting step looks
        again at every event (an ``error`` refusing a decision may be the last one before the
        session waits)."""
        whose = agent.id if agent is not None else None
        match msg:
            case p.ExecApprovalRequest(call_id=call_id, turn_id=turn_id):
                self._undecided[call_id] = (whose, turn_id)
            case p.TurnComplete(turn_id=ended) | p.TurnAborted(turn_id=ended):
                for call_id in [c for c, at in self._undecided.items() if at == (whose, ended)]:
                    del self._undecided[call_id]
        return self.answers_approvals and bool(self._undecided)

    def _waiting_on_script(self) -> str | None:
        """The call the session waits on the script to decide, when it can do nothing else:
        every event read, no op unhandled, no background compaction at work."""
        if not self.answers_approvals or not self._undecided:
            return None
        stats = self.session.statistics()
        if (
            stats.submissions_pending
            or self.events_read < stats.events_emitted
            or stats.background_compaction == "running"
        ):
            return None
        return next(iter(self._undecided))

    def _counter(self, wait: WaitFor) -> WaitCounter:
        # Waits on one condition share a counter, so a script that waits after every turn looks
        # at each event once in all, not once per wait. Every counter exists before the first
        # event is read (see run), so none needs the events that came before its wait.
        key = (wait.type, json.dumps(wait.match, sort_keys=True) if wait.match else "")
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = WaitCounter(wait)
            self._counters_by_type.setdefault(wait.type, []).append(counter)
        return counter

    async def _wait(self, wait: WaitFor) -> None:
        counter = self._counter(wait)
        while counter.count < wait.count:
            stats = self.session.statistics()
            idle = (
                stats.submissions_pending == 0
                and stats.running_turn is None
                and stats.queued_turns == 0
            )
            caught_up = self.events_read >= stats.events_emitted
            if (idle and caught_up) or self._done.is_set():
                raise ScriptError(
                    f"{self.script_name} line {wait.line}: wait_for {wait.type!r} "
                    f"(count {wait.count}) can no longer be met: the session is idle after "
                    f"{counter.count} matching event(s)"
                )
            call_id = self._waiting_on_script()
            if call_id is not None:
                raise ScriptError(
                    f"{self.script_name} line {wait.line}: wait_for {wait.type!r} "
                    f"(count {wait.count}) can no longer be met: the call {call_id!r} waits "
                    "for its approval, and no line before this one decides it (an "
                    "exec_approval op)"
                )
            if idle:
                # Idle, with events still to read: each one may be the one awaited.
                self._read_awaited = True
                await self._read.wait()
            else:
                # One event for both: a task group racing two waits would cost more than the
                # rest of the turn's reading.
                wake = self._wake
                self.session.wake_when_idle(wake)
                await wake.wait()

    def stop(self) -> None:
        """Run no further step and shut the session down (a running task ends ``shutdown``)."""
        self._steps.cancel()
        if not self.session.closed:
            self.session.submit_nowait(p.Shutdown())

    async def run(self, steps: Sequence[Step], *, release: bool = False) -> None:
        """Run every step, then wait for idleness, shut down and read the last event.

        Args:
            steps: the parsed script.
            release: take each step out of ``steps`` (a list, emptied as the script runs)
                once it has run, so that a long script gives back its memory as it goes.
        """
        for step in steps:
            if isinstance(step, WaitFor):
                self._counter(step)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._consume)
            with self._steps:
                await self._run_steps(_released(steps) if release else steps)
            await self._done.wait()

    async def _run_steps(self, steps: Iterable[Step]) -> None:
        for step in steps:
            if self._steps.cancel_called:
                # Stopped while the last step was ending: a cancellation is only delivered at
                # the next wait, and the next step may need none.
                return
            if self.session.closed:
                raise ScriptError(
                    f"{self.script_name} line {step.line}: the session has already shut down"
                )
            match step:
                case OpLine(id=sub_id, op=op):
                    if isinstance(op, p.ExecApproval):
                        self._undecided.pop(op.id, None)
                    else:
                        self._undecided.clear()
                    self.session.submit_nowait(op, id=sub_id)
                    if isinstance(op, p.Shutdown):
                        return
                case WaitFor():
                    await self._wait(step)
                case Sleep(ms=ms):
                    await anyio.sleep(ms / 1000)
                case _:
                    assert_never(step)
        await self._wait_idle()
        if not self.session.closed:
            self.session.submit_nowait(p.Shutdown())

    async def _wait_idle(self) -> None:
        """Wait until the session is idle, after the script's last step."""
        while True:
            wake = self._wake
            self.session.wake_when_idle(wake)
            if wake.is_set():
                return
            call_id = self._waiting_on_script()
            if call_id is not None:
                raise ScriptError(
                    f"{self.script_name}: the script ended while the call {call_id!r} waits for "
                    "its approval: an exec_approval op decides it"
                )
            await wake.wait()


def _released(steps: Sequence[Step]) -> Iterator[Step]:
    if not isinstance(steps, list):
        raise TypeError("release=True needs the steps as a list")
    steps.reverse()  # popped from the end: each step taken out in constant time
    while steps:
        yield steps.pop()


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_line(event: p.Event, msg: dict[str, Any] | None = None, text: str | None = None) -> str:
    """The JSON line of an event, with its newline; ``msg``, when given, is its message
    already as JSON, and ``text`` that JSON's text."""
    if text is None:
        text = _ENCODER.encode(to_json(event.msg) if msg is None else msg)
    # The envelope is written around the message's text, in the order to_json gives it.
    agent = event.agent
    if agent is not None:
        # A sub-agent's event, in an ancestor's stream (agents.md).
        ref = _ENCODER.encode({"id": agent.id, "path": agent.path})
        return (
            f'{{"id":{_ENCODER.encode(event.id)},"seq":{event.seq},"agent":{ref},"msg":{text}}}\n'
        )
    return f'{{"id":{_ENCODER.encode(event.id)},"seq":{event.seq},"msg":{text}}}\n'
