"""A host: one Ray actor's worth of sessions, on the actor's event loop (asyncio).

Theory of operation. The registry starts a host and hands it its sessions: opened new
(:meth:`SessionHost.open`) or taken over from a lost host (:meth:`SessionHost.resume`), each in
an epoch the registry numbers. For every session the host reads the event stream without
pause: each event is numbered (from its epoch's first ``seq``), kept as JSON text in the
session's :class:`~._buffers.Ring` and added to the :class:`~._buffers.Outbox` of every caller
following the session. A caller (a client process) has one stream per host
(:meth:`SessionHost.stream`) that carries, in batches, the events of every session it follows
there; Ray holds the stream back when the caller does not read, and an outbox that fills up
drops its oldest events and says so. Nothing a session emits waits on a caller.

The host holds a lease from the registry and renews it every third of its length. It counts
the lease from when it sent the renewal; once the lease has run out it writes nothing (each
session's rollout writer asks :meth:`SessionHost.holds` before every write), publishes nothing,
and ends its process: its sessions are the registry's to move. A host the registry declared
lost learns it at its next renewal and ends the same way. A host numbers a session's events
only up to the limit the registry granted (renewals extend it), so that a move can start the
new epoch after every number this host may have given out.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import to_json, type_tag
from .._base._config import Config
from .._base._errors import ClosedSessionError, RolloutLockedError
from .._core._writer import Epoch
from ._buffers import Outbox, Ring
from ._checks import HostChecks
from ._leases import caller_timeout, expired, first_seq_after, grant, renew_every
from ._ray import actor_errors, import_ray
from ._trace import host_export, within_context

if TYPE_CHECKING:
    from .._core._session import Session
    from .._otel._export import Export

#: The id of the events a resumed session reports about its move.
RESUMED_EVENT_ID = "resume"
#: How often a resume tries again for the rollout's lock while the lost host may still hold it.
LOCK_POLL_S = 0.05
#: Recorded events a replay sends per item of its stream.
REPLAY_CHUNK = 256


@attrs.define(eq=False)
class _Hosted:
    """One session on a host: its epoch, its latest events, the callers that follow it."""

    key: str
    epoch: int
    limit: int
    """The highest ``seq`` the registry granted."""
    session: Session | None = None
    ready: anyio.Event = attrs.field(factory=anyio.Event)
    failure: BaseException | None = None
    ring: Ring = attrs.field(factory=Ring)
    callers: dict[str, Outbox] = attrs.field(factory=dict)
    last: tuple[int, str, float] | None = None
    """The last event published: ``seq``, type, wall time."""
    running: bool = False
    ended: bool = False
    reported: bool = True
    """Whether the registry has heard of the last event."""
    granted: anyio.Event = attrs.field(factory=anyio.Event)
    floor: int = 0
    """The ``seq`` before the epoch's first: the session's last event until it emits one here."""


@attrs.define(eq=False)
class _Caller:
    """One client process following sessions on this host."""

    outboxes: dict[str, Outbox] = attrs.field(factory=dict)
    epochs: dict[str, int] = attrs.field(factory=dict)
    wake: asyncio.Event = attrs.field(factory=asyncio.Event)
    seen_at: float = attrs.field(factory=time.monotonic)
    """When the caller last called (its renewals included)."""
    gone: bool = False
    """Forgotten for its silence: its stream ends."""


def event_text(event: p.Event, msg_json: str | None) -> str:
    """The JSON text of an event, from its message's when the session made it already."""
    if msg_json is None:
        return json.dumps(to_json(event), ensure_ascii=False, separators=(",", ":"))
    event_id = json.dumps(event.id, ensure_ascii=False)
    return f'{{"id":{event_id},"seq":{event.seq},"msg":{msg_json}}}'


