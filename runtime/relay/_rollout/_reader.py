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
- A line that says it was written in an older epoch than a line before it (a host that had
  lost the session and wrote on: ``docs/rollout.md``, Epochs) is skipped with a note. A line
  that says no epoch belongs to the epoch in force.
- ``session_meta`` must come before any other well-formed line. A rollout without it parses
  (``meta`` is None, with a note): it can still be shown, but not resumed, since nothing says
  which session it belongs to.

:func:`read_rollout` reads a file (raising :class:`~relay.RolloutError` only when the file
cannot be read at all); ``relay._cli._transcript`` renders parsed lines for ``relay show``.
Reading for a resume (``for_resume``) checks every line as JSON but decodes only the lines a
resume reads (``relay._rollout._filter`` chooses them), which is most of the cost of a long
rollout saved. The typed lines are defined in ``relay._rollout._lines`` and exported here too.

A payload is decoded with the codec into the class the recorder wrote it from
(``relay._base._rollout_lines``). When the codec refuses one, the reader looks again, field by
field, to name what is wrong in its own words, and to keep what it can of a ``compacted`` or
``turn_context`` line (the notes above).
"""

from __future__ import annotations

import gc
import io
import json
import json.scanner
import threading
import typing
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from os import PathLike
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._codec import DecodeError, from_json, has_lone_surrogate
from .._base._errors import RolloutError
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
from ._filter import ResumeFilter
from ._lines import (
    ApprovalLine,
    CompactedLine,
    EventMsgLine,
    IdsLine,
    IntentLine,
    OpLine,
    ResponseItemLine,
    Rollout,
    RolloutLine,
    RolloutNote,
    RulesLine,
    SessionMetaLine,
    TraceLine,
    TurnContextLine,
    WorldStateLine,
)

T = TypeVar("T")


class _Malformed(Exception):
    """A line that cannot be used; the message says why."""


def parse_rollout(
    data: bytes | str, *, path: Path | None = None, for_resume: bool = False
) -> Rollout:
    """Parse the content of a rollout file. Never raises for bad content (see the module doc).

    With ``for_resume``, every line is checked as JSON but only the lines resuming reads are
    decoded and kept: ``session_meta``; the last ``ids`` line, the last ``session_configured``
    event and the ``turn_started`` event with the highest generated id; the
    ``work_state_noted`` events since the last ``compacted`` line that carries a work-state
    record; before the newest ``compacted`` line that carries a replacement history, every
    ``compacted`` line, the last ``turn_context`` and the last ``token_count``; from that line
    on, items, compactions, ``error`` events, the last ``turn_context`` and the
    ``token_count`` events usage can come from (the last one, before it those that show the
    window full before a ``context_window_exceeded`` error, and the first after each
    compaction, which is the installation's).
    Decoding the rest is most of the cost of reading a long rollout, and nothing in it changes
    a resumed session.
    """
    with _collector_paused():
        raw = data.encode("utf-8") if isinstance(data, str) else data
        return _parse(io.BytesIO(raw), path, for_resume=for_resume)


def read_rollout(path: str | PathLike[str], *, for_resume: bool = False) -> Rollout:
    """Read and parse a rollout file (see :func:`parse_rollout`), line by line.

    Raises:
        RolloutError: the file cannot be read (missing, a directory, no permission).
    """
    location = Path(path)
    try:
        with location.open("rb") as file, _collector_paused():
            return _parse(file, location, for_resume=for_resume)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RolloutError(f"cannot read rollout file {location}: {reason}") from exc


# Parsing allocates an object per JSON value and keeps many of them: each collection the
# cyclic collector runs meanwhile walks the whole heap (the larger the process, the longer)
# and can free nothing, since decoded JSON has no cycles. It is paused while any parse runs.
_paused_lock = threading.Lock()
_paused = 0
_resume_collector = False


@contextmanager
def _collector_paused() -> Iterator[None]:
    global _paused, _resume_collector
    with _paused_lock:
        if _paused == 0:
            _resume_collector = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _resume_collector:
                gc.enable()


def _parse(lines: Iterable[bytes], path: Path | None, *, for_resume: bool) -> Rollout:
    """Parse ``lines`` (each with its newline, except perhaps the last) as they come.

    Only what the result keeps is held: the records of lines decoded later are dropped as soon
    as a newer line makes them useless (see :class:`ResumeFilter`).
    """
    parser = _Parser()
    keep = ResumeFilter(parser) if for_resume else None
    for number, chunk in enumerate(lines, 1):
        # Only the last line can lack its newline: then a crash may have cut it short.
        record = parser.record(number, chunk, last_unterminated=not chunk.endswith(b"\n"))
        if record is None or not parser.in_epoch(number, record):
            continue
        if keep is None:
            parser.add(number, parser.decode(number, record))
        else:
            keep.take(number, record)
    if keep is not None:
        keep.finish()
    return parser.finish(path)


@attrs.define
class _Parser:
    lines: list[RolloutLine] = attrs.field(factory=list)
    notes: list[RolloutNote] = attrs.field(factory=list)
    meta: SessionMeta | None = None
    # Whether a well-formed line was left undecoded (it still counts as "a line before").
    skipped: bool = False
    # The newest epoch a line said, and the highest event seq one recorded.
    epoch: int | None = None
    last_seq: int | None = None
    # The turn started last, while no turn event has ended it.
    unfinished: tuple[str, float | None] | None = None

    def in_epoch(self, number: int, record: Mapping[str, Any]) -> bool:
        """Whether a line counts: it says no epoch, or none older than the newest so far."""
        epoch = _counter(record.get("epoch"))
        if epoch is not None:
            if self.epoch is not None and epoch < self.epoch:
                self.note(
                    number,
                    f"written in epoch {epoch} after epoch {self.epoch} began (by a host that "
                    "had lost the session); ignored",
                )
                return False
            self.epoch = epoch
        seq = _counter(record.get("seq"))
        if seq is not None and (self.last_seq is None or seq > self.last_seq):
            self.last_seq = seq
        if record["type"] == "event_msg":
            self._follow_turns(record["payload"])
        return True

    def _follow_turns(self, payload: Any) -> None:
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind == "turn_started":
            turn_id, started_at = payload.get("turn_id"), payload.get("started_at")
            if isinstance(turn_id, str):
                since = started_at if isinstance(started_at, int | float) else None
                self.unfinished = (turn_id, None if isinstance(since, bool) else since)
        elif kind in ("turn_complete", "turn_aborted"):
            self.unfinished = None

    def note(self, number: int, message: str, *, truncated: bool = False) -> None:
        self.notes.append(RolloutNote(number, message, truncated))

    def record(
        self, number: int, chunk: bytes, *, last_unterminated: bool
    ) -> Mapping[str, Any] | None:
        """The JSON record of a line, or None (with a note unless the line is blank)."""
        try:
            return _decode_record(chunk)
        except _Blank:
            return None
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

    def decode(self, number: int, record: Mapping[str, Any]) -> RolloutLine | None:
        """The line of a record, or None (with a note) when its payload does not decode."""
        try:
            return self._line(number, record)
        except _Malformed as exc:
            self.note(number, f"{exc}; ignored")
            return None
        except RecursionError:
            self.note(number, "JSON that cannot be read: nested too deeply; ignored")
            return None

    def decode_aside(
        self, number: int, record: Mapping[str, Any]
    ) -> tuple[RolloutLine | None, list[RolloutNote]]:
        """:meth:`decode`, its notes returned instead of made."""
        notes, self.notes = self.notes, []
        try:
            line = self.decode(number, record)
        finally:
            aside, self.notes = self.notes, notes
        return line, aside

    def add(self, number: int, line: RolloutLine | None, *, started: bool | None = None) -> None:
        """Append a decoded line; ``started``: whether a well-formed line came before it."""
        if line is None:
            return
        if started is None:
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
        return Rollout(
            self.meta,
            tuple(self.lines),
            tuple(notes),
            path,
            self.epoch,
            self.last_seq,
            self.unfinished,
        )

    def _line(self, number: int, record: Mapping[str, Any]) -> RolloutLine:
        kind, payload = record["type"], record["payload"]
        timestamp = record.get("timestamp")
        if not isinstance(timestamp, str):
            self.note(number, "no timestamp")
            timestamp = None
        match kind:
            case "session_meta":
                return SessionMetaLine(number, timestamp, _payload(payload, SessionMeta, kind))
            case "response_item":
                return ResponseItemLine(number, timestamp, _response_item(payload))
            case "event_msg":
                event_id = record.get("id")
                return EventMsgLine(
                    number,
                    timestamp,
                    _decode(payload, p.EventMsg, kind),
                    _counter(record.get("seq")),
                    event_id if isinstance(event_id, str) else None,
                )
            case "turn_context":
                return TurnContextLine(number, timestamp, self._turn_context(number, payload))
            case "world_state":
                return WorldStateLine(number, timestamp, _decode(payload, WorldState, kind))
            case "compacted":
                return CompactedLine(number, timestamp, self._compacted(number, payload))
            case "ids":
                return IdsLine(number, timestamp, _payload(payload, GeneratedIds, kind))
            case "op":
                return OpLine(number, timestamp, _payload(payload, StartedOp, kind))
            case "trace":
                return TraceLine(number, timestamp, _span(_payload(payload, SessionSpan, kind)))
            case "rules":
                return RulesLine(number, timestamp, _payload(payload, ExecRules, kind))
            case "approval":
                return ApprovalLine(number, timestamp, _payload(payload, ApprovalDecided, kind))
            case "intent":
                return IntentLine(number, timestamp, _payload(payload, ToolIntent, kind))
            case _:
                raise _Malformed(f"unknown line type {kind!r}")

    def _turn_context(self, number: int, payload: Any) -> TurnContext:
        """The payload; a ``world`` that does not decode is left unset, with a note."""
        try:
            return from_json(payload, TurnContext)
        except DecodeError:
            fields = _object(payload, "turn_context")
            _check_fields(fields, TurnContext, "turn_context")
        context = _payload({**fields, "world": None}, TurnContext, "turn_context")
        try:
            world: WorldState = _decode(fields.get("world"), WorldState, "turn_context world")
        except _Malformed as exc:
            self.note(number, f"{exc}; the reference context is left unset")
            return context
        return attrs.evolve(context, world=world)

    def _compacted(self, number: int, payload: Any) -> Compacted:
        """The payload; the parts that do not decode are left unset, each with a note."""
        try:
            return from_json(payload, Compacted)
        except DecodeError:
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
        work_state = fields.get("work_state")
        if work_state is not None and not isinstance(work_state, Mapping):
            self.note(number, "compacted: work_state is not an object; ignored")
            work_state = None
        masked = fields.get("masked_outputs") or {}
        if not isinstance(masked, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in masked.items()
        ):
            self.note(number, "compacted: masked_outputs is not an object of texts; ignored")
            masked = {}
        return Compacted(
            message,
            replacement,
            receipt=receipt,
            work_state=work_state,
            masked_outputs=dict(masked),
            **window,
        )


class _Blank(Exception):
    """A blank line: no record, and nothing to note."""


# The C scanner under json.loads, called directly: a rollout line is an object on one line,
# so the checks json.loads makes around it are done here, and any line the fast way does not
# take goes through json.loads for its exact error.
_scan_json = json.scanner.make_scanner(
    json.JSONDecoder(parse_constant=_json.reject_constant, parse_float=_json.finite_float)  # type: ignore[arg-type]
)


def _decode_record(chunk: bytes) -> Mapping[str, Any]:
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed("not UTF-8 text") from exc
    record: Any = None
    if text.startswith("{"):
        try:
            record, end = _scan_json(text, 0)
        except (StopIteration, ValueError, RecursionError):
            record = None  # read again below, which says what was wrong
        else:
            if end != len(text) and not text[end:].isspace():
                record = None
    if record is None:
        if not text.strip():
            raise _Blank
        try:
            record = _json.loads(text)
        except json.JSONDecodeError as exc:
            raise _Malformed(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
        except _json.JsonRejected as exc:
            raise _Malformed(f"JSON that cannot be read: {exc}") from exc
    if not isinstance(record, dict):
        raise _Malformed(f"expected a JSON object, got {type(record).__name__}")
    if "type" not in record or "payload" not in record:
        missing = [key for key in ("type", "payload") if key not in record]
        raise _Malformed(f"missing field {' and '.join(repr(key) for key in missing)}")
    if not isinstance(record["type"], str):
        raise _Malformed("'type' is not a string")
    return record


def _counter(value: Any) -> int | None:
    """An epoch or seq of a line's envelope: a positive int, or None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _response_item(payload: Any) -> p.ResponseItem:
    """A history item: the common shapes directly, anything else through the codec.

    Items are most of what a resume decodes. Messages with text parts, function calls and
    their outputs, without fields beyond their own, are built here with the checks the codec
    makes (the classes' own validators, strings without lone surrogates); the result is the
    codec's, which is used for every other payload and for anything these checks reject.
    """
    item = _common_item(payload) if isinstance(payload, dict) else None
    return item if item is not None else _decode(payload, p.ResponseItem, "response_item")


_MESSAGE_KEYS = frozenset({"type", "role", "content", "id"})
_TEXT_PART_KEYS = frozenset({"type", "text"})
_CALL_KEYS = frozenset({"type", "name", "arguments", "call_id", "id"})
_OUTPUT_KEYS = frozenset({"type", "call_id", "output"})


def _text(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and not has_lone_surrogate(value)


def _common_item(payload: dict[str, Any]) -> p.ResponseItem | None:
    kind = payload.get("type")
    item_id = payload.get("id")
    if item_id is not None and not _text(item_id):
        return None
    if kind == "message":
        content = payload.get("content")
        role = payload.get("role")
        if not (payload.keys() <= _MESSAGE_KEYS and isinstance(content, list) and role in p.ROLES):
            return None
        parts: list[p.ContentPart] = []
        for part in content:
            if not (isinstance(part, dict) and part.keys() == _TEXT_PART_KEYS):
                return None
            text = part["text"]
            if not _text(text):
                return None
            if part["type"] == "input_text":
                parts.append(p.InputText(text))
            elif part["type"] == "output_text":
                parts.append(p.OutputText(text))
            else:
                return None
        return p.Message(role, parts, item_id)
    if kind == "function_call":
        name, arguments, call_id = (payload.get(key) for key in ("name", "arguments", "call_id"))
        if payload.keys() <= _CALL_KEYS and _text(name) and _text(arguments) and _text(call_id):
            return p.FunctionCall(name, arguments, call_id, item_id)
        return None
    if kind == "function_call_output":
        call_id, output = payload.get("call_id"), payload.get("output")
        if payload.keys() <= _OUTPUT_KEYS and _text(call_id) and _text(output):
            return p.FunctionCallOutput(call_id, output)
    return None


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


def _payload(payload: Any, cls: type[T], what: str) -> T:
    """A payload decoded by the codec. One it refuses is described field by field when a field
    of a plain type is missing or of another type, else in the codec's words."""
    try:
        return from_json(payload, cls)
    except DecodeError as exc:
        _check_fields(_object(payload, what), cls, what)
        raise _Malformed(f"invalid {what}: {exc}") from exc


def _check_fields(fields: Mapping[str, Any], cls: type, what: str) -> None:
    """Raise for the first field of ``cls`` typed ``str`` or ``int`` (or None) that ``fields``
    lacks, when it has no default, or holds a value of another type."""
    hints = typing.get_type_hints(cls)
    for field in attrs.fields(cls):
        for kind in (str, int):
            if hints[field.name] in (kind, kind | None):
                check = _field if field.default is attrs.NOTHING else _optional
                check(fields, field.name, kind, what)


def _span(span: SessionSpan) -> SessionSpan:
    for name, digits in (("trace_id", 32), ("span_id", 16)):
        value: str = getattr(span, name)
        if len(value) != digits or value.strip("0123456789abcdef") or not value.strip("0"):
            raise _Malformed(
                f"invalid trace: {name!r} is not {digits} lowercase hex digits, not all 0"
            )
    return span


def _optional(fields: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    value = fields.get(name)
    return None if value is None else _typed(value, name, kind, what)


def _typed(value: Any, name: str, kind: type, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Malformed(
            f"invalid {what}: {name!r} should be {kind.__name__}, got {type(value).__name__}"
        )
    return value


__all__ = ["parse_rollout", "read_rollout"]
