"""The plain rules of sub-agents (docs/agents.md): what a child's events make of its state,
what its calls read and write, what a rollout says of the children. No event loop here: the
actor (:mod:`._agents`) applies them, and the tests check them as functions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

import attrs

from .._base import _protocol as p
from .._base._agents_config import AgentsConfig
from .._base._exec_rules import ExecRules
from ._tools import ToolError

#: The path of a root session.
ROOT_PATH = "/root"

#: Codex's wait bounds: the default, and the longest a ``wait`` may ask for (milliseconds).
DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 3_600_000


@attrs.frozen
class ChildSpec:
    """What a child is opened with."""

    agent_id: str
    """Its id (its session id)."""
    path: str
    """Its place in the tree."""
    depth: int
    """Generations below the root."""
    parent_id: str
    """The parent session's id."""
    role: str
    """The role's name."""
    rules: ExecRules
    """The parent's rules when it spawned the child (the opener narrows them by the role)."""
    cwd: str
    """The parent's working directory."""
    model: str
    """The parent's model (the role may name another)."""
    resume_from: str | None = None
    """The child's rollout, to open it again from (``resume_agent``, a resumed tree)."""


@attrs.define(eq=False)
class Tree:
    """What every session of one tree shares: its limits and how many agents are at work."""

    config: AgentsConfig
    """The ``[agents]`` table of the root."""
    instructions: str | None = None
    """The root's developer instructions: each child's role adds its own to these."""
    running: int = 0
    """Agents of the tree at work now (pending or running; the root is not counted)."""


class AgentRefused(ToolError):
    """A call on the sub-agents that cannot be done: the text says why, for the model."""


@attrs.frozen
class ChildRecord:
    """What a rollout says of a child: enough to open it again (docs/agents.md, Resume)."""

    spawned: p.SubAgentSpawned
    """Its latest ``sub_agent_spawned``."""
    ended: p.SubAgentEnded | None
    """Its latest ``sub_agent_ended`` after that, if any."""

    @property
    def closed(self) -> bool:
        """Whether it was closed (or ended by a failure): it is not opened again."""
        return self.ended is not None and self.ended.status in (
            p.AgentStatus.SHUTDOWN,
            p.AgentStatus.ERRORED,
        )


def child_records(events: Iterable[p.EventMsg]) -> tuple[ChildRecord, ...]:
    """The children a session's recorded events name, in spawn order."""
    spawned: dict[str, p.SubAgentSpawned] = {}
    ended: dict[str, p.SubAgentEnded | None] = {}
    for msg in events:
        if isinstance(msg, p.SubAgentSpawned):
            spawned.pop(msg.agent_id, None)
            spawned[msg.agent_id] = msg
            ended[msg.agent_id] = None
        elif isinstance(msg, p.SubAgentEnded) and msg.agent_id in spawned:
            ended[msg.agent_id] = msg
    return tuple(ChildRecord(spawned[key], ended[key]) for key in spawned)


# ----------------------------------------------------------------------------- pure rules


@attrs.frozen
class Step:
    """What one event of a child does to its state (:func:`next_state`)."""

    state: p.AgentState
    """Its state after the event."""
    ended: bool = False
    """The event ends a run of the child: report it, once."""
    failed: str | None = None
    """What failed in its running turn so far."""


def next_state(state: p.AgentState, failed: str | None, msg: p.EventMsg, *, queued: bool) -> Step:
    """A child's state after one of its own events (``queued``: turns wait behind the one that
    ends, so its run goes on). A pure function: tested without an event loop."""
    status = state.status
    match msg:
        case p.TurnStarted():
            return Step(p.AgentState(p.AgentStatus.RUNNING))
        case p.ErrorEvent(message=message) if status is p.AgentStatus.RUNNING:
            return Step(state, failed=message)
        case p.TurnComplete(last_agent_message=last) if status is p.AgentStatus.RUNNING:
            if failed is not None:
                return Step(p.AgentState(p.AgentStatus.ERRORED, failed), ended=True)
            if queued:
                return Step(state)
            return Step(p.AgentState(p.AgentStatus.COMPLETED, last), ended=True)
        case p.TurnAborted(reason=reason) if status is p.AgentStatus.RUNNING:
            if reason is p.AbortReason.REPLACED or queued:
                return Step(state)
            if reason is p.AbortReason.SHUTDOWN:
                return Step(p.AgentState(p.AgentStatus.SHUTDOWN), ended=True)
            return Step(p.AgentState(p.AgentStatus.INTERRUPTED), ended=True)
        case p.ShutdownComplete():
            if not status.final:
                return Step(p.AgentState(p.AgentStatus.SHUTDOWN), ended=True)
            if status is p.AgentStatus.ERRORED:
                return Step(state)
            return Step(p.AgentState(p.AgentStatus.SHUTDOWN, state.message))
        case _:
            return Step(state, failed=failed)


def wait_bound(timeout_ms: object) -> float:
    """The seconds a ``wait`` waits for ``timeout_ms`` (unset: Codex's default; at most its
    longest).

    Raises:
        AgentRefused: not a non-negative number.
    """
    if timeout_ms is None:
        return DEFAULT_WAIT_MS / 1000
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float):
        raise AgentRefused("timeout_ms must be a number of milliseconds")
    if not timeout_ms >= 0 or math.isinf(timeout_ms):
        raise AgentRefused("timeout_ms must be a number of milliseconds, 0 or more")
    return min(timeout_ms, MAX_WAIT_MS) / 1000


def notice_text(ended: p.SubAgentEnded) -> str:
    """The message a parent's history gets for a child's end the model has not read."""
    body = {
        "agent_id": ended.agent_id,
        "path": ended.path,
        "status": status_json(p.AgentState(ended.status, ended.message)),
    }
    return (
        f"<subagent_notification>\n{json.dumps(body, ensure_ascii=False)}\n</subagent_notification>"
    )


def status_json(state: p.AgentState) -> object:
    """A state as Codex's tools write it: a name, or ``{"completed": message}`` and
    ``{"errored": why}``."""
    if state.status is p.AgentStatus.COMPLETED:
        return {"completed": state.message}
    if state.status is p.AgentStatus.ERRORED:
        return {"errored": state.message or ""}
    return state.status.value


def outcome(receivers: Iterable[str], states: Mapping[str, p.AgentState]) -> p.AgentCallOutcome:
    """What a call of a sub-agent tool touched (``ToolResult.agents``)."""
    return p.AgentCallOutcome(tuple(receivers), states)


def state_json(states: Mapping[str, p.AgentState]) -> dict[str, object]:
    """States by id as Codex's ``wait`` writes them."""
    return {key: status_json(state) for key, state in states.items()}


__all__ = [
    "DEFAULT_WAIT_MS",
    "MAX_WAIT_MS",
    "ROOT_PATH",
    "AgentRefused",
    "ChildRecord",
    "ChildSpec",
    "Step",
    "Tree",
    "child_records",
    "next_state",
    "notice_text",
    "outcome",
    "state_json",
    "status_json",
    "wait_bound",
]
