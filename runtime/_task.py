"""Task kinds, the registry that ``tasks`` fills, and the handle of a running task.

``runtime`` never imports ``tasks``: the ``tasks`` distribution registers its kinds through the
``relay.tasks`` entry point, loaded the first time a kind is asked for.

Theory of operation of a :class:`TaskHandle`: a task runs inside its own cancel scope. Its
``status`` moves RUNNING → ABORTING (someone asked it to stop) → ENDED, or RUNNING → ENDED when it
returns by itself. Exactly one side reports the terminal event: the task's runner when the task
ended on its own and nobody asked it to stop, the aborter otherwise. Once the terminal event is
out the handle is ``detached``: whatever the task still emits or records is dropped, so nothing
carries the turn id after its terminal event even if the task lingers in a shielded section.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import attrs

from . import _protocol as p
from ._context import TurnSettings

if TYPE_CHECKING:
    from ._task_context import TaskContext


class TaskKind(enum.StrEnum):
    """The kinds of work a session runs as tasks."""

    REGULAR = "regular"
    COMPACT = "compact"


class SessionTask(Protocol):
    """One piece of work of a session: a regular turn or a compaction."""

    @property
    def kind(self) -> TaskKind:
        """Which kind of task this is."""
        ...

    async def run(self, ctx: TaskContext) -> str | None:
        """Do the work; return the last agent message, if any."""
        ...


TaskFactory = Callable[..., SessionTask]

_factories: dict[TaskKind, TaskFactory] = {}
_loaded = False


def register_task_kind(kind: TaskKind, factory: TaskFactory) -> None:
    """Register the factory of a task kind (called by the ``tasks`` package)."""
    _factories[kind] = factory


def new_task(kind: TaskKind, **kwargs: Any) -> SessionTask:
    """A new task of ``kind``; raises LookupError if no package provides it."""
    global _loaded
    if kind not in _factories and not _loaded:
        _loaded = True
        for entry in entry_points(group="relay.tasks"):
            entry.load()(register_task_kind)
    try:
        factory = _factories[kind]
    except KeyError:
        raise LookupError(f"no task kind {kind.value!r} is registered") from None
    return factory(**kwargs)


class TaskStatus(enum.Enum):
    """Where a task is in its life."""

    RUNNING = "running"
    ABORTING = "aborting"
    ENDED = "ended"


@attrs.define(eq=False)
class TaskHandle:
    """A running task: its cancel scope, its finished event and its status."""

    turn_id: str
    """The id of the submission that started it."""
    task: SessionTask
    """The work."""
    settings: TurnSettings
    """Model, cwd and effort of the turn."""
    started: float
    """``anyio.current_time()`` at start, for durations."""
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    """Cancelled when the task is asked to stop."""
    finished: anyio.Event = attrs.field(factory=anyio.Event)
    """Set when the task's code has returned or raised."""
    status: TaskStatus = TaskStatus.RUNNING
    """Where it is."""
    abort_reason: p.AbortReason | None = None
    """Why it was asked to stop, if it was."""
    detached: bool = False
    """True once its terminal event is out: later emits and records are dropped."""
    pending_input: list[tuple[p.InputItem, ...]] = attrs.field(factory=list)
    """Steered input not yet picked up by the turn."""
    end_reason: p.AbortReason | None = None
    """Set by the task itself to end with ``turn_aborted`` (a hook stopped it)."""

    def duration_ms(self) -> int:
        """Milliseconds since start."""
        return round((anyio.current_time() - self.started) * 1000)
