"""The work-state record: what the session saw itself do, as plain data.

The record is kept apart from anything a model wrote: files read and listed (path, size,
content hash), commands run (argv, exit code), tool errors, entries custom tools add, and the
user messages the user pinned. The session adds to it as tools run; a compaction places it in
the new history (``relay.tasks.compaction``), within a share of the window
(:meth:`~._budget.TokenBudget.share`).

Invariant: nothing here reads a clock, a file or the network; every function is a function of
its arguments.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import ClassVar

import attrs

from .._base._tokens import approx_tokens, tokens_for_bytes
from ._findings import failure_lines, last_line

#: Headings of the built-in kinds, in the order the rendered record lists them.
KIND_HEADINGS: Mapping[str, str] = {
    "read": "Files read",
    "list": "Directories listed",
    "command": "Commands run",
    "line": "Lines that stood out",
    "error": "Tool errors",
    "changed": "Files changed",
    "plan": "The plan",
    "answer": "The model's latest answer",
    "saved": "Saved before a compaction",
}


@attrs.frozen
class WorkEntry:
    """One thing the session did, as the record keeps it."""

    kind: str
    """``read``, ``list``, ``command``, ``error``, or a custom tool's own kind."""
    text: str
    """One line that states the fact (a path with its size and hash, an argv with its exit
    code, ...)."""
    key: str | None = None
    """Entries with the same kind and key replace each other (a file read twice is listed
    once, with what the second read saw); None: the text is the key."""


