"""The work-state record and tool-output masking: pure functions over plain data.

The *work-state record* is what the session saw itself do, kept apart from anything a model
wrote: files read and listed (path, size, content hash), commands run (argv, exit code), tool
errors, entries custom tools add, and the user messages the user pinned. After a compaction it
is rendered as one contextual message within a token budget; when the entries do not fit, the
oldest are folded into per-kind counts. Pinned messages are never folded nor truncated.

*Masking* replaces tool outputs older than the most recent ``keep_recent_tokens`` of the history
by a short placeholder that names the tool, the size and a reference; the ``recall`` tool turns
the reference back into the original output, which the session keeps in its own record.

Invariant: nothing here reads a clock, a file or the network; every function is a function of
its arguments.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import attrs

from .._base import _protocol as p
from .._base._tokens import approx_tokens, item_tokens
from ._compact import is_summary

#: The marker that opens the rendered record (a contextual message: never a real user message).
WORK_STATE_MARKER = "<work_state>"
#: What a masked output starts with; an output that starts with it is never masked again.
MASK_MARKER = "[tool output masked:"

#: Headings of the built-in kinds, in the order the rendered record lists them.
KIND_HEADINGS: Mapping[str, str] = {
    "read": "Files read",
    "list": "Directories listed",
    "command": "Commands run",
    "error": "Tool errors",
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


def command_run(argv: Sequence[str], exit_code: int | None, output: str = "") -> WorkEntry:
    """A command run, with its exit code (None: it was killed at its timeout) and the last
    line of its output, where test runners, linters and builds state their result."""
    shown = " ".join(argv)
    outcome = "timed out" if exit_code is None else f"exit {exit_code}"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = f"; last line: {lines[-1][:200]}" if lines else ""
    return WorkEntry("command", f"{shown} → {outcome}{last}")


def tool_failed(tool: str, message: str) -> WorkEntry:
    """A tool call that failed, with the first line of what the tool said."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    return WorkEntry("error", f"{tool}: {first[:200]}")


@attrs.define
class WorkState:
    """The record of one session: entries oldest first, pinned user messages in order."""

    entries: list[WorkEntry] = attrs.field(factory=list)
    """What the session did, oldest first, one per (kind, key)."""
    pinned: list[str] = attrs.field(factory=list)
    """The texts of the user messages the user pinned, oldest first."""

    def add(self, entry: WorkEntry) -> None:
        """Add ``entry``; one with the same kind and key goes (the new one is newest)."""
        key = (entry.kind, entry.key if entry.key is not None else entry.text)
        self.entries = [
            old
            for old in self.entries
            if (old.kind, old.key if old.key is not None else old.text) != key
        ]
        self.entries.append(entry)

    def pin(self, text: str) -> None:
        """Keep the user message ``text`` verbatim across every compaction."""
        if text not in self.pinned:
            self.pinned.append(text)

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


#: The record takes at most this share of the model's context window (a divisor).
WINDOW_SHARE = 10


def work_state_budget(configured: int, window: int | None, ratio: float = 1.0) -> int:
    """The token budget of the rendered record, in estimate units.

    ``configured`` (``work_state_token_budget``), and never more than a tenth of the context
    ``window`` when it is known, as a server counts tokens (``ratio`` server tokens to an
    estimated one, never fewer than one): on a small window the record must leave room for
    the rest of the new context and an answer.
    """
    if window is None:
        return configured
    return max(0, min(configured, int(window / WINDOW_SHARE / max(1.0, ratio))))


def render_work_state(
    entries: Sequence[WorkEntry],
    budget: int,
    count: Callable[[str], int] = approx_tokens,
) -> str | None:
    """The record as one message within ``budget`` tokens, or None when there is nothing.

    The newest entries are kept; when all of them do not fit, the oldest are folded into a
    line of counts per kind, one entry at a time, until the text fits (with nothing left but
    the counts, the text is returned even if it is over: the counts are the floor).
    """
    if not entries:
        return None
    folded: Counter[str] = Counter()
    start = 0
    while True:
        text = _render(entries[start:], folded)
        if count(text) <= budget or start == len(entries):
            return text
        folded[entries[start].kind] += 1
        start += 1


