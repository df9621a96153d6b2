"""A session on a deployment, as its caller sees it: the face of a local session, and the feed
of what arrives for it.

Theory of operation. A :class:`ClusterSession` has the face of a local session: ``submit``
returns once the host accepted the op, ``events()`` yields the session's events in order. What
arrives for it is its :class:`SessionFeed`, which the session hands to its client
(:class:`~._client.ClusterClient`): the client writes the feed (batches from a host's stream,
events replayed from the rollout, a move to another host, a loss), the session reads it.

Every event carries the session's ``seq``, which the hosts number across epochs. A feed takes
an event once, by its ``seq``, and takes batches only from the epoch the session is in. While
the client replays the rollout (after an attach, a move, or after the host forgot the caller),
the host's batches are held back, and taken after the replay: the two never overlap. The
``session_resumed`` a caller reads names the submissions of *that* caller no event showed
handled (its :class:`~._ledger.Ledger`).

Events wait for the reader in a bounded :class:`~._buffers.ReaderQueue`: a reader that does not
keep up loses its oldest events, and reads one ``warning`` in their place.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import from_json, to_json
from .._base._errors import ClosedSessionError, RelayError
from ._buffers import Dropped, ReaderQueue
from ._ledger import Ledger
from ._ray import actor_errors, relay_error

#: A batch as a host's stream carries it: the run the host dropped (first, last, count), and
#: the events' JSON text.
Batch = tuple[tuple[int, int, int] | None, list[str]]


class HostLostError(RelayError):
    """The host of a session was lost before it acknowledged a submission.

    The session runs again on another host when this is raised; the op may or may not have
    been handled before the loss (the event stream tells), and it was not submitted again.
    """


class NoHostError(RelayError):
    """No host can take a session: it cannot be placed, or moved."""


class Hosts(Protocol):
    """What a session asks of its client (:class:`~._client.ClusterClient`)."""

    @property
    def ray(self) -> Any:
        """The ``ray`` module."""

    def host_handle(self, host: str) -> Any:
        """The actor of host ``host``."""

    async def relocate(self, session: ClusterSession) -> bool:
        """Whether ``session`` had moved on (the client then follows it there)."""


class SessionFeed:
    """What arrives for one session in the caller's process, and where the session runs now.

    The client writes it; the session reads it. Invariants: ``queued_seq`` never goes back,
    and no event at or below it is taken again; batches of another epoch than ``epoch`` are
    never taken; while a replay runs, the host's batches wait in order.
    """

    def __init__(self, key: str, host: str, epoch: int) -> None:
        self.key = key
        self.host = host
        """The host the session runs on now."""
        self.epoch = epoch
        """Its epoch there."""
        self.ledger = Ledger()
        """This caller's submissions and the events it saw, for the report of a move."""
        self.queue = ReaderQueue()
        """The events waiting for the reader."""
        self.queued_seq = 0
        """The ``seq`` of the last event taken (a dropped run counts by its last)."""
        self.ended = False
        """Whether the stream has ended: ``shutdown_complete`` arrived, or the session was lost."""
        self.failure: BaseException | None = None
        """Why the session was lost, once it was."""
        self._changed = anyio.Event()
        self._moved = anyio.Event()
        self._replaying = False
        self._held: list[Batch] = []

    # ------------------------------------------------------------------ waiting

    @property
    def changed(self) -> anyio.Event:
        """Set at the next change (an event taken, a move, a loss); take it before waiting."""
        return self._changed

    @property
    def moved(self) -> anyio.Event:
        """Set when the session moves on from where it runs now (or is lost)."""
        return self._moved

    def notify(self) -> None:
        """Wake whoever waits for a change."""
        self._changed.set()
        self._changed = anyio.Event()

    # ------------------------------------------------------------------ what the client writes

    def deliver(self, epoch: int, dropped: tuple[int, int, int] | None, texts: list[str]) -> None:
        """A batch from a host's stream: taken only from the epoch the session is in, and
        after the replay that runs, if one does."""
        if epoch != self.epoch:
            return
        if self._replaying:
            self._held.append((dropped, texts))
            return
        self.take(dropped, texts)

    def hold(self) -> None:
        """A replay begins: the host's batches wait until :meth:`replayed`."""
        self._replaying = True

    def skip_through(self, seq: int) -> None:
        """Nothing up to ``seq`` is for this caller (it follows the session from there)."""
        self.queued_seq = max(self.queued_seq, seq)

    def replayed(self) -> None:
        """The replay is over: take the batches the host sent meanwhile."""
        self._replaying = False
        held, self._held = self._held, []
        for dropped, texts in held:
            self.take(dropped, texts)
        self.notify()

    def take(self, dropped: tuple[int, int, int] | None, texts: list[str]) -> None:
        """Events (JSON text) for the reader, each once by its ``seq``; a run the host dropped
        becomes one warning."""
        if dropped is not None:
            first, last, count = dropped
            if last > self.queued_seq:
                self.queue.push_dropped(Dropped(max(first, self.queued_seq + 1), last, count))
                self.queued_seq = last
        for text in texts:
            data = json.loads(text)
            if data["seq"] <= self.queued_seq:
                continue  # had already (from the rollout, or the host's latest)
            event: p.Event = from_json(data, p.Event)
            self.queued_seq = event.seq
            msg = event.msg
            if isinstance(msg, p.SessionResumed):
                loss = self.ledger.lose()
                msg = attrs.evolve(
                    msg,
                    aborted_turn=msg.aborted_turn or loss.aborted_turn,
                    unhandled=loss.unhandled,
                )
                event = attrs.evolve(event, msg=msg)
            self.ledger.saw(event)
            if isinstance(msg, p.ShutdownComplete):
                self.ended = True
            self.queue.push(event)
        self.notify()

    def move(self, host: str, epoch: int) -> None:
        """The session now runs on ``host`` in ``epoch``: a replay from the rollout follows."""
        self.host, self.epoch = host, epoch
        self._replaying = True
        self._held.clear()
        moved, self._moved = self._moved, anyio.Event()
        moved.set()
        self.notify()

    def fail(self, failure: BaseException) -> None:
        """The session was lost: the stream ends, and ``failure`` is raised to its users."""
        self.failure = failure
        self.ended = True
        self._moved.set()
        self.notify()