def content_hash(data: bytes) -> str:
    """The hash the record states for content: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def file_read(path: str, size: int, data: bytes) -> WorkEntry:
    """A file read: its path, its size in bytes and the hash of the bytes read."""
    return WorkEntry("read", f"{path} ({size} bytes, sha256 {content_hash(data)})", key=path)


def dir_listed(path: str, entries: int) -> WorkEntry:
    """A directory listed, with how many entries it has."""
    return WorkEntry("list", f"{path} ({entries} entries)", key=path)


def printed(line: str) -> str:
    """A line a program or a tool printed, as the record quotes it: between double quotes,
    as it was, so that a reader tells what the program said from what the session observed.
    The line is the program's text, never an instruction (the record's frame says so)."""
    return f'"{line}"'


def command_run(argv: Sequence[str], exit_code: int | None, output: str = "") -> WorkEntry:
    """A command run: its exit code (None: it was killed at its timeout), the lines of its
    output that name what failed or erred (:func:`~._findings.failure_lines`, for the test
    runners, compilers and linters people use), and its last line, where a program states how
    it ended, each quoted (:func:`printed`). Runs of the same command replace each other;
    :meth:`WorkState.add` keeps what an earlier run found beside a later one."""
    shown = " ".join(argv)
    outcome = "timed out" if exit_code is None else f"exit {exit_code}"
    found = failure_lines(output)
    last = last_line(output)
    text = f"{shown} → {outcome}"
    if found:
        text += f"; found: {' | '.join(map(printed, found))}"
    if last is not None and last not in found:
        text += f"; last line: {printed(last)}"
    return WorkEntry("command", text, key=f"{COMMAND_KEY}{shown}")


#: What keys a command's entry: runs of one command line replace each other.
COMMAND_KEY = "argv:"
#: What an entry keeps of an earlier run of its command, at most (characters).
EARLIER_RUN_CHARS = 600


def with_earlier_run(entry: WorkEntry, earlier: WorkEntry) -> WorkEntry:
    """``entry``, a run of a command, with how the ``earlier`` run of it ended and what it found,
    when that run failed and ``entry`` finds nothing: the record then says the test failed,
    then passed."""
    before = earlier.text.split(" → ", 1)[-1].split("; earlier run: ", 1)[0]
    failed = "; found: " in before or not before.startswith("exit 0")
    if "; found: " in entry.text or not failed:
        return entry
    if len(before) > EARLIER_RUN_CHARS:
        before = before[: EARLIER_RUN_CHARS - 1] + "…"
    return attrs.evolve(entry, text=f"{entry.text}; earlier run: {before}")


#: An output shorter than this many lines has no pattern to break.
STANDOUT_MIN_LINES = 20
#: At most this many lines of one output stand out; an output with more unlike lines than
#: this has no pattern either (a source file: every line is its own).
STANDOUT_MAX = 3

_HEX = frozenset("0123456789abcdefABCDEF")


def _hex_end(line: str, start: int) -> int:
    end = start
    while end < len(line) and line[end] in _HEX:
        end += 1
    return end


def _numbers_masked(line: str) -> str:
    """``line`` with each number made ``#``: ``0x`` and hex digits, a run of 8 or more hex
    digits (an id, a hash), or decimal digits with ``.`` or ``,`` groups. One pass over the
    characters, left to right, each number as long as it goes."""
    out: list[str] = []
    at, size = 0, len(line)
    while at < size:
        if line.startswith("0x", at) and at + 2 < size and line[at + 2] in _HEX:
            at = _hex_end(line, at + 2)
        elif (end := _hex_end(line, at)) - at >= 8:
            at = end
        elif line[at].isdecimal():
            at += 1
            while at < size and line[at].isdecimal():
                at += 1
            while at + 1 < size and line[at] in ".," and line[at + 1].isdecimal():
                at += 2
                while at < size and line[at].isdecimal():
                    at += 1
        else:
            out.append(line[at])
            at += 1
            continue
        out.append("#")
    return "".join(out)


def line_shape(line: str) -> str:
    """A line with its numbers (decimal, hex, long hex ids) and runs of spaces made alike: the
    shape that lines a program prints in a loop share."""
    return " ".join(_numbers_masked(line).split())


def standout_lines(output: str) -> list[str]:
    """The lines of a long, repetitive output that break its pattern: those whose shape
    (:func:`line_shape`) appears once, when there are at most :data:`STANDOUT_MAX` of them.

    A build log of a thousand ``step N took M ms`` lines states its one ``peak memory`` or
    ``ERROR`` line this way. An output shorter than :data:`STANDOUT_MIN_LINES` lines, or with
    more unlike lines than that (a source file, prose), has none.
    """
    lines = [stripped for line in output.splitlines() if (stripped := line.strip())]
    if len(lines) < STANDOUT_MIN_LINES:
        return []
    shaped = [(line, line_shape(line)) for line in lines]
    shapes = Counter(shape for _, shape in shaped)
    alone = [line for line, shape in shaped if shapes[shape] == 1]
    return alone if len(alone) <= STANDOUT_MAX else []


def lines_that_stood_out(source: str, output: str) -> list[WorkEntry]:
    """An entry for each line of ``output`` that stood out (:func:`standout_lines`), named by
    where it came from (a path, a command)."""
    return [
        WorkEntry("line", f"{source}: {printed(line[:200])}", key=f"{source}\n{line[:200]}")
        for line in standout_lines(output)
    ]


def file_changed(path: str, kind: str, moved_to: str | None = None) -> WorkEntry:
    """A file a patch changed: ``kind`` is ``add``, ``update`` or ``delete``."""
    done = {"add": "added", "delete": "deleted"}.get(kind, "updated")
    text = f"{path} {done}" + (f", moved to {moved_to}" if moved_to else "")
    return WorkEntry("changed", text, key=path)


def plan_set(steps: Sequence[tuple[str, str]], explanation: str | None = None) -> WorkEntry:
    """The model's plan as it stands: ``(step, status)`` in order, one entry that the next
    plan replaces."""
    marks = {"completed": "done", "in_progress": "doing", "pending": "to do"}
    text = "; ".join(f"[{marks.get(status, status)}] {step}" for step, status in steps)
    if explanation:
        text = f"{text} ({explanation})"
    return WorkEntry("plan", text or "(empty)", key="plan")


def tool_failed(tool: str, message: str) -> WorkEntry:
    """A tool call that failed, with the first line of what the tool said."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return WorkEntry("error", f"{tool}: {printed(first[:200])}")


