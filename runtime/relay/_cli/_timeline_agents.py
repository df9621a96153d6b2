"""A session's sub-agents on its timeline page (docs/timeline.md): who spawned whom, in which
turn, when each started and ended, how, and what it did.

:func:`read_agents` walks the tree from the root's rollout: each ``sub_agent_spawned`` line
names a child and its rollout, each ``sub_agent_ended`` line how a run of it ended, and the
child's own rollout (read through ``load``, from the files by default) gives its times and
figures and its own children. The HTML is drawn by :mod:`._timeline_agents_page`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs

from .._base import _protocol as p
from .._rollout._lines import EventMsgLine, ResponseItemLine, Rollout
from ._agent_rollouts import Spawn, Unread, child_rollout, ends, spawns

#: The most sub-agents a page lists (in the tree's order); the others are counted.
MAX_AGENTS = 300
#: Characters of a sub-agent's task and of its last message kept.
TEXT_CHARS = 300

#: How a child's rollout is read: the child's spawn line and its parent's rollout give its
#: rollout, or why it cannot be read.
Load = Callable[[p.SubAgentSpawned, Rollout], "Rollout | Unread"]


@attrs.frozen
class Agent:
    """One sub-agent of the session, at any depth."""

    id: str
    path: str
    """Its place in the tree (``/root/1/2``)."""
    parent_id: str
    """The session that spawned it: the root's id, or another agent's."""
    depth: int
    role: str
    model: str
    prompt: str | None
    """The start of the task it was given."""
    turn_id: str | None
    """The parent's turn that spawned it."""
    spawned: str | None
    """When its parent spawned it."""
    started: str | None
    """The first line of its rollout (else when it was spawned)."""
    ended: str | None
    """The end of its last turn in its rollout (else its parent's last ``sub_agent_ended``
    for it, else the last line of its rollout)."""
    status: str
    """How its last run ended (``completed``, ``errored``, ``interrupted``, ``shutdown``), or
    ``running``: no end is recorded (it was at work when its parent's rollout stopped)."""
    message: str | None
    """The start of its last message, or of what failed."""
    runs: int
    """How many times its work ended (an input sent after an end runs it again)."""
    rollout: str | None
    """Its rollout file, as its parent recorded it."""
    rollout_state: str
    """``read``; ``not_recorded`` (it kept none), ``missing``, ``unreadable``, or
    ``repeated`` (a file already read above it)."""
    turns: int = 0
    """Its turns, model calls, tool calls and ``error`` events, from its rollout."""
    model_calls: int = 0
    tool_calls: int = 0
    errors: int = 0


def _cut(text: str | None) -> str | None:
    if text is None:
        return None
    text = " ".join(text.split())
    return text[: TEXT_CHARS - 1] + "…" if len(text) > TEXT_CHARS else text


def _agent(
    spawn: Spawn, runs: list[tuple[str | None, p.SubAgentEnded]], child: Rollout | Unread
) -> Agent:
    spawned = spawn.spawned
    last_time, last = runs[-1] if runs else (None, None)
    figures: dict[str, int] = {}
    started = ended = None
    stamps: list[str] = []
    if isinstance(child, Rollout):
        figures = _figures(child)
        stamps = [line.timestamp for line in child.lines if line.timestamp]
        # Its work ended with its last turn: the parent hears of it a little later, and the
        # file's last line may be the shutdown of the whole tree.
        turn_ends = [
            line.timestamp
            for line in child.lines
            if isinstance(line, EventMsgLine)
            and isinstance(line.msg, p.TurnComplete | p.TurnAborted)
            and line.timestamp
        ]
        started = stamps[0] if stamps else None
        ended = turn_ends[-1] if turn_ends else None
    return Agent(
        id=spawned.agent_id,
        path=spawned.path,
        parent_id=spawned.parent_id,
        depth=spawned.depth,
        role=spawned.role,
        model=spawned.model,
        prompt=_cut(spawned.prompt),
        turn_id=spawn.turn_id,
        spawned=spawn.time,
        started=started or spawn.time,
        ended=ended or last_time or (stamps[-1] if stamps else None),
        status=last.status.value if last is not None else "running",
        message=_cut(last.message) if last is not None else None,
        runs=len(runs),
        rollout=spawned.rollout_path,
        rollout_state="read" if isinstance(child, Rollout) else child.kind,
        **figures,
    )


def _figures(rollout: Rollout) -> dict[str, int]:
    """A child's turns, model calls, tool calls and errors."""
    figures = {"turns": 0, "model_calls": 0, "tool_calls": 0, "errors": 0}
    for line in rollout.lines:
        match line:
            case EventMsgLine(msg=p.TurnStarted()):
                figures["turns"] += 1
            case EventMsgLine(msg=p.TokenCount(info=p.TokenUsageInfo(estimated=False))):
                figures["model_calls"] += 1
            case EventMsgLine(msg=p.ErrorEvent()):
                figures["errors"] += 1
            case ResponseItemLine(item=p.FunctionCall() | p.CustomToolCall()):
                figures["tool_calls"] += 1
            case _:
                pass
    return figures


def read_agents(
    rollout: Rollout, load: Load | None = None, *, limit: int = MAX_AGENTS
) -> tuple[tuple[Agent, ...], int]:
    """The sub-agents of ``rollout``'s session at every depth, in the tree's order (each
    followed by its own), at most ``limit`` of them; and how many there are in the rollouts
    read. ``load`` reads a child's rollout (by default its file: :func:`child_rollout`)."""
    if load is None:
        seen: set[Path] = {rollout.path.resolve()} if rollout.path is not None else set()

        def load(spawned: p.SubAgentSpawned, parent: Rollout) -> Rollout | Unread:
            return child_rollout(spawned, parent, seen)

    found: list[Agent] = []
    total = 0
    # Depth first with a stack rather than recursion: a chain of rollouts is as long as the
    # files make it. Each parent's children go on reversed, so the first is taken first.
    queue = _children(rollout)
    while queue:
        spawn, runs, parent = queue.pop()
        total += 1
        if len(found) >= limit:
            continue
        child = load(spawn.spawned, parent)
        found.append(_agent(spawn, runs, child))
        if isinstance(child, Rollout):
            queue += _children(child)
    return tuple(found), total


def _children(
    parent: Rollout,
) -> list[tuple[Spawn, list[tuple[str | None, p.SubAgentEnded]], Rollout]]:
    """``parent``'s children with their ends, last first (the order a stack takes them)."""
    ended = ends(parent)
    return [(spawn, ended.get(spawn.spawned.agent_id, []), parent) for spawn in spawns(parent)][
        ::-1
    ]


__all__ = ["MAX_AGENTS", "TEXT_CHARS", "Agent", "Load", "read_agents"]
