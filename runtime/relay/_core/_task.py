"""The task interface, the task kinds a session is given, and the handle of a running task.

A task is one piece of work of a session (a regular turn, a compaction). It sees the session
only through its :class:`~relay.lowlevel.TaskContext`. What differs between kinds is on the task
itself: whether it takes steered input (:attr:`SessionTask.steerable`) and what it leaves
behind when aborted (:meth:`SessionTask.abort`); the session never asks which kind it runs.

The session core never imports :mod:`relay.tasks` at module level: a session is given its task
factories as a :class:`TaskKinds` (``open_session(task_kinds=...)``); only the default is
looked up, once per session, in relay's own task package.

Theory of operation of a :class:`TaskHandle`: a task runs inside its own cancel scope. Its
``status`` moves RUNNING → ABORTING (someone asked it to stop) → ENDED, or RUNNING → ENDED when it
returns by itself. Exactly one side reports the terminal event: the task's runner when the task
ended on its own and nobody asked it to stop, the aborter otherwise. Once the terminal event is
out the handle is ``detached``: whatever the task still emits or records is dropped, so nothing
carries the turn id after its terminal event even if the task lingers in a shielded section.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol

import anyio
import attrs

from .._base import _protocol as p
from ._context import TurnSettings

if TYPE_CHECKING:
    from ._task_context import TaskContext


class TaskKind(enum.StrEnum):
    """The kinds of work a session runs as tasks."""

    REGULAR = "regular"
    COMPACT = "compact"


class SessionTask(Protocol):
    """One piece of work of a session: a regular turn or a compaction.

    Subclass it to inherit the defaults of :attr:`steerable` and :meth:`abort`.
    """

    @property
    def kind(self) -> TaskKind:
        """Which kind of task this is (reported in :class:`~relay.SessionStatistics`)."""
        ...

    @property
    def steerable(self) -> bool:
        """Whether input submitted with ``on_busy=steer`` joins this task while it runs.

        When it does not, such input is refused with ``error{active_turn_not_steerable}``.
        """
        return False

    async def run(self, ctx: TaskContext) -> str | None:
        """Do the work; return the last agent message, if any."""
        ...

    def abort(self, ctx: TaskContext, reason: p.AbortReason) -> None:
        """Leave the history consistent after this task was aborted.

        Called once, after the task stopped (or its grace period ran out) and before
        ``turn_aborted`` is emitted; ``ctx`` still records and emits. It must not block: the
        session's bookkeeping around an abort has no ``await`` in it.
        """
        del ctx, reason


class RegularTaskFactory(Protocol):
    """Makes the task of a user turn from its input."""

    def __call__(self, items: tuple[p.InputItem, ...], /) -> SessionTask: ...


class CompactTaskFactory(Protocol):
    """Makes the task of a ``compact`` op from its extra instructions."""

    def __call__(self, instructions: str | None, /) -> SessionTask: ...


@attrs.frozen
class TaskKinds:
    """The task factories a session starts its work with."""

    regular: RegularTaskFactory
    """For ``user_turn`` and ``user_input``."""
    compact: CompactTaskFactory
    """For ``compact``."""


def builtin_task_kinds() -> TaskKinds:
    """relay's own task kinds, from :mod:`relay.tasks` (imported when first asked for)."""
    from ..tasks import TASK_KINDS

    return TASK_KINDS


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
    detached: bool = False
    """True once its terminal event is out: later emits and records are dropped."""
    pending_input: list[tuple[p.InputItem, ...]] = attrs.field(factory=list)
    """Steered input not yet picked up by the turn."""
    ends_aborted: p.AbortReason | None = None
    """Set by the task itself to end with ``turn_aborted{reason}`` when it returns (a hook
    stopped it)."""

    def duration_ms(self) -> int:
        """Milliseconds since start."""
        return round((anyio.current_time() - self.started) * 1000)