class ClusterSession:
    """A session on a deployment's hosts; from :meth:`ClusterClient.open_session` or
    :meth:`ClusterClient.attach`.

    Attributes:
        id: the session id.
        rollout_path: its rollout file.
    """

    def __init__(
        self,
        client: Hosts,
        key: str,
        host: str,
        epoch: int,
        rollout: str | None,
    ) -> None:
        self.id = key
        self.rollout_path = rollout
        self._client = client
        self._feed = SessionFeed(key, host, epoch)
        # Ids this caller makes: its own prefix, so that two callers never make the same one.
        self._id_prefix = f"{key[:8]}-{uuid.uuid4().hex[:4]}"
        self._counter = 0
        self._taken_seq = 0
        self._events_taken = False
        self._detached = False
        self.followed_at: int | None = None
        """The ``seq`` of the session's last event when this caller began to follow it."""

    # ------------------------------------------------------------------ surface

    @property
    def feed(self) -> SessionFeed:
        """What arrives for the session: its client writes it (not for the session's users)."""
        return self._feed

    @property
    def host(self) -> str:
        """The name of the host the session runs on now."""
        return self._feed.host

    @property
    def epoch(self) -> int:
        """The session's epoch on its host (one more at each move)."""
        return self._feed.epoch

    def _next_id(self, sub_id: str | None) -> str:
        if sub_id is not None:
            return sub_id
        self._counter += 1
        return f"{self._id_prefix}-{self._counter}"

    async def submit(self, op: p.Op, *, id: str | None = None) -> str:
        """Submit ``op``; returns the submission id once the host has accepted it.

        Ops are handled in the order their submissions were accepted: await one before sending
        the next when their order matters (Ray does not order concurrent calls to an actor).

        Raises:
            HostLostError: the host was lost before accepting it (it was not submitted again).
            ClosedSessionError: the session has shut down.
        """
        return await self.submit_json(to_json(op), id=id)

    async def submit_json(
        self, payload: Any, *, id: str | None = None, origin: str | None = None
    ) -> str:
        """Submit an op in its JSON form; a bad one is reported as ``error{invalid_op}``."""
        sub_id = self._next_id(id)
        feed = self._feed
        if feed.ended:
            raise ClosedSessionError("the session has shut down")
        moved = feed.moved
        host = self._client.host_handle(self.host)
        call = host.submit.remote(self.id, self.epoch, payload, sub_id, origin)
        outcome, value = await self._until_moved(call, moved)
        if outcome == "done":
            feed.ledger.accept(value)
            return str(value)
        if outcome == "failed":
            await self._after_failure(value, moved)
        self._raise_failure()
        raise HostLostError(
            f"the host of session {self.id} was lost before it accepted submission {sub_id!r}; "
            f"the session now runs on {self.host}, and the op was not submitted again"
        )

    async def _after_failure(self, exc: BaseException, moved: anyio.Event) -> None:
        """A call to the host failed: return once the session has moved, or raise."""
        if isinstance(exc, actor_errors(self._client.ray)):
            await moved.wait()  # the registry moves the sessions of a lost host
            return
        found = relay_error(exc)
        if isinstance(found, ClosedSessionError):
            # The host no longer has the session in this epoch: it moved, or it ended.
            if moved.is_set() or await self._client.relocate(self):
                return
            raise ClosedSessionError("the session has shut down") from None
        if found is not None:
            raise found from None
        raise exc

    async def _until_moved(self, call: Any, moved: anyio.Event) -> tuple[str, Any]:
        """``("done", value)``, ``("failed", error)`` or ``("moved", None)``, whichever first."""
        result: list[tuple[str, Any]] = []
        async with anyio.create_task_group() as tg:

            async def call_it() -> None:
                try:
                    result.append(("done", await call))
                except Exception as exc:
                    result.append(("failed", exc))
                tg.cancel_scope.cancel()

            async def watch() -> None:
                await moved.wait()
                result.append(("moved", None))
                tg.cancel_scope.cancel()

            tg.start_soon(call_it)
            tg.start_soon(watch)
        return result[0]

    def events(self) -> AsyncIterator[p.Event]:
        """The event stream, across hosts; it ends after ``shutdown_complete``. One reader."""
        if self._events_taken:
            raise RuntimeError("the event stream of a session has only one reader")
        self._events_taken = True
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[p.Event]:
        feed = self._feed
        while True:
            event = feed.queue.pop()
            if event is None:
                if feed.ended:
                    break
                waiter = feed.changed
                await waiter.wait()
                continue
            self._taken_seq = event.seq
            yield event
        self._raise_failure()

    async def wait_idle(self) -> int:
        """Wait until the session is idle; returns the ``seq`` of its last event then.

        Compare with :attr:`taken_seq` to know whether the reader has taken them all.
        """
        feed = self._feed
        while True:
            moved = feed.moved
            self._raise_failure()
            if feed.ended:
                return feed.queued_seq
            host = self._client.host_handle(self.host)
            outcome, value = await self._until_moved(
                host.wait_idle.remote(self.id, self.epoch), moved
            )
            if outcome == "done":
                return int(value)
            if outcome == "failed":
                await self._after_failure(value, moved)

    @property
    def taken_seq(self) -> int:
        """The ``seq`` of the last event the reader took."""
        return self._taken_seq

    @property
    def queued(self) -> int:
        """The ``seq`` of the last event that reached this process (taken or waiting for the
        reader; a dropped run counts by its last ``seq``)."""
        return self._feed.queued_seq

    @property
    def closed(self) -> bool:
        """Whether the session has shut down (``shutdown_complete`` arrived)."""
        return self._feed.ended

    @property
    def detached(self) -> bool:
        """Whether the session is left running when this caller lets go of it."""
        return self._detached

    async def shutdown(self) -> None:
        """Submit ``shutdown`` (unless done already) and wait for ``shutdown_complete``.

        A shutdown a lost host had accepted is submitted again to the session's new host."""
        feed = self._feed
        while not feed.ended:
            epoch = self.epoch
            try:
                await self.submit(p.Shutdown())
            except HostLostError:
                continue
            except ClosedSessionError:
                pass
            while not feed.ended and self.epoch == epoch:
                waiter = feed.changed
                await waiter.wait()

    def detach(self) -> None:
        """Leave the session running when this caller lets go of it."""
        self._detached = True

    def _raise_failure(self) -> None:
        if self._feed.failure is not None:
            raise self._feed.failure


__all__ = ["Batch", "ClusterSession", "HostLostError", "Hosts", "NoHostError", "SessionFeed"]
