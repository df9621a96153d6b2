"""Choosing, as a rollout's lines come, the ones a resume reads (see
:func:`relay._rollout._reader.parse_rollout`): only what a resumed session needs is decoded and
held, whatever the length of the file."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from ._lines import CompactedLine, RolloutLine, RolloutNote


class LineParser(Protocol):
    """What the filter needs of the parser that reads the rollout (its decoding side)."""

    notes: list[RolloutNote]
    """What was wrong with the file so far."""
    skipped: bool
    """Whether a well-formed line was left undecoded."""

    def decode(self, number: int, record: Mapping[str, Any]) -> RolloutLine | None:
        """The line of a record, or None (with a note) when its payload does not decode."""
        ...

    def decode_aside(
        self, number: int, record: Mapping[str, Any]
    ) -> tuple[RolloutLine | None, list[RolloutNote]]:
        """:meth:`decode`, its notes returned instead of made."""
        ...

    def add(self, number: int, line: RolloutLine | None, *, started: bool | None = None) -> None:
        """Append a decoded line; ``started``: whether a well-formed line came before it."""
        ...


def _event_type(record: Mapping[str, Any]) -> str | None:
    payload = record["payload"]
    kind = payload.get("type") if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) else None


@attrs.define
class _Kept:
    """A line a resume may read: its record until it is decoded, or its decoded line."""

    position: int
    """Index among the well-formed lines."""
    number: int
    """1-based line number."""
    kind: str
    """The line's ``type``."""
    record: Mapping[str, Any] | None
    """The JSON record, while the line is not decoded yet."""
    line: RolloutLine | None = None
    """The decoded line (None: not decoded yet, or its payload did not decode)."""
    dropped: bool = False
    """A newer line made it useless."""
    window_full: bool = False
    """(``token_count``) the next line is a ``context_window_exceeded`` error."""
    pinned: bool = False
    """(``token_count``) the installation's count of a compaction: always read after it."""
    always: bool = False
    """Read wherever it is (see ``_RESUME_EVENTS``)."""
    notes: list[RolloutNote] | tuple[()] = ()
    """Notes made decoding it, reported only if it is kept."""

    def drop(self) -> None:
        """A newer line made it useless: let go of what it holds."""
        self.dropped = True
        self.record = None
        self.line = None


