"""The frozen view a task, a compaction or a backend has of its session."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._base import _protocol as p
from .._base._config import Config, ProviderConfig
from ._budget import TokenBudget
from ._context import TurnSettings
from ._work_state import WorkState


@attrs.frozen(slots=True)
class TaskView:
    """What a task sees of its session at one moment; nothing in it changes afterwards.

    ``history`` is a view of the history as it was when the view was taken: reading it copies
    nothing, and later records do not show in it.
    """

    turn_id: str
    """The id of the submission that started the task."""
    kind: str
    """The task's kind."""
    settings: TurnSettings
    """Model, cwd and effort of the turn."""
    config: Config
    """The session's configuration."""
    provider: ProviderConfig
    """The provider the session's model client talks to (its limits and capabilities)."""
    history: Sequence[p.ResponseItem]
    """The conversation history (for a background compaction: its snapshot)."""
    budget: TokenBudget
    """The token budget of the turn's model."""
    instructions: str
    """The base instructions of every request."""
    work_state: WorkState
    """The work-state record (read it; the session writes it)."""
    window_id: str
    """The id of the current compaction window."""
    last_turn_model: str | None
    """The model of the last regular turn that recorded its context, if any."""
    steered: int
    """Steered inputs waiting to be taken (:meth:`~relay.lowlevel.TaskContext.take_input`)."""


__all__ = ["TaskView"]
