"""Test doubles and helpers for embedders' own tests (and relay's).

- :class:`ScriptedModel`: an in-process model driven by a model script (docs/model-script.md).
- :class:`EventRecorder`: reads a session's events and lets a test wait for them.
- :func:`open_test_session`: a session on a scripted model with a fixed clock, a seeded jitter
  and no rollout, plus its recorder; :func:`recording` records any session's events.
- :func:`user_texts`, :func:`is_compaction_request`: what a model request (as the scripted
  model and the mock server log it) carries.
- ``ScriptedTransport`` / ``scripted_http_client`` / ``open_mock_server``: the same model
  scripts served to the openai SDK in-process or over a loopback socket (these import the
  HTTP stack; they load on first use).

Wait for observable events, never for wall-clock time: under trio's ``autojump_clock`` every
delay of a model script, every grace period and every retry backoff runs in virtual time.
While relay waits on real work (a tool's worker thread, a command, a hook command), it holds
the clock's autojump, so a deadline of the test does not pass while the work runs; the work's
own deadlines run on the wall clock. :func:`real_work` holds the clock the same way for real
work a test or a task of its own waits on.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from ._base import _protocol as p
from ._base._codec import to_json, type_tag
from ._base._config import Config, RolloutConfig
from ._core._exec_gate import ApprovalCallback
from ._core._port import CompactionPolicy
from ._core._session import Session
from ._core._summary import compaction_prompt
from ._core._tools import Tool
from ._exec._real_work import real_work
from ._models._script import ModelScript, load_model_script, parse_model_script
from ._models._scripted import ScriptedModel
from ._open import open_session

if TYPE_CHECKING:
    # Loaded on first use (they import the openai SDK); typed as what they are.
    from ._models._mock_transport import ScriptedTransport as ScriptedTransport
    from ._models._mock_transport import scripted_http_client as scripted_http_client
    from ._testing._mock_server import MockServer as MockServer
    from ._testing._mock_server import open_mock_server as open_mock_server
    from ._testing._mock_server import serve_mock as serve_mock

#: The clock of test sessions: always this moment.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def fixed_clock() -> datetime:
    """A wall clock that always says :data:`FIXED_NOW`."""
    return FIXED_NOW


def tool_call_started(event: p.Event) -> bool:
    """Whether ``event`` reports the start of a tool call (a predicate for ``wait_for``)."""
    return isinstance(event.msg, p.ItemStarted) and isinstance(event.msg.item, p.ToolCallItem)


def turn_ended(event: p.Event) -> bool:
    """Whether ``event`` is a turn's terminal event (a predicate for ``wait_for``)."""
    return isinstance(event.msg, p.TurnComplete | p.TurnAborted)


