"""Sub-agents as data: a child's status, its life as events, and the calls that drive it
(docs/agents.md).

Part of the protocol (:mod:`relay._base._protocol` re-exports every name). The statuses and the
tool names are Codex's, so that its clients read them as they are.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

import attrs


class AgentStatus(enum.StrEnum):
    """Where a sub-agent is, in the words of Codex's tools."""

    PENDING_INIT = "pending_init"
    """Spawned; its first turn has not started yet."""
    RUNNING = "running"
    """A turn of it is running (or queued)."""
    COMPLETED = "completed"
    """Its last turn completed; it waits for input."""
    ERRORED = "errored"
    """Its turn failed; it was ended, with its descendants."""
    INTERRUPTED = "interrupted"
    """Its turn was interrupted (or it was running when its tree's process stopped)."""
    SHUTDOWN = "shutdown"
    """It was closed, with its descendants; ``resume_agent`` opens it again."""
    NOT_FOUND = "not_found"
    """No agent of this tree has that id."""

    @property
    def final(self) -> bool:
        """Whether an agent in this status is not at work (a ``wait`` returns on it)."""
        return self not in (AgentStatus.PENDING_INIT, AgentStatus.RUNNING)


def frozen_states(value: Mapping[str, AgentState]) -> Mapping[str, AgentState]:
    """``value`` as a read-only mapping of its own (a converter of frozen classes)."""
    return MappingProxyType(dict(value))


@attrs.frozen
class AgentState:
    """An agent's status and, once it has one, its last message or why it failed."""

    status: AgentStatus
    """Where it is."""
    message: str | None = None
    """Its last agent message (completed), or what failed (errored)."""


@attrs.frozen
class AgentRef:
    """Which sub-agent an event comes from: in the root's stream, every event of a descendant
    carries it (``Event.agent``)."""

    id: str
    """The agent's id: its session id, and its thread id in Codex's clients."""
    path: str
    """Its place in the tree: ``/root`` and one number per generation (``/root/1/2``)."""


@attrs.frozen
class SubAgentSpawned:
    """A session spawned a child; its parent reports it (also on a resume that opens the child
    again)."""

    agent_id: str
    """The child's id."""
    path: str
    """The child's place in the tree."""
    parent_id: str
    """The parent session's id."""
    depth: int
    """Generations below the root (a child of the root: 1)."""
    role: str
    """The role it runs in (``agent_type``; ``default`` when none was named)."""
    model: str
    """The model it talks to."""
    prompt: str | None = None
    """The message it was given, when it was given one."""
    rollout_path: str | None = None
    """Its own rollout file, when persistence is on."""


@attrs.frozen
class SubAgentEnded:
    """A child's work ended: its turn completed, failed or was interrupted, or the child was
    closed. Reported once for each run of the child, by its parent (docs/agents.md)."""

    agent_id: str
    """The child's id."""
    path: str
    """The child's place in the tree."""
    status: AgentStatus
    """How it ended: completed, errored, interrupted or shutdown."""
    message: str | None = None
    """Its last message, or what failed."""


class AgentTool(enum.StrEnum):
    """The tools a model drives its sub-agents with (Codex's names)."""

    SPAWN_AGENT = "spawn_agent"
    SEND_INPUT = "send_input"
    WAIT = "wait"
    CLOSE_AGENT = "close_agent"
    RESUME_AGENT = "resume_agent"


@attrs.frozen
class AgentCallOutcome:
    """What a call of a sub-agent tool touched, beside its output (``ToolResult.agents``)."""

    receivers: tuple[str, ...] = ()
    """The agents the call was for (a spawn's: the new one)."""
    states: Mapping[str, AgentState] = attrs.field(
        factory=dict, converter=frozen_states, hash=False
    )
    """Their states when the call ended, by id."""


__all__ = [
    "frozen_states",
    "AgentCallOutcome",
    "AgentRef",
    "AgentState",
    "AgentStatus",
    "AgentTool",
    "SubAgentEnded",
    "SubAgentSpawned",
]