class SessionHost(HostChecks):
    """The sessions of one Ray actor; started and placed by the registry (``_registry.py``).

    Every method a caller uses takes the session's key and the epoch the caller knows: a
    session that moved on is no longer here, whatever the caller believes.
    """

    def __init__(self, name: str, lease_s: float) -> None:
        self.name = name
        self._lease_s = lease_s
        self._lease_until = time.monotonic() + lease_s
        self._registry: Any = None
        self._sessions: dict[str, _Hosted] = {}
        self._callers: dict[str, _Caller] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ray: Any = None
        self._ending = False
        self._export: Export | None = None

    # ------------------------------------------------------------------ lease

    def holds(self) -> bool:
        """Whether this host's lease still holds (by its own clock): it may write and publish."""
        return not self._ending and time.monotonic() < self._lease_until

    async def start(self, registry: Any) -> dict[str, Any]:
        """Begin: hold the lease the registry gives with this call; returns where this runs."""
        sent = time.monotonic()
        self._ray = import_ray()
        self._registry = registry
        self._lease_until = sent + self._lease_s
        self._spawn(self._renew_forever())
        self._export = host_export()
        context = self._ray.get_runtime_context()
        return {"node": context.get_node_id(), "pid": os.getpid()}

    def _tracer_provider(self) -> Any:
        return self._export.provider if self._export is not None else None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _renew_forever(self) -> None:
        errors = actor_errors(self._ray)
        due = time.monotonic()
        while not self._ending:
            # A third of a lease after the last renewal was sent: at once when its reply came
            # later than that (the registry was held up), while the lease still holds.
            await asyncio.sleep(max(0.0, due + renew_every(self._lease_s) - time.monotonic()))
            self._forget_silent_callers()
            if time.monotonic() >= self._lease_until:
                self._end("its lease ran out before it could renew it")
                return
            sent = due = time.monotonic()
            try:
                reply = await asyncio.wait_for(
                    self._registry.renew.remote(self.name, self._report()), self._lease_s
                )
            except TimeoutError:
                continue
            except errors:
                # The registry is gone: nobody can move a session, so nobody can take one over.
                self._lease_until = float("inf")
                continue
            if reply["lost"]:
                self._end("the registry gave its sessions to other hosts")
                return
            self._lease_until = sent + self._lease_s
            self._granted(reply["grants"])

    def _forget_silent_callers(self) -> None:
        """Drop what waits for callers not heard from for :func:`caller_timeout`: a caller that
        died keeps no outbox here, and its stream ends."""
        seen = {caller_id: caller.seen_at for caller_id, caller in self._callers.items()}
        for caller_id in expired(seen, caller_timeout(self._lease_s), time.monotonic()):
            caller = self._callers.pop(caller_id)
            for key in caller.outboxes:
                hosted = self._sessions.get(key)
                if hosted is not None:
                    hosted.callers.pop(caller_id, None)
            caller.outboxes.clear()
            caller.gone = True
            caller.wake.set()

    def _report(self) -> dict[str, tuple[int, str, float, bool, bool]]:
        report: dict[str, tuple[int, str, float, bool, bool]] = {}
        for key, hosted in list(self._sessions.items()):
            if not hosted.reported and hosted.last is not None:
                hosted.reported = True
                seq, kind, at = hosted.last
                report[key] = (seq, kind, at, hosted.running, hosted.ended)
                if hosted.ended:
                    del self._sessions[key]
        return report

    def _granted(self, grants: dict[str, int]) -> None:
        for key, limit in grants.items():
            hosted = self._sessions.get(key)
            if hosted is not None and limit > hosted.limit:
                hosted.limit = limit
                hosted.granted.set()
                hosted.granted = anyio.Event()

    def _end(self, why: str) -> None:
        """Stop writing and publishing at once, then end the process: the sessions are the
        registry's to move, and the rollout locks go with the process."""
        self._ending = True
        print(f"relay host {self.name}: {why}; ending", flush=True)
        asyncio.get_running_loop().call_later(0.05, os._exit, 1)

    # ------------------------------------------------------------------ sessions

    def _get(self, key: str, epoch: int | None = None) -> _Hosted:
        hosted = self._sessions.get(key)
        if hosted is None or hosted.ended or (epoch is not None and hosted.epoch != epoch):
            raise ClosedSessionError(f"session {key} is not on host {self.name}")
        return hosted

    async def _start(
        self, key: str, epoch: int, limit: int, opener: Callable[[], Any], floor: int = 0
    ) -> Session:
        if key in self._sessions and not self._sessions[key].ended:
            raise ClosedSessionError(f"session {key} is already on host {self.name}")
        hosted = _Hosted(key, epoch, limit, floor=floor)
        self._sessions[key] = hosted
        self._spawn(self._run(hosted, opener))
        await hosted.ready.wait()
        if hosted.failure is not None:
            self._sessions.pop(key, None)
            raise hosted.failure
        assert hosted.session is not None
        return hosted.session

    async def _run(self, hosted: _Hosted, opener: Callable[[], Any]) -> None:
        try:
            async with opener() as session:
                session.keep_event_json()
                hosted.session = session
                hosted.ready.set()
                async for event in session.events():
                    while event.seq > hosted.limit:
                        await self._ask_grant(hosted, event.seq)
                    kept = session.event_json(event.seq)
                    self._publish(hosted, event, kept[1] if kept is not None else None)
        except Exception as exc:
            hosted.failure = exc
        finally:
            hosted.ready.set()
            hosted.ended = True
            hosted.reported = False
            for caller in self._callers.values():
                if hosted.key in caller.outboxes:
                    caller.wake.set()

    async def _ask_grant(self, hosted: _Hosted, seq: int) -> None:
        waiter = hosted.granted
        try:
            limit = await self._registry.grant.remote(self.name, hosted.key, seq)
        except actor_errors(self._ray):
            limit = None
            if not self._ending:
                hosted.limit = 2**62  # no registry: nothing can move the session
        if limit is None:
            if hosted.limit < seq:
                await waiter.wait()  # this host is ending
            return
        self._granted({hosted.key: limit})

    def _publish(self, hosted: _Hosted, event: p.Event, msg_json: str | None) -> None:
        if not self.holds():
            return  # a host that lost its lease tells nobody anything
        text = event_text(event, msg_json)
        msg = event.msg
        if event.agent is not None:
            pass  # a sub-agent's turn is not the session's
        elif isinstance(msg, p.TurnStarted):
            hosted.running = True
        elif isinstance(msg, p.TurnComplete | p.TurnAborted):
            hosted.running = False
        hosted.last = (event.seq, type_tag(type(msg)), time.time())
        hosted.reported = False
        hosted.ring.add(event.seq, text)
        for caller_id, outbox in hosted.callers.items():
            outbox.add(event.seq, text)
            caller = self._callers.get(caller_id)
            if caller is not None:
                caller.wake.set()

    async def open(
        self,
        key: str,
        config: Config,
        epoch: int,
        limit: int,
        trace: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Open session ``key`` in ``epoch`` (its first), in the caller's trace context
        ``trace``; returns its rollout path."""
        from .._open import open_session

        lease = Epoch(epoch, first_seq=1, holds=self.holds)
        provider = self._tracer_provider()

        def opener() -> Any:
            return open_session(config, session_id=key, epoch=lease, tracer_provider=provider)

        # The session's task starts in this context: its span is the caller's span's child.
        with within_context(trace):
            session = await self._start(key, epoch, limit, opener)
        rollout = session.rollout
        return {"rollout": str(rollout.path) if rollout is not None else None}

    async def resume(
        self,
        key: str,
        rollout_path: str,
        config: Config,
        epoch: int,
        limit: int,
        lock_wait: float,
        lost_host: str,
        noticed_at: float,
    ) -> dict[str, Any]:
        """Take session ``key`` over from ``lost_host``: resume it from its rollout in
        ``epoch``, numbering its events after ``limit`` (the lost host's grant) and after every
        ``seq`` the rollout records. Returns the new epoch's first ``seq`` and limit."""
        from .._open import resume_session
        from .._rollout._reader import read_rollout

        deadline = time.monotonic() + lock_wait
        while True:
            rollout = await anyio.to_thread.run_sync(
                lambda: read_rollout(rollout_path, for_resume=True)
            )
            first = first_seq_after(limit, rollout.last_seq)
            own_limit = grant(first - 1)
            take_over = time.monotonic() >= deadline
            lease = Epoch(epoch, first_seq=first, holds=self.holds, take_over=take_over)
            events = _reported(rollout.unfinished_turn, lost_host, self.name, noticed_at)
            opener = partial(
                _resume_opener,
                resume_session,
                rollout,
                config,
                events,
                lease,
                self._tracer_provider(),
            )
            try:
                await self._start(key, epoch, own_limit, opener, floor=first - 1)
            except RolloutLockedError:
                # The lost host's process still holds it: until its lease has ended, it may
                # be on its way out; after that, this epoch takes the file over.
                await asyncio.sleep(LOCK_POLL_S)
                continue
            return {"first_seq": first, "limit": own_limit}

    async def submit(
        self, key: str, epoch: int, payload: Any, sub_id: str, origin: str | None
    ) -> str:
        """Submit an op in its JSON form (decoded by the session, in order)."""
        session = self._get(key, epoch).session
        assert session is not None
        return session.submit_json_nowait(payload, id=sub_id, origin=origin)

    async def wait_idle(self, key: str, epoch: int) -> int:
        """Wait until the session is idle; returns the ``seq`` of its last event then."""
        session = self._get(key, epoch).session
        assert session is not None
        await session.wait_idle()
        return session.statistics().last_seq

    async def shutdown_all(self, grace_s: float) -> int:
        """Shut every session down (``shutdown_complete`` written); how many there were."""
        live = [h for h in self._sessions.values() if h.session is not None and not h.ended]
        for hosted in live:
            assert hosted.session is not None
            if not hosted.session.closed:
                hosted.session.submit_nowait(p.Shutdown())
        with anyio.move_on_after(grace_s):
            for hosted in live:
                assert hosted.session is not None
                await hosted.session.wait_closed()
        if self._export is not None:
            # The hosts end next: what they traced goes out first, within a bound.
            await anyio.to_thread.run_sync(self._export.close)
        return len(live)

    # ------------------------------------------------------------------ callers

    async def follow(
        self, caller_id: str, key: str, epoch: int, after: int | None
    ) -> dict[str, int]:
        """Send the session's events after ``seq`` ``after`` (None: from now) to the caller's
        stream. Returns ``first``, the ``seq`` from which the stream has them all: events
        between ``after`` and it were no longer kept here (the rollout has the recorded ones).
        """
        hosted = self._get(key, epoch)
        caller = self._caller(caller_id)
        outbox = Outbox()
        last = hosted.last[0] if hosted.last is not None else hosted.floor
        if after is None:
            after = last
        kept = hosted.ring.after(after)
        for seq, text in kept:
            outbox.add(seq, text)
        first = kept[0][0] if kept else last + 1
        hosted.callers[caller_id] = outbox
        caller.outboxes[key] = outbox
        caller.epochs[key] = epoch
        caller.wake.set()
        return {"first": max(first, after + 1), "after": after, "last": last}

    async def unfollow(self, caller_id: str, key: str) -> None:
        """Stop sending the session's events to the caller."""
        hosted = self._sessions.get(key)
        if hosted is not None:
            hosted.callers.pop(caller_id, None)
        caller = self._callers.get(caller_id)
        if caller is not None:
            caller.seen_at = time.monotonic()
            caller.outboxes.pop(key, None)
            caller.epochs.pop(key, None)

    async def keep(self, caller_id: str) -> bool:
        """A caller renews its place here; False when it had been forgotten (it then follows
        its sessions again)."""
        caller = self._callers.get(caller_id)
        if caller is None:
            return False
        caller.seen_at = time.monotonic()
        return True

    async def callers(self) -> int:
        """How many callers this host keeps events for."""
        return len(self._callers)

    def _caller(self, caller_id: str) -> _Caller:
        caller = self._callers.get(caller_id)
        if caller is None:
            caller = self._callers[caller_id] = _Caller()
        caller.seen_at = time.monotonic()
        return caller

    async def stream(self, caller_id: str) -> AsyncIterator[list[Any]]:
        """The events of every session the caller follows here, in batches of
        ``(session, epoch, dropped, [event JSON])``; it runs until the caller lets go of it,
        or until the host forgets the caller for its silence."""
        caller = self._caller(caller_id)
        try:
            while True:
                await caller.wake.wait()
                caller.wake.clear()
                if caller.gone:
                    return
                batch: list[Any] = []
                for key, outbox in list(caller.outboxes.items()):
                    if outbox:
                        dropped, texts = outbox.take()
                        span = (dropped.first, dropped.last, dropped.count) if dropped else None
                        batch.append((key, caller.epochs.get(key, 0), span, texts))
                    hosted = self._sessions.get(key)
                    if (hosted is None or hosted.ended) and not outbox:
                        caller.outboxes.pop(key, None)
                        caller.epochs.pop(key, None)
                if batch:
                    yield batch
        finally:
            # The caller let go (or was forgotten): nothing is kept for it any more.
            for key in caller.outboxes:
                hosted = self._sessions.get(key)
                if hosted is not None:
                    hosted.callers.pop(caller_id, None)
            if self._callers.get(caller_id) is caller:
                del self._callers[caller_id]

    async def replay(
        self, key: str, rollout_path: str, after: int, before: int
    ) -> AsyncIterator[list[str]]:
        """The recorded events of a session whose ``seq`` is above ``after`` and below
        ``before``, from its rollout, as JSON text in chunks."""
        from .._rollout._lines import EventMsgLine
        from .._rollout._reader import read_rollout

        rollout = await anyio.to_thread.run_sync(lambda: read_rollout(rollout_path))
        chunk: list[str] = []
        for line in rollout.lines:
            if not isinstance(line, EventMsgLine) or line.seq is None:
                continue
            if after < line.seq < before:
                event = p.Event(line.event_id or key, line.seq, line.msg)
                chunk.append(event_text(event, None))
                if len(chunk) >= REPLAY_CHUNK:
                    yield chunk
                    chunk = []
        if chunk:
            yield chunk

    # ------------------------------------------------------------------ plumbing

    async def watch(self) -> None:
        """Never returns: the registry's way to learn at once that this process is gone."""
        await asyncio.Event().wait()

    async def load(self) -> int:
        """How many sessions this host holds."""
        return sum(1 for hosted in self._sessions.values() if not hosted.ended)

    async def pid(self) -> int:
        """The process id of the host."""
        return os.getpid()


def _reported(
    unfinished: tuple[str, float | None] | None, lost_host: str, host: str, noticed_at: float
) -> Callable[[], list[tuple[str, p.EventMsg]]]:
    """What a resumed session reports first: the turn the loss cut (``turn_aborted``, which
    is also recorded, so the rollout shows the turn ended), and the move."""

    def events() -> list[tuple[str, p.EventMsg]]:
        now = time.time()
        found: list[tuple[str, p.EventMsg]] = []
        aborted = unfinished[0] if unfinished is not None else None
        if unfinished is not None:
            turn_id, started_at = unfinished
            elapsed = max(0, int((now - (started_at or now)) * 1000))
            found.append((turn_id, p.TurnAborted(turn_id, p.AbortReason.HOST_LOST, elapsed)))
        resumed = p.SessionResumed(
            lost_host=lost_host,
            host=host,
            aborted_turn=aborted,
            unhandled=(),
            downtime_ms=max(0, int((now - noticed_at) * 1000)),
        )
        found.append((RESUMED_EVENT_ID, resumed))
        return found

    return events


def _resume_opener(
    resume: Any,
    rollout: Any,
    config: Config,
    events: Callable[[], list[tuple[str, p.EventMsg]]],
    lease: Epoch,
    tracer_provider: Any,
) -> Any:
    return resume(
        rollout, config, first_events=events(), epoch=lease, tracer_provider=tracer_provider
    )


def remote_host_class(ray: Any) -> Any:
    """The Ray actor class of hosts."""
    return ray.remote(SessionHost)


__all__ = ["RESUMED_EVENT_ID", "SessionHost", "event_text", "remote_host_class"]