class EventRecorder:
    """Collects a session's events as they come and lets a test wait for them."""

    def __init__(self) -> None:
        self.events: list[p.Event] = []
        """The events, in order."""
        self._changed = anyio.Event()
        self.closed = False
        """Whether the stream has ended (after ``shutdown_complete``)."""

    async def consume(self, session: Session) -> None:
        """Read every event of ``session`` until its stream ends."""
        try:
            async for event in session.events():
                self.events.append(event)
                self._changed.set()
                self._changed = anyio.Event()
        finally:
            self.closed = True
            self._changed.set()

    @property
    def msgs(self) -> list[p.EventMsg]:
        """The event messages, in order."""
        return [event.msg for event in self.events]

    def types(self, turn_id: str | None = None) -> list[str]:
        """The ``type`` of every event (of one turn if given), in order."""
        return [
            type_tag(type(event.msg))
            for event in self.events
            if turn_id is None or event.id == turn_id
        ]

    def of_type(self, cls: type[Any]) -> list[Any]:
        """The messages of one class."""
        return [event.msg for event in self.events if isinstance(event.msg, cls)]

    def json(self) -> list[Any]:
        """Every event in its JSON form."""
        return [to_json(event) for event in self.events]

    async def wait_for(
        self,
        predicate: type[Any] | Callable[[p.Event], bool],
        count: int = 1,
        *,
        # A test helper's deadline: on expiry it reports what it saw, which a caller's
        # fail_after cannot.
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> p.Event:
        """Wait until ``count`` events match (a message class or a predicate); returns the last.

        Raises:
            AssertionError: the stream ended first.
            TimeoutError: ``timeout`` seconds passed first (the message says what was seen).
        """
        if timeout is None:
            return await self._wait_for(predicate, count)
        with anyio.move_on_after(timeout):
            return await self._wait_for(predicate, count)
        raise TimeoutError(self._timed_out(predicate, count, timeout))

    def _timed_out(
        self, predicate: type[Any] | Callable[[p.Event], bool], count: int, timeout: float
    ) -> str:
        wanted = predicate.__name__ if isinstance(predicate, type) else repr(predicate)
        check = _check(predicate)
        matched = sum(1 for event in self.events if check(event))
        seen = ", ".join(type_tag(type(event.msg)) for event in self.events[-12:])
        return (
            f"waited {timeout:g} s for {count} {wanted} event(s) and saw {matched}; "
            f"{len(self.events)} event(s) in all, the last: {seen or 'none'}"
        )

    async def _wait_for(
        self, predicate: type[Any] | Callable[[p.Event], bool], count: int
    ) -> p.Event:
        check = _check(predicate)
        seen = 0
        matched = 0
        while True:
            # Each wake-up looks only at the events that arrived since the last one.
            for event in self.events[seen:]:
                seen += 1
                if check(event):
                    matched += 1
                    if matched == count:
                        return event
            if self.closed:
                raise AssertionError(
                    f"the event stream ended after {matched} of {count} matching events"
                )
            await self._changed.wait()


def _check(predicate: type[Any] | Callable[[p.Event], bool]) -> Callable[[p.Event], bool]:
    if isinstance(predicate, type):
        cls = predicate
        return lambda event: isinstance(event.msg, cls)
    return predicate


@attrs.define
class TestSession:
    """A session, its scripted model and its event recorder, from :func:`open_test_session`.

    Example::

        async with testing.open_test_session({"responses": [{"text": "hi"}]}) as t:
            await t.turns("hello")
        assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "hi"
        assert testing.user_texts(t.model.requests[0])[-1] == "hello"
    """

    __test__ = False  # not a pytest test class

    session: Session
    """The session: ``t.session.ask(...)``, ``t.session.history``, ``t.session.statistics()``."""
    model: ScriptedModel
    """The scripted model: ``t.model.requests`` holds the JSON body of each request it got."""
    recorder: EventRecorder
    """Every event of the session, as it came: ``t.recorder.events``, ``.msgs``,
    ``.of_type(cls)``, ``.types()``."""

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit an op."""
        return await self.session.submit(op, id=id)

    async def turn(self, text: str, *, id: str | None = None, **kwargs: Any) -> str:
        """Submit a user turn with one text item."""
        return await self.session.submit(p.UserTurn(items=[p.Text(text)], **kwargs), id=id)

    async def wait_for(
        self,
        predicate: type[Any] | Callable[[p.Event], bool],
        count: int = 1,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see EventRecorder.wait_for)
    ) -> p.Event:
        """See :meth:`EventRecorder.wait_for`."""
        return await self.recorder.wait_for(predicate, count, timeout=timeout)

    async def turns(self, *texts: str, **kwargs: Any) -> None:
        """Run user turns one after the other, each to its end (``turn_complete`` or
        ``turn_aborted``)."""
        done = sum(isinstance(m, p.TurnComplete | p.TurnAborted) for m in self.recorder.msgs)
        for number, text in enumerate(texts, start=done + 1):
            await self.turn(text, **kwargs)
            await self.wait_for(turn_ended, number)

    async def shutdown(self) -> None:
        """Shut the session down and wait for ``shutdown_complete``."""
        if not self.session.closed:
            await self.session.submit(p.Shutdown())
        await self.recorder.wait_for(p.ShutdownComplete)


@asynccontextmanager
async def open_test_session(
    script: ModelScript | Mapping[str, Any] | str | Path | None = None,
    *,
    config: Config | None = None,
    tools: Iterable[Tool] = (),
    model: ScriptedModel | None = None,
    seed: int = 0,
    tasks: Mapping[str, Any] | None = None,
    compactor: Callable[[], CompactionPolicy] | None = None,
    on_approval: ApprovalCallback | None = None,
) -> AsyncIterator[TestSession]:
    """A session on a scripted model, with a fixed clock, seeded jitter and no rollout.

    ``tasks``, ``compactor`` and ``on_approval`` are those of :func:`relay.open_session`.
    """
    model = model or ScriptedModel(script)
    config = config or Config(rollout=RolloutConfig(enabled=False))
    recorder = EventRecorder()
    async with (
        open_session(
            config,
            model=model,
            tools=tools,
            clock=fixed_clock,
            rng=random.Random(seed),
            tasks=tasks,
            compactor=compactor,
            on_approval=on_approval,
        ) as session,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(recorder.consume, session)
        test_session = TestSession(session, model, recorder)
        try:
            yield test_session
        finally:
            with anyio.CancelScope(shield=True):
                await test_session.shutdown()


@asynccontextmanager
async def recording(session: Session) -> AsyncIterator[EventRecorder]:
    """Record ``session``'s events while the block runs; leaving it shuts the session down
    (unless it has) and waits for its last event.

    Example::

        async with relay.open_session(config) as session, testing.recording(session) as rec:
            await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
            await rec.wait_for(relay.TurnComplete)
    """
    recorder = EventRecorder()
    async with anyio.create_task_group() as tg:
        tg.start_soon(recorder.consume, session)
        try:
            yield recorder
        finally:
            with anyio.CancelScope(shield=True):
                if not session.closed:
                    session.submit_nowait(p.Shutdown())
                await session.wait_closed()


def user_texts(request: Mapping[str, Any]) -> list[str]:
    """The text parts of the user messages of a request body (``input``), in order."""
    return [
        part["text"]
        for entry in request["input"]
        if entry.get("type") == "message" and entry.get("role") == "user"
        for part in entry["content"]
        if "text" in part
    ]


def is_compaction_request(request: Mapping[str, Any], config: Config | None = None) -> bool:
    """Whether a request body asks for a summary: its last user text is the summarization
    prompt of ``config`` (default: relay's)."""
    texts = user_texts(request)
    return bool(texts) and texts[-1] == compaction_prompt(config or Config())


def __getattr__(name: str) -> Any:
    # The SDK-backed helpers import the openai SDK; load them only when asked for.
    if name in {"ScriptedTransport", "scripted_http_client"}:
        from ._models import _mock_transport

        return getattr(_mock_transport, name)
    if name in {"open_mock_server", "MockServer", "serve_mock"}:
        from ._testing import _mock_server

        return getattr(_mock_server, name)
    raise AttributeError(f"module 'relay.testing' has no attribute {name!r}")


__all__ = [
    "FIXED_NOW",
    "EventRecorder",
    "MockServer",
    "ModelScript",
    "ScriptedModel",
    "ScriptedTransport",
    "TestSession",
    "fixed_clock",
    "is_compaction_request",
    "load_model_script",
    "open_mock_server",
    "open_test_session",
    "parse_model_script",
    "real_work",
    "recording",
    "scripted_http_client",
    "serve_mock",
    "tool_call_started",
    "turn_ended",
    "user_texts",
]