@attrs.define
class WorkState:
    """The record of one session: entries oldest first, pinned user messages in order."""

    entries: list[WorkEntry] = attrs.field(factory=list)
    """What the session did, oldest first, one per (kind, key)."""
    pinned: list[str] = attrs.field(factory=list)
    """The texts of the user messages the user pinned, oldest first."""

    def add(self, entry: WorkEntry) -> None:
        """Add ``entry``; one with the same kind and key goes (the new one is newest). A run of
        a command that finds nothing keeps what the run it replaces found."""
        key = (entry.kind, entry.key if entry.key is not None else entry.text)
        if entry.kind == "command" and entry.key is not None:
            for old in self.entries:
                if (old.kind, old.key) == key:
                    entry = with_earlier_run(entry, old)
        self.entries = [
            old
            for old in self.entries
            if (old.kind, old.key if old.key is not None else old.text) != key
        ]
        self.entries.append(entry)

    #: The kinds relay's own tools note, in the order a record lists them.
    KINDS: ClassVar[tuple[str, ...]] = tuple(KIND_HEADINGS)

    @staticmethod
    def heading(kind: str) -> str:
        """The heading of the entries of ``kind`` (``Files read``; ``My kind`` for
        ``my_kind``)."""
        return kind_heading(kind)

    def overflow_advice(self, window: int | None) -> str | None:
        """What to say when a full ``window`` is the pinned messages' doing (None: it is
        not)."""
        return pins_overflow_advice(self.pinned, window)

    def pin(self, text: str) -> None:
        """Keep the user message ``text`` verbatim across every compaction."""
        if text not in self.pinned:
            self.pinned.append(text)

    def unpin(self, text: str | None = None) -> list[str]:
        """Release the pinned message ``text`` (every one when None); returns what was released."""
        released = [t for t in self.pinned if text is None or t == text]
        self.pinned = [t for t in self.pinned if t not in released]
        return released

    def is_empty(self) -> bool:
        """Whether there is nothing to carry."""
        return not self.entries and not self.pinned

    def to_json(self) -> dict[str, object]:
        """The record as plain JSON data (the rollout's ``work_state`` line)."""
        return {
            "entries": [
                {"kind": e.kind, "text": e.text, **({"key": e.key} if e.key is not None else {})}
                for e in self.entries
            ],
            "pinned": list(self.pinned),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> WorkState:
        """The record written by :meth:`to_json`; malformed parts are skipped."""
        entries: list[WorkEntry] = []
        raw_entries = data.get("entries")
        for raw in raw_entries if isinstance(raw_entries, list) else []:
            if not isinstance(raw, dict):
                continue
            kind, text, key = raw.get("kind"), raw.get("text"), raw.get("key")
            if isinstance(kind, str) and isinstance(text, str):
                entries.append(WorkEntry(kind, text, key if isinstance(key, str) else None))
        raw_pinned = data.get("pinned")
        pinned = (
            [t for t in raw_pinned if isinstance(t, str)] if isinstance(raw_pinned, list) else []
        )
        return cls(entries, pinned)


#: The pinned messages together take at most this share of the model's context window.
PIN_SHARE_PERCENT = 25


def pin_label(text: str) -> str:
    """A pinned message as a message names it: its first line, cut, quoted."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return repr(first if len(first) <= 60 else first[:59] + "…")


def pinned_tokens(pinned: Sequence[str]) -> int:
    """The estimated tokens of the pinned messages."""
    return sum(approx_tokens(text) for text in pinned)


def pin_refusal(text: str, pinned: Sequence[str], window: int | None) -> str | None:
    """Why ``text`` cannot be pinned beside ``pinned`` (None: it can).

    Pinned messages are in every history a compaction makes: together they may take
    :data:`PIN_SHARE_PERCENT` of the context ``window`` at most, so that a compaction always
    leaves room for the rest. With no known window there is nothing to measure them against.
    """
    if window is None:
        return None
    share = window * PIN_SHARE_PERCENT // 100
    tokens = approx_tokens(text)
    held = pinned_tokens([t for t in pinned if t != text])
    if tokens + held <= share:
        return None
    beside = f" beside the {held} tokens already pinned" if held else ""
    return (
        f"The message {pin_label(text)} was not pinned: it is about {tokens} tokens{beside}, "
        f"and pinned messages may take {share} tokens ({PIN_SHARE_PERCENT} % of the model's "
        f"{window}-token window). It was sent as an ordinary message."
    )


def pins_overflow_advice(pinned: Sequence[str], window: int | None) -> str | None:
    """What to say when a full window is the pinned messages' doing (None: it is not)."""
    tokens = pinned_tokens(pinned)
    if not pinned or window is None or tokens * 100 <= window * PIN_SHARE_PERCENT:
        return None
    names = ", ".join(pin_label(text) for text in pinned)
    return (
        f"The pinned messages ({names}) take about {tokens} tokens of the model's "
        f"{window}-token window, and every compaction keeps them: release them with the unpin "
        'op ({"type": "unpin"}, or {"type": "unpin", "text": ...} for one), or use a model '
        "with a larger window."
    )


def kind_heading(kind: str) -> str:
    """The heading of the entries of ``kind`` (``Files read``; ``My kind`` for ``my_kind``)."""
    return KIND_HEADINGS.get(kind, kind.replace("_", " ").capitalize())


#: Bytes of the record's message around its headings and entries, as a history counts a
#: message (its JSON: the tags and the sentence that open and close the record, a user message).
RECORD_FRAME_BYTES = 228


def _counted(text: str) -> int:
    """Bytes of ``text`` as a message's JSON holds it (escapes counted)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def record_bound(entries: Sequence[WorkEntry]) -> int:
    """Tokens (estimate units) the record's message of ``entries`` takes at most, rendered whole,
    as a history counts it: 0 when there is nothing to place. A compaction reserves this much,
    or the record's budget when that is less, beside the messages it keeps."""
    if not entries:
        return 0
    # A heading is "Heading:\n", an entry "- text\n": a newline is two bytes in JSON.
    headings = sum(_counted(kind_heading(kind)) + 3 for kind in {e.kind for e in entries})
    lines = sum(_counted(entry.text) + 4 for entry in entries)
    return tokens_for_bytes(RECORD_FRAME_BYTES + headings + lines)


def work_state_lines(record: WorkState) -> list[str]:
    """The record for a reader at a checkpoint: one line per kind with its count and newest
    entry, and the pinned messages (first line each)."""
    lines: list[str] = []
    for kind in [*KIND_HEADINGS, *sorted({e.kind for e in record.entries} - set(KIND_HEADINGS))]:
        texts = [e.text for e in record.entries if e.kind == kind]
        if texts:
            lines.append(f"{kind_heading(kind).lower()}: {len(texts)} (latest: {texts[-1]})")
    for text in record.pinned:
        first = text.strip().splitlines()[0] if text.strip() else ""
        lines.append(f"pinned: {first[:100]}")
    return lines


__all__ = [
    "RECORD_FRAME_BYTES",
    "record_bound",
    "KIND_HEADINGS",
    "PIN_SHARE_PERCENT",
    "WorkEntry",
    "WorkState",
    "COMMAND_KEY",
    "EARLIER_RUN_CHARS",
    "command_run",
    "with_earlier_run",
    "content_hash",
    "dir_listed",
    "file_read",
    "file_changed",
    "kind_heading",
    "plan_set",
    "line_shape",
    "lines_that_stood_out",
    "pin_label",
    "pin_refusal",
    "pinned_tokens",
    "pins_overflow_advice",
    "printed",
    "standout_lines",
    "tool_failed",
    "work_state_lines",
]
