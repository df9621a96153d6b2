"""The rollout: a session's append-only JSONL record (docs/rollout.md), reading side.

Theory of operation. :func:`parse_rollout` turns the bytes of a rollout into typed lines, one
frozen class per line ``type``, and never raises for what a file contains:

- The last line may have been cut short by a crash (no newline and not valid JSON). It is
  dropped with a note; it is what the crash lost.
- Any other line that is not a well-formed rollout line (not UTF-8, not JSON, not an object,
  no ``type`` or ``payload``, an unknown ``type``, a payload that does not decode) is skipped
  with a note naming its line number. A line without a timestamp is kept, with a note.
- A ``compacted`` line whose ``replacement_history`` does not decode is kept without it (it is
  then rebuilt like an old-style line) and noted; likewise a bad receipt or window field.
- ``session_meta`` must come before any other well-formed line. A rollout without it parses
  (``meta`` is None, with a note): it can still be shown, but not resumed, since nothing says
  which session it belongs to.

:func:`read_rollout` reads a file (raising :class:`~relay.RolloutError` only when the file
cannot be read at all); ``relay._transcript`` renders parsed lines for ``relay show``.
Reading for a resume (``for_resume``) checks every line as JSON but decodes only the lines a
resume reads, which is most of the cost of a long rollout saved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, TypeAlias

import attrs

from . import _protocol as p
from ._codec import DecodeError, from_json
from ._context import TurnSettings, WorldState
from ._errors import RolloutError


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


RolloutLine: TypeAlias = (
    SessionMetaLine
    | ResponseItemLine
    | EventMsgLine
    | TurnContextLine
    | WorldStateLine
    | CompactedLine
    | IdsLine
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

    @property
    def name(self) -> str:
        """How messages refer to the rollout: its path, or ``rollout``."""
        return str(self.path) if self.path is not None else "rollout"


class _Malformed(Exception):
    """A line that cannot be used; the message says why."""


def parse_rollout(
    data: bytes | str, *, path: Path | None = None, for_resume: bool = False
) -> Rollout:
    """Parse the content of a rollout file. Never raises for bad content (see the module doc).

    With ``for_resume``, every line is checked as JSON but only the lines resuming reads are
    decoded and kept: ``session_meta``; before the newest ``compacted`` line that carries a
    replacement history, every ``compacted`` line, the last ``turn_context`` and the last
    ``token_count``; from that line on, items, compactions, ``error`` events, the last
    ``turn_context`` and the last ``token_count`` events (see :func:`_wanted_from`). Decoding
    the rest is most of the cost of reading a long rollout, and nothing in it changes a resumed
    session.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    chunks = raw.split(b"\n")
    # A complete file ends with a newline, which leaves an empty last chunk.
    unterminated = chunks[-1] != b""
    if not unterminated:
        chunks.pop()
    parser = _Parser()
    records: list[tuple[int, Mapping[str, Any]]] = []
    for index, chunk in enumerate(chunks):
        last = unterminated and index == len(chunks) - 1
        record = parser.record(index + 1, chunk, last_unterminated=last)
        if record is not None:
            records.append((index + 1, record))
    wanted: set[int] | None = None
    if for_resume:
        base = parser.newest_base(records)
        wanted = _wanted_before(records, base) | _wanted_from(records, base)
    for position, (number, record) in enumerate(records):
        if wanted is not None and position not in wanted:
            parser.skipped = True
            continue
        parser.add(number, record)
    return parser.finish(path)


def read_rollout(path: str | PathLike[str], *, for_resume: bool = False) -> Rollout:
    """Read and parse a rollout file (see :func:`parse_rollout`).

    Raises:
        RolloutError: the file cannot be read (missing, a directory, no permission).
    """
    location = Path(path)
    try:
        data = location.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RolloutError(f"cannot read rollout file {location}: {reason}") from exc
    return parse_rollout(data, path=location, for_resume=for_resume)


def _event_type(record: Mapping[str, Any]) -> str | None:
    payload = record["payload"]
    kind = payload.get("type") if isinstance(payload, dict) else None
    return kind if isinstance(kind, str) else None


#: Events a resume reads wherever they are: which provider and model the session announced,
#: and the turn ids it used.
_RESUME_EVENTS = frozenset({"session_configured", "turn_started"})


def _wanted_before(records: Sequence[tuple[int, Mapping[str, Any]]], base: int) -> set[int]:
    """Positions before ``base`` that resuming reads: ``session_meta``, every ``compacted``
    (window numbers), the last ``turn_context`` (defaults), the last ``ids``, the last
    ``token_count`` (total usage), ``session_configured`` and ``turn_started`` events."""
    wanted: set[int] = set()
    last: dict[str, int] = {}
    for position in range(base):
        record = records[position][1]
        kind = record["type"]
        if kind in {"session_meta", "compacted"}:
            wanted.add(position)
        elif kind in {"turn_context", "ids"}:
            last[kind] = position
        elif kind == "event_msg" and _event_type(record) in _RESUME_EVENTS:
            wanted.add(position)
        elif kind == "event_msg" and _event_type(record) == "token_count":
            last["token_count"] = position
    return wanted | set(last.values())


