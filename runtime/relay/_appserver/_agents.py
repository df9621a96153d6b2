"""A thread's sub-agents as threads of their own (docs/codex-compat.md, "Sub-agents").

Theory of operation. A root session's stream carries the events of every descendant, each
with ``Event.agent`` set; the app-server shows each descendant as a thread of its own, whose
id is the agent's. :class:`AgentThreads` sorts the stream: the root's own events go to the
root's translator, a descendant's to a translator of its own (made at its first event), so
that a child's ``turn_complete`` ends the child's turn and never the root's. A
``sub_agent_spawned``, which the parent reports before the child's turn starts, announces the
child's thread (``thread/started``, its source ``subAgent.thread_spawn``), once. A child's
approval request is a server request on the child's thread; the decision goes to the root
session, naming the child (``agent_id``), which passes it down.

Plain: no I/O, the time is given with each event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs

from .._base import _protocol as p
from .._codex._items import by_agent_id
from ._notes import Translator, spawn_source, thread_json
from ._rpc import Message, RequestId, notification


@attrs.define
class Child:
    """What the server knows of a descendant's thread."""

    notes: Translator
    """What makes its notifications."""
    spawned: p.SubAgentSpawned | None = None
    """How its parent reported it (None: not seen yet)."""
    created_at: int = 0
    """Unix seconds of its announcement."""
    path: str | None = None
    """Its rollout (its own ``session_configured`` says)."""


@attrs.define
class AgentThreads:
    """The descendants of one root thread, each shown as a thread."""

    root_id: str
    """The root thread: the session whose stream this sorts."""
    model_provider: str
    """The root's provider, which its descendants inherit."""
    version: str
    """relay's version, as a ``Thread`` shows it."""
    mcp_tool: Callable[[str], tuple[str, str] | None] = lambda name: None
    """The root's MCP tools (its descendants have the same)."""
    children: dict[str, Child] = attrs.field(factory=dict)
    """Every descendant seen, by id."""
    ids: dict[str, str] = attrs.field(factory=dict)
    """The descendants' ids by their paths (a model may name an agent by its path)."""

    def translate(self, root: Translator, event: p.Event, now_ms: int) -> list[Message]:
        """The notifications of ``event``, an event of the root's stream."""
        made: list[Message] = []
        match event.msg:
            case p.SubAgentSpawned():
                self.ids[event.msg.path] = event.msg.agent_id
                made += self._announce(event.msg, now_ms, root.cwd)
            case (
                p.ItemStarted(item=p.AgentCallItem() as item)
                | p.ItemCompleted(item=p.AgentCallItem() as item)
            ):
                # A thread is named by its id: the agents a call names by path, by theirs.
                event = attrs.evolve(
                    event, msg=attrs.evolve(event.msg, item=by_agent_id(item, self.ids))
                )
        if event.agent is None:
            return made + root.translate(event, now_ms)
        child = self._child(event.agent.id, root.cwd)
        if isinstance(event.msg, p.SessionConfigured):
            child.path = event.msg.rollout_path
        return made + child.notes.translate(event, now_ms)

    def _child(self, agent_id: str, cwd: str) -> Child:
        child = self.children.get(agent_id)
        if child is None:
            notes = Translator(agent_id, cwd, self.mcp_tool, agent_id=agent_id)
            child = self.children[agent_id] = Child(notes)
        return child

    def _announce(self, spawned: p.SubAgentSpawned, now_ms: int, cwd: str) -> list[Message]:
        """``thread/started`` for the child ``spawned`` reports, the first time it is seen (a
        resumed tree reports its children again)."""
        parent = self.children.get(spawned.parent_id)
        child = self._child(spawned.agent_id, parent.notes.cwd if parent is not None else cwd)
        if child.spawned is not None:
            child.spawned = spawned
            return []
        child.spawned = spawned
        child.created_at = now_ms // 1000
        return [notification("thread/started", {"thread": self.thread_json(spawned.agent_id)})]

    def thread_json(self, agent_id: str) -> Message:
        """The ``Thread`` of the descendant ``agent_id`` (announced: its spawn was seen)."""
        child = self.children[agent_id]
        spawned = child.spawned
        assert spawned is not None
        source = spawn_source(spawned.parent_id, spawned.path, spawned.role, spawned.depth)
        path = child.path or spawned.rollout_path
        return thread_json(
            agent_id,
            cwd=child.notes.cwd or "/",
            model=spawned.model,
            model_provider=self.model_provider,
            created_at=child.created_at,
            path=path,
            version=self.version,
            running=child.notes.running is not None or spawned.prompt is not None,
            preview=spawned.prompt or "",
            spawn=source,
            session_id=self.root_id,
        )

    def translators(self) -> Iterator[Translator]:
        """The descendants' translators."""
        return (child.notes for child in self.children.values())

    def resolve(
        self, request_id: RequestId, *, declined: bool
    ) -> tuple[Translator, str, Message] | None:
        """The client answered approval request ``request_id`` of a descendant: its
        translator, the call's id and ``serverRequest/resolved`` (None: no descendant's)."""
        for notes in self.translators():
            found = notes.resolve(request_id, declined=declined)
            if found is not None:
                return notes, *found
        return None


__all__ = ["AgentThreads", "Child"]