@attrs.define
class ResumeFilter:
    """Chooses, as the lines come, the ones a resume reads (see :func:`~._reader.parse_rollout`).

    Items are decoded as they come, so that their JSON records are not held; a ``compacted``
    line with a replacement history is decoded as it comes, to know whether it is the new
    base. Everything before a new base except what resuming still reads from there is dropped.
    Time and memory are linear in the file: each line is kept or dropped once.
    """

    parser: LineParser
    kept: list[_Kept] = attrs.field(factory=list)
    position: int = 0
    # The last turn_context before the base (kept for the defaults) and from the base on.
    context_before: _Kept | None = None
    context: _Kept | None = None
    # The last token_count before the base, and from the base on, the counts usage can come
    # from: the last one, and before it those followed by a window-full error, and the one
    # before those (the first one walking back that is not followed by one).
    count_before: _Kept | None = None
    counts: list[_Kept] = attrs.field(factory=list)
    previous: _Kept | None = None
    # Dropped entries still in ``kept``.
    garbage: int = 0
    # Between a compaction and the next item: the next token_count is the installation's.
    installing: bool = False
    # The last ``ids`` line: where the session's generated ids had got to.
    ids: _Kept | None = None
    # The one event of each of _RESUME_EVENTS a resume reads.
    latest: dict[str, _Kept] = attrs.field(factory=dict)
    # The ``work_state_noted`` events since the last compaction that carried the record.
    noted: list[_Kept] = attrs.field(factory=list)
    # The newest ``trace`` lines (at most LINKED_RUNS): the runs a resumed span links to.
    traces: list[_Kept] = attrs.field(factory=list)

    def take(self, number: int, record: Mapping[str, Any]) -> None:
        position = self.position
        self.position += 1
        previous, self.previous = self.previous, None
        kind = record["type"]
        if kind == "event_msg":
            event = _event_type(record)
            if event == "token_count":
                entry = _Kept(position, number, kind, record, pinned=self.installing)
                self.installing = False
                self._count(entry)
            elif event == "error":
                if (
                    previous is not None
                    and previous.number == number - 1
                    and record["payload"].get("code") == "context_window_exceeded"
                ):
                    previous.window_full = True
                self._keep(_Kept(position, number, kind, record))
            elif event in ("sub_agent_spawned", "sub_agent_ended"):
                # Read wherever they are: a resume opens again the children they name.
                self._keep(_Kept(position, number, kind, record, always=True))
            elif event == "work_state_noted":
                # Read wherever it is until a compaction that carries the whole record.
                self.noted.append(self._keep(_Kept(position, number, kind, record, always=True)))
            elif event in _RESUME_EVENTS:
                older = self.latest.get(event)
                if older is not None:
                    if event == "turn_started" and _turn_number(older) > _turn_number(record):
                        return
                    self._drop(older)
                self.latest[event] = self._keep(_Kept(position, number, kind, record, always=True))
            return
        if kind == "world_state":
            return
        if kind == "trace":
            # Read wherever it is: a resumed session's span links to every run's, the newest.
            self.traces.append(self._keep(_Kept(position, number, kind, record, always=True)))
            if len(self.traces) > LINKED_RUNS:
                self._drop(self.traces.pop(0))
            return
        if kind == "rules":
            # Read wherever it is, the newest only: the session's rules hold across
            # compactions, and a resume keeps them.
            older = self.latest.get(kind)
            if older is not None:
                self._drop(older)
            self.latest[kind] = self._keep(_Kept(position, number, kind, record, always=True))
            return
        if kind in ("approval", "intent"):
            # Read wherever they are: a grant holds for the whole session, and an intent tells
            # a call that ran from one that never did, even across a compaction.
            self._keep(_Kept(position, number, kind, record, always=True))
            return
        if kind == "op":
            # A resume reads one op of each type: which types of task the session ran.
            op = record["payload"].get("op") if isinstance(record["payload"], dict) else None
            op_type = op.get("type") if isinstance(op, dict) else None
            key = f"op:{op_type}"
            older = self.latest.get(key)
            if older is not None:
                self._drop(older)
            self.latest[key] = self._keep(_Kept(position, number, kind, record, always=True))
            return
        if kind == "ids":
            if self.ids is not None:
                self._drop(self.ids)
            self.ids = self._keep(_Kept(position, number, kind, record))
            return
        if kind == "turn_context":
            if self.context is not None:
                self._drop(self.context)
            self.context = self._keep(_Kept(position, number, kind, record))
            return
        entry = _Kept(position, number, kind, record)
        if kind == "compacted":
            self.installing = True
        payload = record["payload"]
        if kind == "response_item" or (
            kind == "compacted"
            and isinstance(payload, dict)
            and (
                isinstance(payload.get("replacement_history"), list)
                or isinstance(payload.get("work_state"), Mapping)
            )
        ):
            entry.line, entry.notes = self.parser.decode_aside(number, record)
            entry.record = None
            if kind == "response_item" and entry.line is not None:
                # Only an item that decodes is in the history: one that does not leaves the
                # next token_count the installation's, as a full read sees it.
                self.installing = False
            compacted = entry.line.compacted if isinstance(entry.line, CompactedLine) else None
            if compacted is not None and compacted.work_state is not None:
                # The record starts again from the snapshot: earlier notes are in it.
                for noted in self.noted:
                    self._drop(noted)
                self.noted = []
            if compacted is not None and compacted.replacement_history is not None:
                self._new_base()
        self._keep(entry)

    def _keep(self, entry: _Kept) -> _Kept:
        if self.garbage > 1024 and 2 * self.garbage > len(self.kept):
            self.kept = [kept for kept in self.kept if not kept.dropped]
            self.garbage = 0
        self.kept.append(entry)
        return entry

    def _drop(self, entry: _Kept) -> None:
        entry.drop()
        self.garbage += 1

    def _count(self, entry: _Kept) -> None:
        self._keep(entry)
        self.previous = entry
        counts = self.counts
        if counts and not counts[-1].window_full:
            # Walking back from any later count stops at counts[-1] at the latest.
            for older in counts[:-1]:
                if not older.pinned:
                    self._drop(older)
            del counts[:-1]
        counts.append(entry)

    def _new_base(self) -> None:
        """The line just decoded replaces the history: drop what nothing reads any more."""
        if self.context is not None:
            if self.context_before is not None:
                self._drop(self.context_before)
            self.context_before, self.context = self.context, None
        if self.counts:
            if self.count_before is not None:
                self._drop(self.count_before)
            self.count_before = self.counts[-1]
            for older in self.counts[:-1]:
                self._drop(older)
            self.counts = []
        for entry in self.kept:
            if not (
                entry is self.context_before
                or entry is self.count_before
                or entry is self.ids
                or entry.always
                or entry.kind in _ALWAYS_READ
            ):
                entry.drop()
        self.kept = [entry for entry in self.kept if not entry.dropped]
        self.garbage = 0

    def finish(self) -> None:
        counts = self.counts
        for index in range(len(counts) - 1, -1, -1):
            if not counts[index].window_full:
                for older in counts[:index]:
                    if not older.pinned:
                        self._drop(older)
                break
        parser = self.parser
        # Lines were read, even if none is kept: the rollout is not empty.
        parser.skipped = self.position > 0
        for entry in self.kept:
            if entry.dropped:
                continue
            line = entry.line
            parser.notes.extend(entry.notes)
            if entry.record is not None:
                line = parser.decode(entry.number, entry.record)
            parser.add(entry.number, line, started=entry.position > 0)


def generated_number(id: str, prefix: str) -> int:
    """N of an id ``<prefix>-N`` that relay generated, else 0."""
    head, _, number = id.rpartition("-")
    return int(number) if head == prefix and number.isdigit() else 0


def _turn_number(entry: _Kept | Mapping[str, Any]) -> int:
    """The number of a ``turn_started`` event's generated turn id (``sub-N``), else 0."""
    record = entry.record if isinstance(entry, _Kept) else entry
    payload = record.get("payload") if record is not None else None
    turn_id = payload.get("turn_id") if isinstance(payload, dict) else None
    return generated_number(turn_id, "sub") if isinstance(turn_id, str) else 0


#: The most runs of a session (its newest ``trace`` lines) a resumed session's span links to.
LINKED_RUNS = 32

#: Events a resume reads wherever they are, one of each: which provider and model the session
#: announced last, and the highest generated turn id it used.
_RESUME_EVENTS = frozenset({"session_configured", "turn_started"})

#: Lines kept from before the newest base (the window fields come from every compaction).
_ALWAYS_READ = frozenset({"session_meta", "compacted"})
