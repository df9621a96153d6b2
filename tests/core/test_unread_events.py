"""Events nobody reads: a session keeps a bounded number of them (docs/session.md)."""

from __future__ import annotations

import random
from contextlib import AbstractAsyncContextManager

import trio
import trio.testing

import relay
from relay import testing
from relay._core._event_stream import UNREAD_LIMIT, EventStream

NO_ROLLOUT = relay.Config(rollout=relay.RolloutConfig(enabled=False))


def open_session() -> AbstractAsyncContextManager[relay.Session]:
    return relay.open_session(
        NO_ROLLOUT, model=testing.ScriptedModel(), clock=testing.fixed_clock, rng=random.Random(0)
    )


async def asks(session: relay.Session, count: int) -> None:
    for index in range(count):
        await session.ask(f"question {index}")


async def test_a_session_that_only_asks_keeps_the_latest_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_session() as session:
        await asks(session, 300)
        statistics = session.statistics()
        emitted = statistics.events_emitted
        assert emitted > 2 * UNREAD_LIMIT
        assert (statistics.events_unread, statistics.events_dropped) == (
            UNREAD_LIMIT,
            emitted - UNREAD_LIMIT,
        )
        reader = session.events()
        first = await reader.__anext__()
        kept = [await reader.__anext__() for _ in range(UNREAD_LIMIT)]
        assert session.statistics().events_unread == 0
        await session.submit(relay.Shutdown())
        rest = [event async for event in reader]
    dropped = emitted - UNREAD_LIMIT
    assert first == relay.Event(
        "dropped",
        dropped,
        relay.WarningEvent(
            f"{dropped} event(s), seq 1 to {dropped}, were dropped because nobody read them; "
            "those the rollout records can be read there"
        ),
    )
    assert [event.seq for event in kept] == list(range(dropped + 1, emitted + 1))
    assert [type(event.msg) for event in rest] == [relay.ShutdownComplete]


async def test_a_reader_that_took_the_stream_gets_every_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_session() as session:
        reader = session.events()
        await asks(session, 300)
        emitted = session.statistics().events_emitted
        assert session.statistics().events_unread == emitted
        await session.submit(relay.Shutdown())
        events = [event async for event in reader]
    assert [event.seq for event in events] == list(range(1, emitted + 2))
    assert session.statistics().events_dropped == 0


def test_the_bound_drops_the_oldest_and_their_json() -> None:
    stream = EventStream(unread_limit=2)
    stream.keep_json()
    for seq in (1, 2, 3):
        stream.send(relay.Event("t", seq, relay.WarningEvent(str(seq))), ({}, str(seq)))
    assert (stream.unread, stream.dropped) == (2, 1)
    assert stream.take_json(1) is None
    assert stream.take_json(3) == ({}, "3")
