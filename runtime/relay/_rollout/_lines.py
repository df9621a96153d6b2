"""The lines of a rollout as typed values (docs/rollout.md): one frozen class per line
``type``, the notes a reader makes about lines it skips or partly reads, and the parsed
rollout. ``relay._rollout._reader`` makes them from a file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

import attrs

from .._base import _protocol as p
from .._core._context import TurnSettings, WorldState


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
class SessionMeta:
    """The ``session_meta`` payload: which session the rollout belongs to."""

    id: str
    """Session id."""
    created: str | None = None
    """When the session was created (ISO 8601)."""
    cwd: str | None = None
    """Working directory at creation."""
    model: str | None = None
    """Configured model."""
    model_provider: str | None = None
    """Configured provider name."""
    relay_version: str | None = None
    """Version of relay that created the file."""


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
    settings: TurnSettings
    """Model, cwd and effort."""
    instructions_hash: str | None
    """Short hash of the instructions."""
    world: WorldState | None
    """The world the history's initial context describes (the reference context)."""


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
    message: str
    """The summary text (local backend), else empty."""
    replacement_history: tuple[p.ResponseItem, ...] | None = None
    """The new history; None on an old-style line (rebuilt when resuming)."""
    window_number: int | None = None
    """Compactions so far, this one included."""
    first_window_id: str | None = None
    """Id of the session's first window."""
    previous_window_id: str | None = None
    """Id of the window this compaction closed."""
    window_id: str | None = None
    """Id of the window it opened."""
    receipt: p.CompactionReceipt | None = None
    """What it did."""
    work_state: Mapping[str, Any] | None = None
    """The work-state record as it stood (JSON), when there was one."""
    masked_outputs: Mapping[str, str] = attrs.field(factory=dict)
    """The originals of the tool outputs this compaction masked, by call id."""


@attrs.frozen
class IdsLine:
    """How far the session's generated ids have gone, so that a resume continues them."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    submission: int
    """The number of the last generated submission id (``sub-N``)."""
    item: int
    """The number of the last generated item id (``user-N``, ``msg-N``, ...)."""


@attrs.frozen
class OpLine:
    """An op of a registered type that started a task (a custom op): its id and JSON form."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    id: str
    """The submission id (the turn id of its task)."""
    op: Mapping[str, Any]
    """The op, as JSON: ``{"type": ..., **fields}``."""

    @property
    def op_type(self) -> str:
        """The op's type."""
        return str(self.op["type"])


@attrs.frozen
class TraceLine:
    """The span of one run of the session in a trace (written when the run was traced), so
    that a resume links its own span to it."""

    number: int
    """1-based line number."""
    timestamp: str | None
    """RFC 3339 time of the write."""
    trace_id: str
    """The trace id, 32 hex digits."""
    span_id: str
    """The session span's id, 16 hex digits."""


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