def _wanted_from(records: Sequence[tuple[int, Mapping[str, Any]]], base: int) -> set[int]:
    """Positions from ``base`` on that resuming reads: items, compactions, ``error`` events,
    the last ``turn_context`` (the reference context and the defaults come from it, unless a
    compaction came after it), and the ``token_count`` events usage can come from.

    Usage comes from the last ``token_count`` that is not the one showing the window full
    before such an error; so the last counts are kept, walking back, up to the first that is
    not followed by one (earlier counts are overridden by it).
    """
    wanted: set[int] = set()
    counts: list[int] = []
    last_context: int | None = None
    for position in range(base, len(records)):
        record = records[position][1]
        kind = record["type"]
        if kind == "event_msg":
            event = _event_type(record)
            if event == "token_count":
                counts.append(position)
            elif event == "error" or event in _RESUME_EVENTS:
                wanted.add(position)
        elif kind == "turn_context":
            last_context = position
        elif kind != "world_state":
            wanted.add(position)
    if last_context is not None:
        wanted.add(last_context)
    for position in reversed(counts):
        wanted.add(position)
        following = records[position + 1] if position + 1 < len(records) else None
        window_error = (
            following is not None
            and following[0] == records[position][0] + 1
            and _event_type(following[1]) == "error"
            and following[1]["payload"].get("code") == "context_window_exceeded"
        )
        if not window_error:
            break
    return wanted


@attrs.define
class _Parser:
    lines: list[RolloutLine] = attrs.field(factory=list)
    notes: list[RolloutNote] = attrs.field(factory=list)
    meta: SessionMeta | None = None
    # Lines decoded ahead of their turn (base candidates), by line number.
    decoded: dict[int, RolloutLine | None] = attrs.field(factory=dict)
    # Whether a well-formed line was left undecoded (it still counts as "a line before").
    skipped: bool = False

    def note(self, number: int, message: str, *, truncated: bool = False) -> None:
        self.notes.append(RolloutNote(number, message, truncated))

    def record(
        self, number: int, chunk: bytes, *, last_unterminated: bool
    ) -> Mapping[str, Any] | None:
        """The JSON record of a line, or None (with a note unless the line is blank)."""
        if not chunk.strip():
            return None
        try:
            return _decode_record(chunk)
        except _Malformed as exc:
            if last_unterminated:
                self.note(
                    number,
                    "incomplete last line (the session stopped while writing it); ignored",
                    truncated=True,
                )
            elif chunk.startswith(b'{"timestamp":') and not chunk.rstrip().endswith(b"}"):
                self.note(
                    number,
                    "incomplete line (cut short by a crash before the session was resumed); "
                    "ignored",
                )
            else:
                self.note(number, f"{exc}; ignored")
            return None

    def newest_base(self, records: list[tuple[int, Mapping[str, Any]]]) -> int:
        """Position in ``records`` of the newest usable replacement history, else 0."""
        for position in range(len(records) - 1, -1, -1):
            number, record = records[position]
            payload = record["payload"]
            if not (
                record["type"] == "compacted"
                and isinstance(payload, dict)
                and isinstance(payload.get("replacement_history"), list)
            ):
                continue
            line = self._decode(number, record)
            self.decoded[number] = line
            if isinstance(line, CompactedLine) and line.replacement_history is not None:
                return position
        return 0

    def _decode(self, number: int, record: Mapping[str, Any]) -> RolloutLine | None:
        if number in self.decoded:
            return self.decoded.pop(number)
        try:
            return self._line(number, record)
        except _Malformed as exc:
            self.note(number, f"{exc}; ignored")
            return None

    def add(self, number: int, record: Mapping[str, Any]) -> None:
        line = self._decode(number, record)
        if line is None:
            return
        started = bool(self.lines) or self.skipped
        if isinstance(line, SessionMetaLine):
            if self.meta is not None or started:
                self.note(number, "session_meta after the start of the rollout; ignored")
                return
            self.meta = line.meta
        elif self.meta is None and not started:
            self.note(
                number,
                "the rollout does not start with a session_meta line, so the session it "
                "belongs to is unknown",
            )
        self.lines.append(line)

    def finish(self, path: Path | None) -> Rollout:
        if not self.lines and self.meta is None and not self.skipped:
            self.note(1, "no session_meta line: the rollout is empty")
        # Notes are made in two passes (JSON, then payloads); report them in line order.
        notes = sorted(self.notes, key=lambda note: note.line)
        return Rollout(self.meta, tuple(self.lines), tuple(notes), path)

    def _line(self, number: int, record: Mapping[str, Any]) -> RolloutLine:
        kind, payload = record["type"], record["payload"]
        timestamp = record.get("timestamp")
        if not isinstance(timestamp, str):
            self.note(number, "no timestamp")
            timestamp = None
        match kind:
            case "session_meta":
                return SessionMetaLine(number, timestamp, _session_meta(payload))
            case "response_item":
                return ResponseItemLine(number, timestamp, _decode(payload, p.ResponseItem, kind))
            case "event_msg":
                return EventMsgLine(number, timestamp, _decode(payload, p.EventMsg, kind))
            case "turn_context":
                return self._turn_context(number, timestamp, payload)
            case "world_state":
                return WorldStateLine(number, timestamp, _decode(payload, WorldState, kind))
            case "compacted":
                return self._compacted(number, timestamp, payload)
            case "ids":
                fields = _object(payload, "ids")
                return IdsLine(
                    number,
                    timestamp,
                    _field(fields, "submission", int, "ids"),
                    _field(fields, "item", int, "ids"),
                )
            case _:
                raise _Malformed(f"unknown line type {kind!r}")

    def _turn_context(self, number: int, timestamp: str | None, payload: Any) -> TurnContextLine:
        fields = _object(payload, "turn_context")
        settings = TurnSettings(
            model=_field(fields, "model", str, "turn_context"),
            cwd=_field(fields, "cwd", str, "turn_context"),
            effort=_optional(fields, "effort", str, "turn_context"),
        )
        world: WorldState | None = None
        if fields.get("world") is not None:
            try:
                world = _decode(fields["world"], WorldState, "turn_context world")
            except _Malformed as exc:
                self.note(number, f"{exc}; the reference context is left unset")
        return TurnContextLine(
            number,
            timestamp,
            settings,
            _optional(fields, "instructions_hash", str, "turn_context"),
            world,
        )

    def _compacted(self, number: int, timestamp: str | None, payload: Any) -> CompactedLine:
        fields = _object(payload, "compacted")
        message = _field(fields, "message", str, "compacted")
        replacement: tuple[p.ResponseItem, ...] | None = None
        raw_history = fields.get("replacement_history")
        if raw_history is not None:
            try:
                replacement = _replacement_history(raw_history)
            except _Malformed as exc:
                self.note(
                    number,
                    f"compacted: {exc}; the history is rebuilt from the user messages and the "
                    "summary instead",
                )
        receipt: p.CompactionReceipt | None = None
        if fields.get("receipt") is not None:
            try:
                receipt = _decode(fields["receipt"], p.CompactionReceipt, "receipt")
            except _Malformed as exc:
                self.note(number, f"compacted: {exc}; receipt ignored")
        window: dict[str, Any] = {}
        for name, kind in [
            ("window_number", int),
            ("first_window_id", str),
            ("previous_window_id", str),
            ("window_id", str),
        ]:
            try:
                window[name] = _optional(fields, name, kind, "compacted")
            except _Malformed as exc:
                self.note(number, f"{exc}; ignored")
                window[name] = None
        return CompactedLine(number, timestamp, message, replacement, receipt=receipt, **window)


