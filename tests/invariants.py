"""Checks of the event-stream invariants of docs/reliability.md, shared by the stateful tests."""

from __future__ import annotations

from collections.abc import Sequence

import relay

TERMINAL = (relay.TurnComplete, relay.TurnAborted)


def check_event_invariants(events: Sequence[relay.Event], *, finished: bool) -> None:
    """Assert invariants 1, 2, 3 and 5 on a (possibly partial) event stream.

    ``finished``: the stream is complete (the session has shut down).
    """
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "seq must count from 1"
    started: set[str] = set()
    ended: dict[str, relay.EventMsg] = {}
    active: str | None = None
    open_items: dict[str, set[str]] = {}
    failed: set[str] = set()
    for index, event in enumerate(events):
        msg = event.msg
        if isinstance(msg, relay.ShutdownComplete):
            assert index == len(events) - 1, "shutdown_complete must be the last event"
        if event.id in ended:
            raise AssertionError(f"event {msg!r} of turn {event.id} after its terminal event")
        match msg:
            case relay.TurnStarted(turn_id=turn_id):
                # Invariant 2 (and at most one task at a time): the previous turn is over.
                assert active is None, f"turn {turn_id} started while {active} was running"
                assert turn_id not in started, f"turn id {turn_id} started twice"
                started.add(turn_id)
                active = turn_id
                open_items[turn_id] = set()
            case relay.TurnComplete(turn_id=turn_id) | relay.TurnAborted(turn_id=turn_id):
                assert turn_id in started and turn_id == active, f"stray terminal for {turn_id}"
                ended[turn_id] = msg
                active = None
                if isinstance(msg, relay.TurnComplete) and turn_id not in failed:
                    assert not open_items[turn_id], (
                        f"items {open_items[turn_id]} of {turn_id} started, never completed"
                    )
            case relay.ItemStarted(turn_id=turn_id, item=item):
                assert turn_id == active, "item_started outside its turn"
                open_items[turn_id].add(item.id)
            case relay.ItemCompleted(turn_id=turn_id, item=item):
                assert turn_id == active, "item_completed outside its turn"
                assert item.id in open_items[turn_id], f"item {item.id} completed, never started"
                open_items[turn_id].discard(item.id)
            case relay.ErrorEvent() if event.id == active:
                failed.add(event.id)
            case _:
                pass
    if finished:
        assert events and isinstance(events[-1].msg, relay.ShutdownComplete)
        assert started == set(ended), f"turns without a terminal event: {started - set(ended)}"
