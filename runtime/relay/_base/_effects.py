"""What the model's calls do, as data: how a call ended, the files a patch changes, the plan
(docs/protocol.md).

Part of the protocol (:mod:`relay._base._protocol` re-exports every name); kept apart so that
each module of the ground floor stays small. A call's output is text the model reads; these
are what a program reads of the same call, so that no face parses the output back.
"""

from __future__ import annotations

import enum

import attrs

from ._agent_events import AgentCallOutcome, AgentRef
from ._items import as_tuple

# --------------------------------------------------------------------------- a call's end


class CallStatus(enum.StrEnum):
    """How a tool call ended."""

    COMPLETED = "completed"
    """It ran and succeeded (a command exited 0)."""
    FAILED = "failed"
    """It ran and failed (a command exited non-zero or timed out, a tool raised), or could not
    run (bad arguments, a program that does not start), or its turn ended first."""
    DECLINED = "declined"
    """It never ran: an approval was denied, or the rules refused it."""


@attrs.frozen
class ToolResult:
    """How a tool call ended, beside the output the model reads."""

    status: CallStatus
    """Completed, failed or declined."""
    exit_code: int | None = None
    """A command's exit status (under the sandbox, 128 + N for a signal N); None when it did
    not exit by itself or is not a command."""
    timed_out: bool = False
    """A command ran out of time and was killed."""
    duration_ms: int | None = None
    """How long it ran, when it ran."""
    sandboxed: bool = False
    """A command ran in the sandbox."""
    printed: str | None = None
    """What a command printed, standard output and error as they came (cut at the output
    limit), without the notes relay adds for the model."""
    agents: AgentCallOutcome | None = None
    """The sub-agents a call of a sub-agent tool touched, and their states."""


# --------------------------------------------------------------------------- patches


class ChangeKind(enum.StrEnum):
    """What a patch does to a file."""

    ADD = "add"
    DELETE = "delete"
    UPDATE = "update"


@attrs.frozen
class FileChange:
    """One file a patch changes."""

    path: str
    """The file, absolute."""
    kind: ChangeKind
    """Added, deleted or updated."""
    diff: str
    """The change as a unified diff."""
    move_path: str | None = None
    """Where an updated file moves to, absolute."""


@attrs.frozen
class ApplyPatchApprovalRequest:
    """A patch waits for a decision (a ``patch_approval`` op, or the session's callback)
    before any file of it changes."""

    call_id: str
    """The model's call id; the ``patch_approval`` op names it as its ``id``."""
    turn_id: str
    """The turn that made the call."""
    changes: tuple[FileChange, ...] = attrs.field(converter=as_tuple)
    """The files it would change."""
    reason: str | None = None
    """Why it is asked (the policy, a path outside the writable roots)."""
    grant_root: str | None = None
    """A folder whose later patches an ``approved_for_session`` lets through unasked."""
    agent: AgentRef | None = None
    """The sub-agent whose patch it is, when the session's callback decides for its tree."""


@attrs.frozen
class PatchApplyBegin:
    """A patch is being applied."""

    call_id: str
    """The model's call id."""
    turn_id: str
    """The turn that made the call."""
    changes: tuple[FileChange, ...] = attrs.field(converter=as_tuple)
    """The files it changes."""
    auto_approved: bool = False
    """It was let through without asking anyone."""


@attrs.frozen
class PatchApplyEnd:
    """A patch was applied, whole, or not at all."""

    call_id: str
    """The model's call id."""
    turn_id: str
    """The turn that made the call."""
    success: bool
    """Every change was made; else none was."""
    changes: tuple[FileChange, ...] = attrs.field(converter=as_tuple)
    """The files it changed (or would have)."""
    message: str = ""
    """What the model reads: the files changed, or what did not apply."""


@attrs.frozen
class TurnDiff:
    """Every change the turn's patches made so far, as one unified diff."""

    turn_id: str
    """The turn id."""
    unified_diff: str
    """The diff, from each file as the turn found it."""


# --------------------------------------------------------------------------- the plan


class StepStatus(enum.StrEnum):
    """Where a step of the plan stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


@attrs.frozen
class PlanStep:
    """One step of the model's plan."""

    step: str
    """What the step does."""
    status: StepStatus
    """Where it stands."""


@attrs.frozen
class PlanUpdate:
    """The model's plan, whole, as it stands now (``update_plan``)."""

    turn_id: str
    """The turn that set it."""
    plan: tuple[PlanStep, ...] = attrs.field(converter=as_tuple)
    """The steps, in order."""
    explanation: str | None = None
    """Why it changed."""


# --------------------------------------------------------------------------- streams


class OutputStream(enum.StrEnum):
    """Which stream of a command."""

    STDOUT = "stdout"
    STDERR = "stderr"


@attrs.frozen
class ExecCommandOutputDelta:
    """A piece of what a running command printed, as it came."""

    turn_id: str
    """The turn id."""
    call_id: str
    """The ``shell`` call's id."""
    stream: OutputStream
    """Standard output or error."""
    chunk: str
    """The text (a character split across two reads comes whole in the second)."""


@attrs.frozen
class ReasoningSummaryDelta:
    """A piece of the model's reasoning summary as it streams."""

    turn_id: str
    """The turn id."""
    item_id: str
    """The reasoning item's id."""
    delta: str
    """The new text."""
    summary_index: int = 0
    """Which part of the summary it extends."""


__all__ = [
    "ApplyPatchApprovalRequest",
    "CallStatus",
    "ChangeKind",
    "ExecCommandOutputDelta",
    "FileChange",
    "OutputStream",
    "PatchApplyBegin",
    "PatchApplyEnd",
    "PlanStep",
    "PlanUpdate",
    "ReasoningSummaryDelta",
    "StepStatus",
    "ToolResult",
    "TurnDiff",
]
