"""Sub-agents: the children a session spawned, each a session whose actor runs as a task in
this session's nursery, and the cancellation tree over them (docs/agents.md).

Theory of operation. A session's :class:`Agents` holds its children. Spawning opens a child
through the :data:`ChildOpener` the face gave (a session of its own: history, compaction,
rollout), as a task of the parent's task group, then submits its first turn. Every event of the
child reaches the parent synchronously (the child's writer's ``upstream``): the parent reads the
child's status from it with the pure :func:`next_state`, and passes the event on up its own
stream, marked with the child's ``AgentRef``, so the root's one stream shows the
tree.

The promises, and where each is kept:

- An interrupt is a tree: :meth:`Agents.interrupt` halts every child (its running turn, its
  queued turns, its own children), with no ``await``, before the parent's own abort runs.
- A stop is local: :meth:`Agents.close` (or a child's failed turn) shuts that child down, and a
  session's shutdown closes its children first; siblings and the parent go on.
- Every run of a child ends once: :func:`next_state` says when a run has ended, and the parent
  reports it once (``sub_agent_ended``), wakes ``wait`` and, when the model has not read it in a
  ``wait``, leaves a notice in the parent's history between its turns.

Nothing here knows what a turn does or what a command may touch: a child's rules are the
face's business (the opener narrows the parent's rules by the role).
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import anyio
import anyio.abc
import attrs

from .._base import _protocol as p
from .._base._errors import ClosedSessionError
from ._agent_rules import (
    ROOT_PATH,
    AgentRefused,
    ChildRecord,
    ChildSpec,
    Tree,
    next_state,
    notice_text,
)
from ._session_writer import SessionWriter
from ._state import SessionStatistics
from ._writer import RolloutWriter

logger = logging.getLogger("relay.agents")


class ChildSession(Protocol):
    """What a parent uses of a child's session (a :class:`relay.Session`)."""

    @property
    def id(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def agents(self) -> Agents: ...

    def submit_nowait(self, op: p.Op, *, id: str | None = None) -> str: ...

    def halt(self) -> None: ...

    def statistics(self) -> SessionStatistics: ...

    @property
    def rollout(self) -> RolloutWriter | None: ...

    async def wait_closed(self) -> None: ...


ChildOpener = Callable[
    [ChildSpec, Callable[[p.Event], None]], AbstractAsyncContextManager[ChildSession]
]
"""Opens a child (new, or again from its rollout) and runs it until the block exits; the
callable it is given hears every event of the child and its descendants."""


@attrs.frozen
class AgentPlace:
    """Where a session stands in a tree of agents, and how it opens children of its own."""

    tree: Tree
    """What the tree shares."""
    opener: ChildOpener | None = None
    """How it opens a child (None: it cannot)."""
    path: str = ROOT_PATH
    """Its place."""
    depth: int = 0
    """Generations below the root."""
    upstream: Callable[[p.Event], None] | None = None
    """Its parent, told each of its events (None: a root)."""
    link: tuple[str, str, str] | None = None
    """The parent's id, the path and the role, for the rollout's first line (None: a root)."""
    records: tuple[ChildRecord, ...] = ()
    """The children its rollout names, to open again (a resume)."""


# ----------------------------------------------------------------------------- the children


@attrs.define(eq=False)
class Child:
    """One child of a session, open or closed."""

    ref: p.AgentRef
    """Its id and path."""
    depth: int
    """Generations below the root."""
    role: str
    """Its role's name."""
    event_id: str
    """The id its life's events carry in the parent: the turn that spawned it or last gave
    it input."""
    state: p.AgentState = attrs.field(factory=lambda: p.AgentState(p.AgentStatus.PENDING_INIT))
    """Where it is."""
    failed: str | None = None
    """What failed in its running turn so far."""
    session: ChildSession | None = None
    """Its session while it is open."""
    rollout_path: str | None = None
    """Its rollout file, when persistence is on."""
    usage: p.TokenUsage = attrs.field(factory=p.TokenUsage)
    """Its usage and its descendants'."""
    gone: anyio.Event = attrs.field(factory=anyio.Event)
    """Set once its session has shut down (set again for each opening)."""
    unread: p.SubAgentEnded | None = None
    """Its last run's end, while the parent's model has not read it."""
    turn_id: str | None = None
    """Its running turn (an error of another of its submissions fails nothing)."""


class Agents:
    """The children of one session (docs/agents.md)."""

    def __init__(
        self, services: SessionWriter, task_group: anyio.abc.TaskGroup, place: AgentPlace
    ) -> None:
        self._services = services
        self._tg = task_group
        self._opener = place.opener
        self.tree = place.tree
        """What the whole tree shares."""
        self.path = place.path
        """This session's place in the tree."""
        self.depth = place.depth
        """Generations below the root."""
        self.children: dict[str, Child] = {}
        """The children, by id, in spawn order."""
        self._changed = anyio.Event()
        self._spawned = 0
        self._usage = p.TokenUsage()
        self.closing = False
        """Set once the session shuts its children down: no child starts work after."""
        self.idle: Callable[[], bool] = lambda: True
        """Whether the session runs no turn now (its notices wait until it does not)."""

    # ------------------------------------------------------------------ what it knows

    def child(self, key: str) -> Child | None:
        """The child whose id, or path (``/root/1``), is ``key``."""
        found = self.children.get(key)
        if found is None:
            found = next((c for c in self.children.values() if c.ref.path == key), None)
        return found

    def state(self, agent_id: str) -> p.AgentState:
        """The state of child ``agent_id`` (``not_found`` when it is none of this session's)."""
        child = self.child(agent_id)
        return child.state if child is not None else p.AgentState(p.AgentStatus.NOT_FOUND)

    def find(self, agent_id: str) -> ChildSession | None:
        """The open session of ``agent_id``, a descendant at any depth."""
        for child in self.children.values():
            session = child.session
            if session is None:
                continue
            if child.ref.id == agent_id:
                return session
            found = session.agents.find(agent_id)
            if found is not None:
                return found
        return None

    def descendants(self) -> Iterator[ChildSession]:
        """The open sessions below this one, each before its own children."""
        for child in list(self.children.values()):
            if child.session is not None:
                yield child.session
                yield from child.session.agents.descendants()

    # ------------------------------------------------------------------ the tools' verbs

    async def spawn(self, message: str | None, role: str | None, *, event_id: str) -> str:
        """Open a child in ``role`` and give it ``message`` as its first turn; its id.

        Raises:
            AgentRefused: sub-agents are off, a limit is reached (the text names it), the role
                is unknown, or the child could not be opened.
        """
        config = self.tree.config
        role_name = role or "default"
        if self._opener is None:
            raise AgentRefused("sub-agents are not available in this session")
        if config.role(role_name) is None:
            raise AgentRefused(
                f"unknown agent_type {role_name!r} (known: {', '.join(config.role_names())})"
            )
        if self.depth + 1 > config.max_depth:
            raise AgentRefused(
                f"agents.max_depth is {config.max_depth}: an agent at depth {self.depth} "
                "cannot spawn another"
            )
        if self.tree.running >= config.max_threads:
            raise AgentRefused(
                f"agents.max_threads is {config.max_threads}: {self.tree.running} agents are "
                "at work; wait for one or close one first"
            )
        defaults = self._services.state.defaults
        self._spawned += 1
        ref = p.AgentRef(str(uuid.uuid4()), f"{self.path}/{self._spawned}")
        child = Child(ref, self.depth + 1, role_name, event_id)
        spec = ChildSpec(
            ref.id,
            ref.path,
            child.depth,
            self._services.wiring.session_id,
            role_name,
            self._services.wiring.gate.rules,
            defaults.cwd,
            defaults.model,
        )
        self.tree.running += 1  # pending: at work from now on
        self.children[ref.id] = child
        try:
            # Opened whole or not at all: an interrupt meanwhile is read right after.
            with anyio.CancelScope(shield=True):
                await self._open(child, spec)
        except BaseException:
            self._set(child, p.AgentState(p.AgentStatus.SHUTDOWN))
            del self.children[ref.id]
            raise
        self._services.emit(
            event_id,
            p.SubAgentSpawned(
                ref.id,
                ref.path,
                spec.parent_id,
                child.depth,
                role_name,
                spec.model,
                message,
                child.rollout_path,
            ),
        )
        if child.session is None:
            pass  # it ended as soon as it opened, and its end is reported
        elif self.closing:
            # This session shut down while the child opened: the child ends with it.
            _shut(child.session)
        elif anyio.current_effective_deadline() == -math.inf:
            # The turn that spawns it was interrupted while it opened: it gets no work.
            self._set(child, p.AgentState(p.AgentStatus.INTERRUPTED))
            self._report_end(child)
        elif message is not None:
            self._give(child, message, interrupt=False)
        else:
            self._set(child, p.AgentState(p.AgentStatus.COMPLETED))
        return ref.id

    def send(self, agent_id: str, message: str, *, interrupt: bool, event_id: str) -> str:
        """Give a child ``message``: queued behind its running turn, or in place of it with
        ``interrupt``; the submission id.

        Raises:
            AgentRefused: no open child has that id.
        """
        child = self._open_child(agent_id)
        child.event_id = event_id
        return self._give(child, message, interrupt=interrupt)

    async def wait(
        self, ids: Iterable[str], seconds: float
    ) -> tuple[dict[str, p.AgentState], bool]:
        """The states of the children of ``ids`` that are not at work, as soon as one is, or
        nothing at the timeout (``True``); what it returns counts as read by the model."""
        wanted = list(dict.fromkeys(c.ref.id if (c := self.child(k)) else k for k in ids))
        with anyio.move_on_after(seconds):
            while True:
                done = {key: self.state(key) for key in wanted if self.state(key).status.final}
                if done:
                    for key in done:
                        if (child := self.child(key)) is not None:
                            child.unread = None
                    return done, False
                await self._changed.wait()
        return {}, True

    async def close(self, agent_id: str) -> p.AgentState:
        """Shut a child and its descendants down; its state before.

        Raises:
            AgentRefused: no child has that id.
        """
        child = self.child(agent_id)
        if child is None:
            raise AgentRefused(f"no agent has the id {agent_id!r}")
        before = child.state
        session = child.session
        if session is not None and not session.closed:
            _shut(session)
            await child.gone.wait()
        return before

    async def resume(self, agent_id: str) -> p.AgentState:
        """Open a closed child again from its rollout; its state.

        Raises:
            AgentRefused: no child has that id, or it has no rollout to open it from.
        """
        child = self.child(agent_id)
        if child is None:
            raise AgentRefused(f"no agent has the id {agent_id!r}")
        if child.session is not None:
            return child.state
        if child.rollout_path is None:
            raise AgentRefused(f"agent {agent_id} has no rollout to resume it from")
        defaults = self._services.state.defaults
        await self._reopen(child, cwd=defaults.cwd, model=defaults.model)
        return child.state

    # ------------------------------------------------------------------ the tree

    def interrupt(self) -> None:
        """Halt every child's work, and its children's: no ``await``, so nothing of theirs
        runs before it has been told."""
        for child in self.children.values():
            if child.session is not None and not child.session.closed:
                child.session.halt()

    def shut_all(self) -> None:
        """Ask every open descendant to shut down, at once: no ``await``, so none works on while
        this session ends its own turn, nor waits for its parent's loop to pass the word on, as
        an interrupt tells the tree. A child still opening is shut down as soon as it is open."""
        if self.closing:
            return
        self.closing = True
        for child in list(self.children.values()):
            if child.session is not None and not child.session.closed:
                _shut(child.session)

    async def close_all(self) -> None:
        """Shut every open child down (unless :meth:`shut_all` has) and wait until each has
        (its descendants first)."""
        self.shut_all()
        for child in list(self.children.values()):
            await child.gone.wait()

    async def restore(self, records: Iterable[ChildRecord], *, cwd: str, model: str) -> None:
        """Open again, from their rollouts, the children a resumed session's rollout names
        (a closed one stays closed, ``resume_agent`` opens it); a child whose run had not
        ended reads ``interrupted``, reported once."""
        for record in records:
            spawned = record.spawned
            ref = p.AgentRef(spawned.agent_id, spawned.path)
            child = Child(ref, spawned.depth, spawned.role, "resume")
            child.rollout_path = self._found(spawned.rollout_path)
            number = spawned.path.rsplit("/", 1)[-1]
            self._spawned = max(self._spawned, int(number) if number.isdigit() else 0)
            self.children[ref.id] = child
            ended = record.ended
            if ended is None:
                child.state = p.AgentState(p.AgentStatus.INTERRUPTED)
                self._report_end(child)
            else:
                child.state = p.AgentState(ended.status, ended.message)
            if record.closed or child.rollout_path is None:
                if not child.state.status.final:
                    child.state = p.AgentState(p.AgentStatus.SHUTDOWN)
                child.gone.set()
                continue
            try:
                await self._reopen(child, cwd=cwd, model=model, announce=False)
            except AgentRefused as exc:
                self._services.emit("resume", p.WarningEvent(str(exc)))

    def _found(self, recorded: str | None) -> str | None:
        """A child's rollout: the file of that name beside this session's own when there is
        one (a tree copied, or moved, as a whole), else where it was recorded."""
        writer = self._services.recorder.writer
        if recorded is None or writer is None:
            return recorded
        beside = os.path.join(os.path.dirname(writer.path), os.path.basename(recorded))
        return beside if os.path.exists(beside) else recorded

    def take_notices(self) -> list[p.SubAgentEnded]:
        """The ends of runs the model has not read, oldest first; cleared."""
        found = [child.unread for child in self.children.values() if child.unread is not None]
        for child in self.children.values():
            child.unread = None
        return found

    # ------------------------------------------------------------------ inside

    def _open_child(self, agent_id: str) -> Child:
        child = self.child(agent_id)
        if child is None:
            raise AgentRefused(f"no agent has the id {agent_id!r}")
        if child.session is None or child.session.closed:
            raise AgentRefused(f"agent {agent_id} is closed; resume_agent opens it again")
        return child

    def _give(self, child: Child, message: str, *, interrupt: bool) -> str:
        assert child.session is not None
        on_busy = p.OnBusy.REPLACE if interrupt else p.OnBusy.QUEUE
        role = self.tree.config.role(child.role)
        effort = role.model_reasoning_effort if role is not None else None
        turn = p.UserTurn(items=[p.Text(message)], on_busy=on_busy, effort=effort)
        return child.session.submit_nowait(turn)

    async def _open(self, child: Child, spec: ChildSpec) -> None:
        """Start the child's actor in this session's nursery; returns once it is open.

        The child is seen (``child.session``, the tree's listings) only from here on, when its
        opener runs on without an ``await`` to give it its task: an interrupt or a shutdown
        never finds it open with its task still to come."""
        assert self._opener is not None
        try:
            session: ChildSession = await self._tg.start(self._run_child, child, spec)
        except AgentRefused:
            raise
        except Exception as exc:
            logger.exception("cannot open agent %s", child.ref.path)
            raise AgentRefused(f"the agent could not be opened: {exc}") from None
        if not child.gone.is_set():
            child.session = session

    async def _reopen(self, child: Child, *, cwd: str, model: str, announce: bool = True) -> None:
        spec = ChildSpec(
            child.ref.id,
            child.ref.path,
            child.depth,
            self._services.wiring.session_id,
            child.role,
            self._services.wiring.gate.rules,
            cwd,
            model,
            resume_from=child.rollout_path,
        )
        child.gone = anyio.Event()
        try:
            await self._open(child, spec)
        except BaseException:
            child.gone.set()  # it stays closed
            raise
        if announce:
            self._services.emit(
                child.event_id,
                p.SubAgentSpawned(
                    child.ref.id,
                    child.ref.path,
                    spec.parent_id,
                    child.depth,
                    child.role,
                    model,
                    None,
                    child.rollout_path,
                ),
            )

    async def _run_child(
        self,
        child: Child,
        spec: ChildSpec,
        *,
        task_status: anyio.abc.TaskStatus[ChildSession] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        assert self._opener is not None
        started = False
        try:
            async with self._opener(spec, lambda event: self._heard(child, event)) as session:
                writer = session.rollout
                child.rollout_path = str(writer.path) if writer is not None else child.rollout_path
                started = True
                task_status.started(session)
                await session.wait_closed()
        except Exception as exc:
            if not started:
                raise
            # A child's crash is its own end, not its parent's.
            logger.exception("agent %s failed", child.ref.path)
            if not child.state.status.final:
                self._set(child, p.AgentState(p.AgentStatus.ERRORED, repr(exc)))
                self._report_end(child)
        finally:
            child.session = None
            if started and not child.state.status.final:
                self._set(child, p.AgentState(p.AgentStatus.SHUTDOWN))
                self._report_end(child)
            child.gone.set()
            self._wake()

    def _heard(self, child: Child, event: p.Event) -> None:
        """An event of ``child`` (or of a descendant of it): passed on up, and read for the
        child's state."""
        self._services.forward(attrs.evolve(event, agent=event.agent or child.ref))
        if event.agent is not None:
            return
        msg = event.msg
        if isinstance(msg, p.TokenCount) and msg.info is not None:
            usage = msg.tree_total or msg.info.total_token_usage
            # A running total: each child's latest count replaces its earlier one.
            self._usage = self._usage - child.usage + usage
            child.usage = usage
            self._services.roll_up(child.event_id, self._usage)
            return
        if isinstance(msg, p.TurnStarted):
            child.turn_id = msg.turn_id
        elif isinstance(msg, p.ErrorEvent) and event.id != child.turn_id:
            return  # an op refused, not the turn failing
        session = child.session
        ending = isinstance(msg, p.TurnComplete | p.TurnAborted)
        queued = ending and session is not None and session.statistics().queued_turns > 0
        step = next_state(child.state, child.failed, msg, queued=queued)
        child.failed = step.failed
        if step.state != child.state:
            self._set(child, step.state)
        if step.ended:
            self._report_end(child)
            if step.state.status is p.AgentStatus.ERRORED and session is not None:
                # A failure ends the child and its descendants; its siblings go on.
                _shut(session)

    def _set(self, child: Child, state: p.AgentState) -> None:
        was_at_work = not child.state.status.final
        child.state = state
        at_work = not state.status.final
        self.tree.running += int(at_work) - int(was_at_work)
        self._wake()

    def _report_end(self, child: Child) -> None:
        state = child.state
        ended = p.SubAgentEnded(child.ref.id, child.ref.path, state.status, state.message)
        self._services.emit(child.event_id, ended)
        child.unread = ended
        if self.idle():
            self.deliver_notices()

    def deliver_notices(self) -> None:
        """Leave, in the history, a notice of each run's end the model has not read (between
        turns only: a turn in flight never gets a message between a call and its output)."""
        for ended in self.take_notices():
            self._services.record(p.user_message(notice_text(ended)))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


def _shut(session: ChildSession) -> None:
    """Ask ``session`` and every descendant of it to shut down, unless it has begun to already
    (nothing to ask then)."""
    session.agents.shut_all()
    try:
        session.submit_nowait(p.Shutdown())
    except (ClosedSessionError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


__all__ = [
    "AgentPlace",
    "Agents",
    "Child",
    "ChildOpener",
    "ChildSession",
]