def _render(entries: Sequence[WorkEntry], folded: Counter[str]) -> str:
    lines = [
        WORK_STATE_MARKER,
        "The session's own record of the work so far, kept across compactions. Each line is "
        "a fact observed by the session, not a recollection; trust it over a summary.",
    ]
    if folded:
        counts = ", ".join(f"{n} {_heading(kind).lower()}" for kind, n in sorted(folded.items()))
        lines.append(f"Earlier, not listed: {counts}.")
    kinds = [*KIND_HEADINGS, *sorted({e.kind for e in entries} - set(KIND_HEADINGS))]
    for kind in kinds:
        texts = [e.text for e in entries if e.kind == kind]
        if texts:
            lines.append(f"{_heading(kind)}:")
            lines.extend(f"- {text}" for text in texts)
    lines.append("</work_state>")
    return "\n".join(lines)


def _heading(kind: str) -> str:
    return KIND_HEADINGS.get(kind, kind.replace("_", " ").capitalize())


def work_state_lines(record: WorkState) -> list[str]:
    """The record for a reader at a checkpoint: one line per kind with its count and newest
    entry, and the pinned messages (first line each)."""
    lines: list[str] = []
    for kind in [*KIND_HEADINGS, *sorted({e.kind for e in record.entries} - set(KIND_HEADINGS))]:
        texts = [e.text for e in record.entries if e.kind == kind]
        if texts:
            lines.append(f"{_heading(kind).lower()}: {len(texts)} (latest: {texts[-1]})")
    for text in record.pinned:
        first = text.strip().splitlines()[0] if text.strip() else ""
        lines.append(f"pinned: {first[:100]}")
    return lines


def carry_work_state(
    history: Sequence[p.ResponseItem],
    record: WorkState,
    budget: int,
    *,
    include_entries: bool,
) -> list[p.ResponseItem]:
    """``history`` (a compacted one) with the pinned messages and the record placed in it.

    Pinned messages missing verbatim from ``history`` are added as user messages, then the
    rendered record (when ``include_entries``); both go before a final summary or compaction
    item so that it stays last, else at the end.
    """
    items = list(history)
    present = {item.text() for item in items if isinstance(item, p.Message) and item.role == "user"}
    added: list[p.ResponseItem] = [
        p.user_message(text) for text in record.pinned if text not in present
    ]
    text = render_work_state(record.entries, budget) if include_entries else None
    if text is not None:
        added.append(p.user_message(text))
    if not added:
        return items
    at = len(items)
    if items and (isinstance(items[-1], p.Compaction) or is_summary(items[-1])):
        at -= 1
    return items[:at] + added + items[at:]


# ----------------------------------------------------------------------------- masking


def mask_placeholder(tool: str, output: str, reference: str) -> str:
    """What stands in the history for a masked output."""
    size = len(output.encode("utf-8"))
    return (
        f"{MASK_MARKER} {tool}, {size} bytes, about {approx_tokens(output)} tokens; "
        f'call recall with reference "{reference}" for the exact output]'
    )


def mask_old_outputs(
    items: Sequence[p.ResponseItem],
    keep_recent_tokens: int,
    estimate: Callable[[p.ResponseItem], int] = item_tokens,
) -> tuple[list[p.ResponseItem], list[str]]:
    """``items`` with tool outputs older than the newest ``keep_recent_tokens`` masked.

    Walks from the newest item back, summing estimates; every tool output that lies wholly
    before that suffix, is not masked yet and would shrink is replaced by its placeholder.
    Returns the new items and the call ids masked (the references), oldest first.
    """
    names = {
        item.call_id: item.name
        for item in items
        if isinstance(item, p.FunctionCall | p.CustomToolCall)
    }
    out = list(items)
    masked: list[str] = []
    recent = 0
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        recent += estimate(item)
        if recent <= keep_recent_tokens:
            continue
        if not isinstance(item, p.FunctionCallOutput | p.CustomToolCallOutput):
            continue
        if item.output.startswith(MASK_MARKER):
            continue
        placeholder = mask_placeholder(names.get(item.call_id, "tool"), item.output, item.call_id)
        if len(placeholder) >= len(item.output):
            continue
        out[index] = attrs.evolve(item, output=placeholder)
        masked.append(item.call_id)
    masked.reverse()
    return out, masked


def masking_suffices(tokens_after: int, limit: int, margin_percent: int) -> bool:
    """Whether masking alone left usage under ``limit`` by at least ``margin_percent``."""
    return tokens_after * 100 <= limit * (100 - margin_percent)


__all__ = [
    "KIND_HEADINGS",
    "MASK_MARKER",
    "WORK_STATE_MARKER",
    "WorkEntry",
    "WorkState",
    "carry_work_state",
    "command_run",
    "content_hash",
    "dir_listed",
    "file_read",
    "mask_old_outputs",
    "mask_placeholder",
    "masking_suffices",
    "render_work_state",
    "tool_failed",
    "work_state_lines",
]
