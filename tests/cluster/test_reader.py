"""The caller's side without Ray: a caller that does not read its session's events keeps a
bounded queue and is told what was dropped (batches fed as a host's stream delivers them), and
``connect`` without an address."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import relay
from relay._cluster import _client as client_module
from relay._cluster._buffers import DROPPED_EVENT_ID, READER_EVENTS
from relay._cluster._client import MOVES_WAIT_S, client_of, connect
from relay._cluster._host import event_text
from relay._cluster._session import ClusterSession


def texts(first: int, last: int) -> list[str]:
    return [
        event_text(relay.Event(f"e{seq}", seq, relay.UserMessage(f"m{seq}")), None)
        for seq in range(first, last + 1)
    ]


def read_all(session: ClusterSession) -> list[relay.Event]:
    async def main() -> list[relay.Event]:
        got: list[relay.Event] = []
        with anyio.move_on_after(5):
            async for event in session.events():
                got.append(event)
                if event.seq == last:
                    break
        return got

    last = session.queued
    return anyio.run(main)


def session() -> ClusterSession:
    client: Any = object()  # the stream is fed by hand; nothing is submitted
    return ClusterSession(client, "s1", "relay-host-0", 1, None)


def test_a_caller_that_does_not_read_keeps_a_bounded_queue_and_is_told_what_it_lost() -> None:
    made = session()
    total = READER_EVENTS + 500
    for first in range(1, total + 1, 100):
        made.feed.deliver(1, None, texts(first, min(first + 99, total)))
    assert made.queued == total
    got = read_all(made)
    assert len(got) <= READER_EVENTS
    warning = got[0]
    assert warning.id == DROPPED_EVENT_ID and isinstance(warning.msg, relay.WarningEvent)
    dropped = warning.seq
    assert warning.msg.message.startswith(f"{dropped} event(s), seq 1 to {dropped}, were dropped")
    # Then every event after the dropped run, once, in order.
    assert [e.seq for e in got[1:]] == list(range(dropped + 1, total + 1))


def test_a_run_the_host_dropped_is_one_warning_in_its_place() -> None:
    made = session()
    made.feed.deliver(1, None, texts(1, 3))
    made.feed.deliver(1, (4, 9, 6), texts(10, 12))
    got = read_all(made)
    assert [(e.id, e.seq) for e in got] == [
        ("e1", 1),
        ("e2", 2),
        ("e3", 3),
        (DROPPED_EVENT_ID, 9),
        ("e10", 10),
        ("e11", 11),
        ("e12", 12),
    ]
    assert isinstance(got[3].msg, relay.WarningEvent)
    assert got[3].msg.message.startswith("6 event(s), seq 4 to 9, were dropped")
    assert "relay cluster attach --from 3" in got[3].msg.message


def test_a_batch_of_an_older_epoch_is_not_taken() -> None:
    made = session()
    made.feed.deliver(1, None, texts(1, 2))
    made.feed.deliver(0, None, texts(3, 4))
    assert [e.seq for e in read_all(made)] == [1, 2]


def test_connect_without_an_address_names_it_and_starts_no_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[Any] = []

    class NoRay:
        def is_initialized(self) -> bool:
            return False

        def init(self, **kwargs: Any) -> None:
            started.append(kwargs)  # a local Ray instance, with no deployment in it

    monkeypatch.setattr(client_module, "import_ray", NoRay)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    async def main() -> None:
        async with connect(namespace="relay"):
            pass

    with pytest.raises(relay.ConfigError, match="needs the Ray cluster's address"):
        anyio.run(main, backend="asyncio")
    assert started == []


class Registry:
    """A registry's handle that answers a client's start and its wait for moves."""

    class _Call:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        def remote(self, *args: Any) -> Any:
            async def answer() -> Any:
                if args and args[-1] == MOVES_WAIT_S:  # the long wait for moves: none come
                    await anyio.sleep_forever()
                return self.answer

            return answer()

    moves = _Call({"version": 0, "moves": []})
    settings = _Call({"lease_s": 10.0})


def test_what_a_clients_block_raises_comes_out_as_it_is() -> None:
    ray: Any = type("Ray", (), {"exceptions": type("E", (), {"RayActorError": RuntimeError})})

    async def main() -> None:
        async with client_of(ray, Registry(), None):
            raise relay.ConfigError("no session s-1 in this deployment")

    with pytest.raises(relay.ConfigError, match="no session s-1"):
        anyio.run(main, backend="asyncio")