def _decode_record(chunk: bytes) -> Mapping[str, Any]:
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed("not UTF-8 text") from exc
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(record, dict):
        raise _Malformed(f"expected a JSON object, got {type(record).__name__}")
    missing = [key for key in ("type", "payload") if key not in record]
    if missing:
        raise _Malformed(f"missing field {' and '.join(repr(key) for key in missing)}")
    if not isinstance(record["type"], str):
        raise _Malformed("'type' is not a string")
    return record


def _replacement_history(raw: Any) -> tuple[p.ResponseItem, ...]:
    if not isinstance(raw, list):
        raise _Malformed("replacement_history is not a list")
    return tuple(
        _decode(item, p.ResponseItem, f"replacement_history[{index}]")
        for index, item in enumerate(raw)
    )


def _decode(payload: Any, cls: Any, what: str) -> Any:
    try:
        return from_json(payload, cls)
    except DecodeError as exc:
        raise _Malformed(f"invalid {what}: {exc}") from exc


def _object(payload: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(payload, dict):
        raise _Malformed(f"invalid {what}: expected an object, got {type(payload).__name__}")
    return payload


def _field(fields: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    if name not in fields:
        raise _Malformed(f"invalid {what}: required field {name!r} missing")
    return _typed(fields[name], name, kind, what)


def _optional(fields: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    value = fields.get(name)
    return None if value is None else _typed(value, name, kind, what)


def _typed(value: Any, name: str, kind: type, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Malformed(
            f"invalid {what}: {name!r} should be {kind.__name__}, got {type(value).__name__}"
        )
    return value


def _session_meta(payload: Any) -> SessionMeta:
    fields = _object(payload, "session_meta")
    return SessionMeta(
        id=_field(fields, "id", str, "session_meta"),
        **{
            name: _optional(fields, name, str, "session_meta")
            for name in ("created", "cwd", "model", "model_provider", "relay_version")
        },
    )


__all__ = [
    "CompactedLine",
    "EventMsgLine",
    "ResponseItemLine",
    "Rollout",
    "RolloutLine",
    "RolloutNote",
    "SessionMeta",
    "SessionMetaLine",
    "TurnContextLine",
    "WorldStateLine",
    "parse_rollout",
    "read_rollout",
]
