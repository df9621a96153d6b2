"""The handle of a running task, and how a task ends its turn early.

The task interface and the port a task sees the session through are in :mod:`._port`; this
module is what the session keeps of a task while it runs.

Theory of operation of a :class:`TaskHandle`: a task runs inside its own cancel scope. Its
``status`` moves RUNNING → ABORTING (someone asked it to stop) → ENDED, or RUNNING → ENDED when it
returns by itself. Exactly one side reports the terminal event: the task's runner when the task
ended on its own and nobody asked it to stop, the aborter otherwise. Once the terminal event is
out the handle is ``detached``: whatever the task still emits or records is dropped, so nothing
carries the turn id after its terminal event even if the task lingers in a shielded section.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any, Generic, TypeVar

import anyio
import attrs

from .._base import _protocol as p
from .._base._errors import InvalidOpError, RelayError
from ._context import TurnSettings

#: The task a handle runs (the session's :class:`~relay.SessionTask`).
T = TypeVar("T")


class StopTurn(RelayError):
    """Raised in a task to end its turn now; whatever went wrong was reported already.

    The turn ends with ``turn_complete``, or with ``turn_aborted{reason}`` when ``reason`` is
    given (a compaction hook stopped it). The task port raises it itself when the turn cannot
    go on: a compaction before a request failed, or a hook stopped it.
    """

    def __init__(self, reason: p.AbortReason | None = None) -> None:
        super().__init__(reason.value if reason is not None else "the turn ends")
        self.reason = reason


@attrs.frozen
class TurnResult:
    """What a task's ``run`` may return instead of the turn's last agent message: that
    message and the turn's structured output (``turn_complete``'s ``output``).

    Example, a task that answers in JSON of its own::

        async def run(self, ctx: relay.TaskContext) -> relay.TurnResult:
            ctx.emit(relay.AgentMessage('{"ok": true}'))
            return relay.TurnResult('{"ok": true}', {"ok": True})
    """

    message: str | None
    """The turn's last agent message (None: the last one the task emitted, if any)."""
    output: Any = attrs.field(default=None, hash=False)
    """The turn's structured output, a JSON value (None: none)."""


def strayed(exc: BaseException) -> bool:
    """Whether ``exc``, out of a task's or a tool's own code, is that code's failure rather
    than a stop relay asked for: a ``SystemExit`` (``sys.exit`` in a library the code calls),
    or a cancellation that no cancel scope made (an asyncio task someone else cancelled, which
    the code awaited). Neither may end the session: the task or the tool failed."""
    if isinstance(exc, SystemExit):
        return True
    if not isinstance(exc, asyncio.CancelledError):
        return False
    if not isinstance(exc, anyio.get_cancelled_exc_class()):
        return True  # asyncio's cancellation under trio: nothing of trio's made it
    task = asyncio.current_task()
    # A cancel scope cancels by cancelling the task, which it counts until it is delivered.
    return task is not None and task.cancelling() == 0


class TaskStatus(enum.Enum):
    """Where a task is in its life."""

    RUNNING = "running"
    ABORTING = "aborting"
    ENDED = "ended"


@attrs.define(eq=False)
class TaskHandle(Generic[T]):
    """A running task: its cancel scope, its finished event and its status."""

    turn_id: str
    """The id of the submission that started it."""
    task: T
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
    """Set when the turn is to end with ``turn_aborted{reason}`` (a hook stopped it)."""
    last_message: str | None = None
    """The text of the last ``agent_message`` the task emitted."""
    found: dict[str, str | None] = attrs.field(factory=dict)
    """Each file a patch of the turn changed, as the turn found it (None: it did not exist):
    what the turn's diff starts from."""

    def duration_ms(self) -> int:
        """Milliseconds since start."""
        return round((anyio.current_time() - self.started) * 1000)


#: The op types relay's own tasks serve (besides them, a session's task factories serve
#: custom ops).
TASK_OP_TYPES = frozenset({"user_turn", "user_input", "compact"})


def op_type(op: p.Op) -> str:
    """The type of the task an op starts (a custom op's is its own).

    Raises:
        InvalidOpError: no task serves ``op``.
    """
    match op:
        case p.UserTurn():
            return "user_turn"
        case p.UserInput():
            return "user_input"
        case p.Compact():
            return "compact"
        case p.CustomOp(type=op_type):
            return op_type
        case _:
            raise InvalidOpError(f"no task serves {type(op).__name__}")


__all__ = [
    "TASK_OP_TYPES",
    "StopTurn",
    "TaskHandle",
    "TaskStatus",
    "TurnResult",
    "op_type",
    "strayed",
]
