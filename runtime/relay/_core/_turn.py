"""The writer of one piece of work: a turn's, guarded by its handle, or a background
compaction's, which writes nothing.

Every event, item and change of state a task makes goes through its :class:`TurnWriter`, which
forwards it to the session's one writer (:class:`~._session_writer.SessionWriter`) while the
turn is live. Once the handle is detached (its terminal event is out), everything is dropped,
so nothing carries the turn id after its terminal event, even from a task that lingers in a
shielded section: this is the one place that guard is checked. A background compaction writes
through :class:`Silent`: its result waits on its job until a turn installs it, and only the
usage of its requests counts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded
from .._base._rollout_lines import LinePayload
from .._exec._rules import Grant
from ._background import BackgroundJob
from ._context import TurnSettings, WorldState
from ._exec_gate import Waits
from ._session_writer import SessionWriter
from ._task import TaskHandle
from ._work_state import WorkEntry


class Jobs(Protocol):
    """The session's one background compaction job, as a writer starts and takes it."""

    def start(self, settings: TurnSettings, work: Callable[[Any], Awaitable[Any]]) -> Any:
        """Start ``work`` over a snapshot of the history; the job, or None."""
        ...

    def take(self) -> Any:
        """Take the job away; the job, or None."""
        ...


class Writer(Protocol):
    """Where a piece of work reports events, records items and changes the session's state."""

    @property
    def turn_id(self) -> str:
        """The id its events carry."""
        ...

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        ...

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event."""
        ...

    def note(self, msg: p.EventMsg) -> None:
        """Report an event and write it to the rollout, whatever its kind."""
        ...

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history."""
        ...

    def record_input(self, items: tuple[p.InputItem, ...]) -> None:
        """Record user input, with its item and ``user_message`` events."""
        ...

    def record_context(
        self,
        settings: TurnSettings,
        world: WorldState,
        initial: Callable[[], Sequence[p.ResponseItem]],
    ) -> None:
        """Record the initial context, or what changed since the reference context."""
        ...

    def note_work(self, entry: WorkEntry) -> None:
        """Add an entry to the work-state record and report it."""
        ...

    def install(
        self,
        settings: TurnSettings,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        """Install a compacted history in one step."""
        ...

    def count_response(
        self, usage: p.TokenUsage, *, recorded: bool, report: bool, window: int | None
    ) -> None:
        """Count a response's usage (``report``: in a ``token_count``)."""
        ...

    def calibrate(self, counted: int, estimate: int) -> None:
        """Scale later estimates by a server's count of a request."""
        ...

    def window_full(self, model: str, error: ContextWindowExceeded | None = None) -> None:
        """Count the history as filling the window of ``model``."""
        ...

    def start_background(
        self, settings: TurnSettings, work: Callable[[Any], Awaitable[Any]]
    ) -> BackgroundJob | None:
        """Start the session's background compaction; the job, or None."""
        ...

    def take_background(self) -> BackgroundJob | None:
        """Take the session's background job away; the job, or None."""
        ...

    @property
    def waits(self) -> Waits:
        """The calls of the work that wait for a decision."""
        ...

    @property
    def grants(self) -> Sequence[Grant]:
        """What the session's grants cover."""
        ...

    def flush(self) -> None:
        """Put everything recorded so far on disk."""
        ...

    def decided(self, line: LinePayload, grant: Grant | None) -> None:
        """Record a decision on a call (and the grant it makes)."""
        ...


class TurnWriter:
    """The writer of a task: its events carry its turn id, and stop at its terminal event."""

    def __init__(self, session: SessionWriter, handle: TaskHandle[Any], jobs: Jobs) -> None:
        self._session = session
        self._handle = handle
        self._jobs = jobs
        self.unreported_installs = 0
        """Compacted histories installed that no ``context_compacted`` reported yet."""
        self.waits = session.wiring.gate.waits()
        """The calls of the turn that wait for a decision."""

    @property
    def turn_id(self) -> str:
        return self._handle.turn_id

    @property
    def _live(self) -> SessionWriter | None:
        # The one guard: nothing of a detached turn reaches the session.
        return None if self._handle.detached else self._session

    def new_item_id(self, prefix: str = "item") -> str:
        return self._session.new_item_id(prefix)

    def emit(self, msg: p.EventMsg) -> None:
        if (session := self._live) is not None:
            if isinstance(msg, p.AgentMessage):
                self._handle.last_message = msg.message
            elif isinstance(msg, p.ContextCompacted):
                self.unreported_installs = max(0, self.unreported_installs - 1)
            session.emit(self._handle.turn_id, msg)

    def note(self, msg: p.EventMsg) -> None:
        if (session := self._live) is not None:
            session.note(self._handle.turn_id, msg)

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        if (session := self._live) is not None:
            session.record(item, from_model=from_model)

    def record_input(self, items: tuple[p.InputItem, ...]) -> None:
        if (session := self._live) is not None:
            session.record_input(self._handle.turn_id, items)

    def record_context(
        self,
        settings: TurnSettings,
        world: WorldState,
        initial: Callable[[], Sequence[p.ResponseItem]],
    ) -> None:
        if (session := self._live) is not None:
            session.record_context(settings, world, initial)

    def note_work(self, entry: WorkEntry) -> None:
        if (session := self._live) is not None:
            session.note_work(self._handle.turn_id, entry)

    def flush(self) -> None:
        """Put everything recorded so far on disk (before a wait for a decision)."""
        if (session := self._live) is not None:
            session.recorder.flush()

    def intent(self, call_id: str) -> None:
        """Record that the call ``call_id`` runs next (flushed before it runs)."""
        if (session := self._live) is not None:
            session.recorder.intent(call_id)

    @property
    def grants(self) -> Sequence[Grant]:
        """What the session's grants cover."""
        return self._session.state.grants

    def decided(self, line: LinePayload, grant: Grant | None) -> None:
        """Record a decision on a call of the turn (and the grant it makes)."""
        if (session := self._live) is not None:
            session.decided(line, grant)

    def install(
        self,
        settings: TurnSettings,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        if (session := self._live) is not None:
            self.unreported_installs += 1
            session.install(
                self._handle.turn_id,
                settings,
                items,
                message=message,
                receipt=receipt,
                clear_reference=clear_reference,
                masked_outputs=masked_outputs,
            )

    def count_response(
        self, usage: p.TokenUsage, *, recorded: bool, report: bool, window: int | None
    ) -> None:
        if (session := self._live) is not None:
            turn_id = self._handle.turn_id if report else None
            session.count_response(turn_id, usage, recorded=recorded, window=window)

    def calibrate(self, counted: int, estimate: int) -> None:
        if (session := self._live) is not None:
            session.calibrate(counted, estimate)

    def window_full(self, model: str, error: ContextWindowExceeded | None = None) -> None:
        if (session := self._live) is not None:
            session.window_full(self._handle.turn_id, model, error)

    def start_background(
        self, settings: TurnSettings, work: Callable[[Any], Awaitable[Any]]
    ) -> BackgroundJob | None:
        if self._live is None:
            return None
        job: BackgroundJob | None = self._jobs.start(settings, work)
        return job

    def take_background(self) -> BackgroundJob | None:
        if self._live is None:
            return None
        job: BackgroundJob | None = self._jobs.take()
        return job


class Silent:
    """The writer of background work: it reports, records and changes nothing (its result
    waits on its job until a turn installs it), but the usage of its requests still counts
    towards the session's total."""

    def __init__(self, session: SessionWriter, turn_id: str) -> None:
        self._session = session
        self._turn_id = turn_id
        # Nobody watches background work: a call of it that must be asked about is denied,
        # unless a callback decides.
        self.waits = session.wiring.gate.waits(unattended=True)

    @property
    def grants(self) -> Sequence[Grant]:
        return self._session.state.grants

    def flush(self) -> None:
        pass

    def decided(self, line: LinePayload, grant: Grant | None) -> None:
        self._session.decided(line, grant)

    @property
    def turn_id(self) -> str:
        return self._turn_id

    def new_item_id(self, prefix: str = "item") -> str:
        return self._session.new_item_id(prefix)

    def emit(self, msg: p.EventMsg) -> None:
        del msg

    def note(self, msg: p.EventMsg) -> None:
        del msg

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        del item, from_model

    def record_input(self, items: tuple[p.InputItem, ...]) -> None:
        del items

    def record_context(
        self,
        settings: TurnSettings,
        world: WorldState,
        initial: Callable[[], Sequence[p.ResponseItem]],
    ) -> None:
        del settings, world, initial

    def note_work(self, entry: WorkEntry) -> None:
        del entry

    def install(
        self,
        settings: TurnSettings,
        items: Sequence[p.ResponseItem],
        *,
        message: str,
        receipt: p.CompactionReceipt,
        clear_reference: bool,
        masked_outputs: Mapping[str, str] | None = None,
    ) -> None:
        del settings, items, message, receipt, clear_reference, masked_outputs

    def count_response(
        self, usage: p.TokenUsage, *, recorded: bool, report: bool, window: int | None
    ) -> None:
        del recorded, report
        self._session.count_response(None, usage, recorded=False, window=window)

    def calibrate(self, counted: int, estimate: int) -> None:
        del counted, estimate

    def window_full(self, model: str, error: ContextWindowExceeded | None = None) -> None:
        """The live history is not the snapshot: nothing is counted."""
        del model, error

    def start_background(
        self, settings: TurnSettings, work: Callable[[Any], Awaitable[Any]]
    ) -> BackgroundJob | None:
        del settings, work
        return None

    def take_background(self) -> BackgroundJob | None:
        return None


__all__ = ["Jobs", "Silent", "TurnWriter", "Writer"]
