"""Sessions against a real model server, opened through the public API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

import relay
from relay import testing

#: Bound on any one wait for an event from a session talking to a real server.
WAIT_S = 180.0

WIRES = ("chat", "responses")


@attrs.define
class LiveSession:
    """A session on a real server and the events it has reported."""

    session: relay.Session
    recorder: testing.EventRecorder

    async def turn(self, text: str, *, id: str) -> None:
        """Submit a user turn and wait for its end."""
        await self.session.submit(relay.UserTurn(items=[relay.Text(text)]), id=id)
        await self.wait_for(lambda event: event.id == id and testing.turn_ended(event))

    async def compact(self, *, id: str) -> None:
        """Submit a manual compaction and wait for its end."""
        await self.session.submit(relay.Compact(), id=id)
        await self.wait_for(lambda event: event.id == id and testing.turn_ended(event))

    async def wait_for(
        self, predicate: type[Any] | Callable[[relay.Event], bool], count: int = 1
    ) -> relay.Event:
        """Wait, at most :data:`WAIT_S`, until ``count`` events match."""
        with trio.fail_after(WAIT_S):
            return await self.recorder.wait_for(predicate, count)

    def msgs(self, turn_id: str, cls: type[Any] = object) -> list[Any]:
        """The messages of one turn (or op), of one class."""
        return [e.msg for e in self.recorder.events if e.id == turn_id and isinstance(e.msg, cls)]

    def types(self, turn_id: str) -> list[str]:
        """The event types of one turn (or op), in order."""
        return self.recorder.types(turn_id)

    def usage(self, turn_id: str) -> list[relay.TokenUsage]:
        """The ``last_token_usage`` of every ``token_count`` of one turn that carries one."""
        return [m.info.last_token_usage for m in self.msgs(turn_id, relay.TokenCount) if m.info]

    def rollout_path(self) -> Path:
        """The session's rollout file."""
        (path,) = Path(self.session.config.rollout.dir or "").rglob(f"*{self.session.id}.jsonl")
        return path


@asynccontextmanager
async def open_live_session(
    config: relay.Config, *, resume: Path | None = None
) -> AsyncIterator[LiveSession]:
    """A session on ``config``'s provider (or resumed from a rollout); shut down on exit."""
    recorder = testing.EventRecorder()
    opened = relay.open_session(config) if resume is None else relay.resume_session(resume, config)
    async with opened as session, trio.open_nursery() as nursery:
        nursery.start_soon(recorder.consume, session)
        live = LiveSession(session, recorder)
        try:
            yield live
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(WAIT_S):
                if not session.closed:
                    await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)


def agent_text(live: LiveSession, turn_id: str) -> str:
    """The text of the turn's completed agent messages, joined."""
    return "".join(m.message for m in live.msgs(turn_id, relay.AgentMessage))


def deltas(live: LiveSession, turn_id: str) -> list[str]:
    """The turn's streamed text deltas."""
    return [m.delta for m in live.msgs(turn_id, relay.AgentMessageDelta)]


def compaction_receipts(live: LiveSession, turn_id: str) -> list[relay.CompactionReceipt]:
    """The receipts of the compactions installed during one turn (or op)."""
    return [
        m.item.receipt
        for m in live.msgs(turn_id, relay.ItemCompleted)
        if isinstance(m.item, relay.ContextCompactionItem) and m.item.receipt is not None
    ]
