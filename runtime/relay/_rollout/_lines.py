"""The lines of a rollout as typed values (docs/rollout.md): one frozen class per line
``type``, the notes a reader makes about lines it skips or partly reads, and the parsed
rollout. ``relay._rollout._reader`` makes them from a file.

A line is where it is in the file (its number and timestamp) and its payload: a protocol
value, or a class of ``relay._base._rollout_lines``, which the recorder writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeAlias

import attrs

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._exec_rules import ExecRules
from .._base._rollout_lines import (
    ApprovalDecided,
    Compacted,
    GeneratedIds,
    SessionMeta,
    SessionSpan,
    StartedOp,
    ToolIntent,
    TurnContext,
    WorldState,
)


@attrs.frozen
class RolloutNote:
    """Something wrong with one line of a rollout; the line was skipped or partly read."""

    line: int
    """1-based line number."""
    message: str
    """What was wrong and what the reader did about it."""
    truncated: bool = False
    """True for a last line cut short by a crash (expected after a crash, not a corruption)."""

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@attrs.frozen
class SessionMetaLine:
    """The first line of a rollout."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    meta: SessionMeta
    """Its payload."""


@attrs.frozen
class ResponseItemLine:
    """An item recorded in the history."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    item: p.ResponseItem
    """The item."""


@attrs.frozen
class EventMsgLine:
    """A persisted event (turn lifecycle, messages, token counts, warnings, ...)."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    msg: p.EventMsg
    """The event message."""
    seq: int | None = None
    """The event's ``seq``, which a writer with an epoch records (else None)."""
    event_id: str | None = None
    """The event's id, recorded with its ``seq``."""


@attrs.frozen
class TurnContextLine:
    """The settings and reference world a turn ran with."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    context: TurnContext
    """Its payload."""


@attrs.frozen
class WorldStateLine:
    """A snapshot of the world state at a window start."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    world: WorldState
    """The snapshot."""


@attrs.frozen
class CompactedLine:
    """An installed compaction."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    compacted: Compacted
    """Its payload (the parts that did not decode left unset, with a note)."""


@attrs.frozen
class IdsLine:
    """How far the session's generated ids have gone, so that a resume continues them."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    ids: GeneratedIds
    """Its payload."""


@attrs.frozen
class OpLine:
    """An op of a registered type that started a task (a custom op)."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    started: StartedOp
    """Its payload: the submission id and the op."""

    @property
    def text(self) -> str:
        """The op as one line: its type, then its fields (``review (path='src/app.py')``)."""
        op = self.started.op
        shown = to_json(op).items()
        fields = ", ".join(f"{key}={value!r}" for key, value in shown if key != "type")
        return f"{op.type} ({fields})" if fields else op.type


@attrs.frozen
class TraceLine:
    """The span of one run of the session in a trace (written when the run was traced), so
    that a resume links its own span to it."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    span: SessionSpan
    """Its payload."""


@attrs.frozen
class RulesLine:
    """The rules the session runs under, from its open or a resume (docs/approvals.md)."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    rules: ExecRules
    """Its payload."""


@attrs.frozen
class ApprovalLine:
    """A decision on a call that waited for one (docs/approvals.md)."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    decided: ApprovalDecided
    """Its payload."""


@attrs.frozen
class IntentLine:
    """A call about to run: with no output after it, the call was running when the session
    stopped writing."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    intent: ToolIntent
    """Its payload."""


RolloutLine: TypeAlias = (
    SessionMetaLine
    | ResponseItemLine
    | EventMsgLine
    | TurnContextLine
    | WorldStateLine
    | CompactedLine
    | IdsLine
    | OpLine
    | TraceLine
    | RulesLine
    | ApprovalLine
    | IntentLine
)


@attrs.frozen
class Rollout:
    """A parsed rollout: its well-formed lines in order, and notes about the others."""

    meta: SessionMeta | None
    """The ``session_meta`` payload, or None when the file has none."""
    lines: tuple[RolloutLine, ...]
    """Every well-formed line, ``session_meta`` included, in file order."""
    notes: tuple[RolloutNote, ...] = ()
    """Problems found, in line order."""
    path: Path | None = None
    """The file it was read from."""
    epoch: int | None = None
    """The newest epoch a line says it was written in (None: no line says one)."""
    last_seq: int | None = None
    """The highest event ``seq`` a line records (None: no line records one)."""
    unfinished_turn: tuple[str, float | None] | None = None
    """The turn whose ``turn_started`` is the last turn event, with its ``started_at``: the
    turn that was running when the session stopped writing (None: every turn ended)."""

    @property
    def name(self) -> str:
        """How messages refer to the rollout: its path, or ``rollout``."""
        return str(self.path) if self.path is not None else "rollout"
