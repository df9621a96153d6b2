"""The rollout recorder: the lines the session writes, in one place.

The session and its task context say *what* happened (an item was recorded, a compaction was
installed, a turn's context was set); this module says which rollout line that becomes, on top
of :class:`~relay._core._writer.RolloutWriter`, which owns the file. Each line's payload is a
class of ``relay._base._rollout_lines``, written with the codec (``to_json``), the classes the
reader decodes. With persistence off there is no writer and every method does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._codec import to_json
from .._base._rollout_lines import (
    Compacted,
    GeneratedIds,
    LinePayload,
    SessionMeta,
    SessionSpan,
    StartedOp,
    ToolIntent,
    TurnContext,
    line_type,
)
from .._version import __version__
from ._context import TurnSettings, WorldState, instructions_hash
from ._work_state import WorkState
from ._writer import RolloutWriter, payload_json

#: Event types written to the rollout as ``event_msg`` lines (deltas are not).
PERSISTED_EVENTS: tuple[type, ...] = (
    p.SessionConfigured,
    p.TurnStarted,
    p.TurnComplete,
    p.TurnAborted,
    p.UserMessage,
    p.AgentMessage,
    p.TokenCount,
    p.ContextCompacted,
    p.WarningEvent,
    p.ErrorEvent,
    p.HookCompleted,
    p.ShutdownComplete,
    p.SessionResumed,
    p.WorkStateNoted,
    p.ExecApprovalRequest,
    p.ApplyPatchApprovalRequest,
    p.PatchApplyEnd,
    p.PlanUpdate,
    p.SubAgentSpawned,
    p.SubAgentEnded,
)
#: Events that end a turn or the session: the file is flushed before anyone sees them.
TERMINAL_EVENTS = (p.TurnComplete, p.TurnAborted, p.ShutdownComplete)
#: Events flushed at once besides the terminal ones: a session's start is on disk as soon as
#: it is announced, so it can be found (and resumed) even if the process dies next; so are a
#: sub-agent's spawn and end, which a resumed tree is rebuilt from.
FLUSHED_EVENTS = (*TERMINAL_EVENTS, p.SessionConfigured, p.SubAgentSpawned, p.SubAgentEnded)
#: What a writer with an epoch flushes besides: a turn's start, so that the host that takes
#: the session over knows the turn that was running whenever a reader saw it start.
FLUSHED_IN_EPOCHS = (*FLUSHED_EVENTS, p.TurnStarted)


class RolloutRecorder:
    """Writes the session's rollout lines (or nothing, when persistence is off)."""

    def __init__(
        self,
        writer: RolloutWriter | None,
        ids: tuple[int, int] = (0, 0),
        token_ratio: float = 1.0,
    ) -> None:
        self.writer = writer
        """The file writer, when persistence is on."""
        # What the last ``ids`` line said (a resumed session's: what it was restored from).
        self._ids = (*ids, token_ratio)
        self._flushed = (
            FLUSHED_IN_EPOCHS if writer is not None and writer.epoch is not None else FLUSHED_EVENTS
        )
        # A turn's context is most often the one before it: its payload is made once.
        self._context: tuple[Any, ...] = ()
        self._context_json = ""

    def ids(self, submission: int, item: int, token_ratio: float = 1.0) -> None:
        """An ``ids`` line, when the generated ids or the token ratio changed since the last.

        Written before every event that ends a turn or the session, so that it is flushed
        with it: a resume continues both counters, ids in one rollout never repeat, and the
        resumed session scales its estimates by what this one learned of its server's counts
        (one process per turn behaves as one process does).
        """
        if self.writer is None or (submission, item, token_ratio) == self._ids:
            return
        self._ids = (submission, item, token_ratio)
        ratio = token_ratio if token_ratio != 1.0 else None
        self._write(GeneratedIds(submission, item, ratio))

    def session_meta(
        self,
        session_id: str,
        created: datetime,
        cwd: str,
        model: str,
        provider: str,
        link: tuple[str, str, str] | None = None,
    ) -> None:
        """The first line of a new session's rollout, flushed at once; a sub-agent's names its
        parent, its path and its role (``link``)."""
        if self.writer is None:
            return
        meta = SessionMeta(session_id, created.isoformat(), cwd, model, provider, __version__)
        if link is not None:
            parent_id, path, role = link
            meta = attrs.evolve(meta, parent_id=parent_id, agent_path=path, agent_role=role)
        self._write(meta)
        self.writer.flush()

    def event(
        self,
        msg: p.EventMsg,
        text: str | None = None,
        *,
        seq: int | None = None,
        event_id: str | None = None,
    ) -> None:
        """An ``event_msg`` line for a persisted kind; a terminal event flushes the file.

        ``text``, when given, is the message's JSON text, already made; ``seq`` and
        ``event_id`` are the event's (written into the line by a writer with an epoch).
        """
        if self.writer is None or not isinstance(msg, PERSISTED_EVENTS):
            return
        self.writer.write_json(
            "event_msg",
            payload_json(to_json(msg)) if text is None else text,
            seq=seq,
            event_id=event_id,
        )
        if isinstance(msg, self._flushed):
            self.writer.flush()

    def note(self, msg: p.EventMsg) -> None:
        """An ``event_msg`` line for an event of a kind not persisted by default (the drop of
        a background compaction's result)."""
        if self.writer is not None:
            self.writer.write("event_msg", to_json(msg))

    def item(self, item: p.ResponseItem) -> tuple[dict[str, Any], str] | None:
        """A ``response_item`` line; returns the item's JSON and its text, when written."""
        if self.writer is None:
            return None
        data = to_json(item)
        text = payload_json(data)
        self.writer.write_json("response_item", text)
        return data, text

    def op(self, submission_id: str, op: p.CustomOp) -> None:
        """An ``op`` line: a custom op that starts a task (so that a resume knows its type)."""
        self._write(StartedOp(submission_id, op))

    def line(self, payload: LinePayload) -> None:
        """A line of ``payload``, flushed with everything before it (a decision on a call, the
        rules of the session: both hold after a crash)."""
        self._write(payload)
        self.flush()

    def intent(self, call_id: str) -> None:
        """An ``intent`` line, flushed with everything before it: the call runs next."""
        self._write(ToolIntent(call_id))
        self.flush()

    def flush(self) -> None:
        """Put every line written so far on disk."""
        if self.writer is not None:
            self.writer.flush()

    def world_state(self, world: WorldState) -> None:
        """A ``world_state`` line."""
        self._write(world)

    def turn_context(self, settings: TurnSettings, instructions: str, world: WorldState) -> None:
        """A ``turn_context`` line: the turn's settings and the world they apply to."""
        if self.writer is None:
            return
        key = (settings.model, settings.cwd, settings.effort, instructions, world)
        if key != self._context:
            self._context = key
            context = TurnContext(
                settings.model,
                settings.cwd,
                settings.effort,
                instructions_hash(instructions),
                world,
            )
            self._context_json = payload_json(to_json(context))
        self.writer.write_json("turn_context", self._context_json)

    def compacted(
        self,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        window_number: int,
        first_window_id: str,
        previous_window_id: str | None,
        window_id: str,
        work_state: WorkState | None = None,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """A ``compacted`` line: the new history and the window it opens, with the work-state
        record as it stands and the originals of the outputs it masked (when there are)."""
        if self.writer is None:
            return
        self._write(
            Compacted(
                message,
                tuple(items),
                window_number,
                first_window_id,
                previous_window_id,
                window_id,
                receipt,
                work_state.to_json() if work_state is not None else None,
                dict(masked_outputs or {}),
            )
        )

    def trace(self, trace_id: str, span_id: str) -> None:
        """A ``trace`` line: the trace and span ids (hex) of this run of the session's span,
        so that a later resume can link to it. Written by whoever traces the session."""
        self._write(SessionSpan(trace_id, span_id))

    def _write(self, payload: LinePayload) -> None:
        if self.writer is not None:
            self.writer.write(line_type(payload), to_json(payload))

    def close(self) -> None:
        """Flush and close the file."""
        if self.writer is not None:
            self.writer.close()


__all__ = ["PERSISTED_EVENTS", "TERMINAL_EVENTS", "RolloutRecorder"]
