"""The rollouts of a session's sub-agents, found from its own (``relay show``, its timeline).

A parent's rollout records each child it spawned in a ``sub_agent_spawned`` line, with the
path of the child's own rollout, and each end of a child's work in a ``sub_agent_ended`` line.
A child's rollout may record children of its own. :func:`spawns` and :func:`ends` read those
lines; :func:`child_rollout` reads a child's file, or says why it cannot.

A tree of rollouts is usually moved as a whole (the rollout directory copied elsewhere): a
child's file not found where it was written is looked for beside its parent's, by its name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs

from .._base import _protocol as p
from .._base._errors import RolloutError
from .._rollout._lines import EventMsgLine, Rollout
from .._rollout._reader import read_rollout


@attrs.frozen
class Unread:
    """Why a child's rollout is not shown."""

    kind: str
    """``not_recorded`` (the child kept no rollout), ``missing``, ``unreadable``, or
    ``repeated`` (the file is one already shown above it: a loop); the transcript adds
    ``deep`` (nested past its bound)."""
    reason: str
    """The same, said to a person."""


@attrs.frozen
class Spawn:
    """A child as its parent's rollout records it: its first ``sub_agent_spawned`` line."""

    spawned: p.SubAgentSpawned
    time: str | None
    """When the parent spawned it."""
    turn_id: str | None
    """The parent's turn that spawned it (None: outside any turn, as on a resume)."""


def spawns(rollout: Rollout) -> list[Spawn]:
    """The children ``rollout`` records, in the order they were first spawned (a resume that
    opens a child again records it again: it is listed once)."""
    found: dict[str, Spawn] = {}
    turn: str | None = None
    for time, msg in _events(rollout):
        match msg:
            case p.TurnStarted(turn_id=turn_id):
                turn = turn_id
            case p.TurnComplete() | p.TurnAborted() | p.ShutdownComplete():
                turn = None
            case p.SubAgentSpawned(agent_id=agent_id) if agent_id not in found:
                found[agent_id] = Spawn(msg, time, turn)
            case _:
                pass
    return list(found.values())


def ends(rollout: Rollout) -> dict[str, list[tuple[str | None, p.SubAgentEnded]]]:
    """Each child's ``sub_agent_ended`` lines with their times, by the child's id (one for
    each run of the child: an input sent after it ended runs it again)."""
    found: dict[str, list[tuple[str | None, p.SubAgentEnded]]] = {}
    for time, msg in _events(rollout):
        if isinstance(msg, p.SubAgentEnded):
            found.setdefault(msg.agent_id, []).append((time, msg))
    return found


def _events(rollout: Rollout) -> Iterator[tuple[str | None, p.EventMsg]]:
    for line in rollout.lines:
        if isinstance(line, EventMsgLine):
            yield line.timestamp, line.msg


def child_rollout(spawned: p.SubAgentSpawned, parent: Rollout, seen: set[Path]) -> Rollout | Unread:
    """The child's rollout, read; or why not. ``seen`` holds the files already shown above
    it (this one is added): a file met again is not read twice."""
    recorded = spawned.rollout_path
    if recorded is None:
        return Unread("not_recorded", "it kept no rollout (persistence was off)")
    candidates = [Path(recorded)]
    if parent.path is not None:
        beside = parent.path.parent
        if not candidates[0].is_absolute():
            candidates.append(beside / recorded)
        candidates.append(beside / Path(recorded).name)
    for candidate in candidates:
        if not candidate.is_file():
            continue
        resolved = candidate.resolve()
        if resolved in seen:
            return Unread("repeated", f"its rollout {candidate} is shown above (a loop)")
        try:
            child = read_rollout(candidate)
        except RolloutError as exc:
            return Unread("unreadable", str(exc))
        seen.add(resolved)
        return child
    return Unread("missing", f"its rollout {recorded} is missing")


__all__ = ["Spawn", "Unread", "child_rollout", "ends", "spawns"]
