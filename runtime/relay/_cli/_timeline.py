"""A session's timeline, read from its rollout: the data of ``relay show --html``.

:func:`read_timeline` walks the parsed lines of a rollout once and collects what a person looks
for: the turns and how each ended, the context in use at every ``token_count`` against the
window and the auto-compaction limit, every compaction with its receipt and summary, the tool
calls (those whose outputs a masking replaced, and those ``recall`` brought back, marked;
an ``apply_patch`` call with the files it changed and their diffs), each turn's latest plan, the
errors, the aborted turns, the warnings and the work-state record as it stood at the end. Its
JSON form (:func:`timeline_json`) is the page's embedded data, documented in docs/timeline.md.

A long session's timeline is condensed to fit a page by :mod:`._timeline_condense`.

Pure functions of the parsed rollout, but for the sub-agents' rollouts, which
:mod:`._timeline_agents` reads (through a function given, or from their files); nothing here
reads a clock.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from .._base import _protocol as p
from .._core._summary import summary_prefix
from .._rollout._lines import (
    CompactedLine,
    EventMsgLine,
    OpLine,
    ResponseItemLine,
    Rollout,
    RolloutLine,
)
from .._rollout._resume import restore_work_record
from ._timeline_agents import Agent, Load, read_agents
from ._timeline_edits import Patch, Plan, patch_of, plan_of

#: The version of the embedded data's shape; a change that breaks a reader changes it.
FORMAT = "relay-timeline/1"
#: Characters of a user message kept as a turn's ``input``.
INPUT_CHARS = 200


@attrs.frozen
class Session:
    """Which session the timeline shows."""

    id: str | None
    model: str | None
    model_provider: str | None
    cwd: str | None
    created: str | None
    relay_version: str | None
    rollout: str
    model_context_window: int | None
    """The window at the end (of the last turn), when known."""
    auto_compact_token_limit: int | None
    """The limit of the last turn that recorded one."""
    resumed: int
    """How many times the session was resumed in this file."""


@attrs.frozen
class Turn:
    """One turn (one task: a user turn, a ``compact``, a custom op)."""

    id: str
    started: str | None
    ended: str | None
    outcome: str
    """``completed``, ``failed`` (it ended after an ``error``), ``aborted`` or ``unfinished``
    (the session stopped before it ended)."""
    reason: str | None
    """Why it was aborted (``interrupted``, ``replaced``, ``shutdown``, ...)."""
    duration_ms: int | None
    input: str | None
    """The start of its first user message, or the type of its custom op."""
    model_calls: int = 0
    tool_calls: int = 0
    compactions: int = 0
    errors: int = 0


@attrs.frozen
class Stretch:
    """Consecutive turns collapsed into one entry: uneventful ones, or, past the eventful
    turns a page lists, eventful ones too (what they held is counted)."""

    at: int
    """Where it goes among the listed turns: before ``turns[at]`` (at the end when equal to
    their number)."""
    first: str
    last: str
    turns: int
    started: str | None
    ended: str | None
    model_calls: int
    tool_calls: int
    compactions: int = 0
    errors: int = 0
    """``error`` events in its turns."""
    aborted: int = 0
    """Its turns that did not complete (aborted or unfinished)."""


@attrs.frozen
class ModelCall:
    """One ``token_count``: the context a model call used (or, ``estimated``, what relay
    estimates after a compaction installed its history)."""

    index: int
    """Its number among all ``token_count`` events of the rollout, from 0."""
    turn_id: str | None
    time: str | None
    input_tokens: int
    """The response's ``input_tokens`` (``last_token_usage``), likewise below."""
    output_tokens: int
    total_tokens: int
    context_tokens: int
    """Tokens in the context: the response's ``total_tokens``, what the chart draws."""
    session_tokens: int
    """Tokens used by the session so far (``total_token_usage.total_tokens``)."""
    window: int | None
    limit: int | None
    """The auto-compaction limit of its turn."""
    estimated: bool


@attrs.frozen
class Compaction:
    """One installed compaction (a ``compacted`` line)."""

    number: int
    """1, 2, … in the order of the file."""
    turn_id: str | None
    time: str | None
    backend: str | None
    trigger: str | None
    tokens_before: int | None
    tokens_after: int | None
    counted_before: bool
    duration_ms: int | None
    background: bool
    cut: bool
    window_number: int | None
    masked_outputs: int
    summary: str | None
    """The summary a local or remote-V2 backend wrote (without the summary prefix); None for
    a masking, a fresh window or an opaque remote item."""
    summary_cut: bool
    at_call: int
    """How many ``token_count`` events came before it (where the chart marks it)."""


@attrs.frozen
class ToolCall:
    """A tool call the model made."""

    turn_id: str | None
    time: str | None
    name: str
    call_id: str
    masked: bool
    """A later masking replaced its output with a placeholder."""
    recalled: bool
    """A ``recall`` call brought its masked output back."""
    masked_by: int | None
    """The number of the compaction that masked it."""
    reference: str | None
    """For a ``recall`` call: the reference it asked for."""
    patch: Patch | None = None
    """What it changed: its ``patch_apply_end`` (an ``apply_patch`` call that ran)."""


@attrs.frozen
class ErrorEntry:
    """An ``error`` event."""

    turn_id: str | None
    time: str | None
    code: str
    message: str
    at_call: int


@attrs.frozen
class Interrupt:
    """A ``turn_aborted`` event."""

    turn_id: str
    time: str | None
    reason: str
    duration_ms: int
    at_call: int


@attrs.frozen
class WarningEntry:
    """A ``warning`` event."""

    turn_id: str | None
    time: str | None
    message: str


@attrs.frozen
class Counts:
    """Totals over the whole rollout (before any collapsing or sampling)."""

    turns: int
    model_calls: int
    """``token_count`` events: model calls and the estimates after compactions."""
    estimates: int
    """Of those, the estimates after compactions."""
    compactions: int
    tool_calls: int
    masked: int
    recalled: int
    errors: int
    interrupts: int
    warnings: int
    notes: int = 0
    """The reader's notes about malformed lines."""
    patches: int = 0
    """``patch_apply_end`` events: patches applied, or tried and not applied."""
    patches_failed: int = 0
    """Of those, the patches not applied."""
    plan_updates: int = 0
    """``plan_update`` events."""
    agents: int = 0
    """Sub-agents at every depth, in the rollouts read."""


@attrs.frozen
class Timeline:
    """Everything the page shows."""

    session: Session
    counts: Counts
    turns: tuple[Turn, ...]
    collapsed: tuple[Stretch, ...]
    model_calls: tuple[ModelCall, ...]
    sampled: bool
    compactions: tuple[Compaction, ...]
    tool_calls: tuple[ToolCall, ...]
    errors: tuple[ErrorEntry, ...]
    interrupts: tuple[Interrupt, ...]
    warnings: tuple[WarningEntry, ...]
    work_state: dict[str, Any]
    notes: tuple[str, ...]
    plans: tuple[Plan, ...] = ()
    """The latest plan of each turn that set one, in order."""
    agents: tuple[Agent, ...] = ()
    """The sub-agents, in the tree's order (:mod:`._timeline_agents`)."""
    format: str = FORMAT


# --------------------------------------------------------------------------- reading


@attrs.define
class _OpenTurn:
    id: str
    started: str | None
    input: str | None = None
    model_calls: int = 0
    tool_calls: int = 0
    compactions: int = 0
    errors: int = 0

    def close(
        self, ended: str | None, outcome: str, reason: str | None, duration_ms: int | None
    ) -> Turn:
        if outcome == "completed" and self.errors:
            outcome = "failed"
        return Turn(
            self.id,
            self.started,
            ended,
            outcome,
            reason,
            duration_ms,
            self.input,
            self.model_calls,
            self.tool_calls,
            self.compactions,
            self.errors,
        )


def _cut_input(text: str) -> str:
    """A turn's input as the timeline keeps it: on one line, at most ``INPUT_CHARS``."""
    text = " ".join(text.split())
    return text[: INPUT_CHARS - 1] + "…" if len(text) > INPUT_CHARS else text


@attrs.define
class _Reader:
    rollout: Rollout
    turns: list[Turn] = attrs.field(factory=list)
    open: _OpenTurn | None = None
    calls: list[ModelCall] = attrs.field(factory=list)
    compactions: list[Compaction] = attrs.field(factory=list)
    tools: list[dict[str, Any]] = attrs.field(factory=list)
    errors: list[ErrorEntry] = attrs.field(factory=list)
    interrupts: list[Interrupt] = attrs.field(factory=list)
    warnings: list[WarningEntry] = attrs.field(factory=list)
    configured: list[p.SessionConfigured] = attrs.field(factory=list)
    window: int | None = None
    limit: int | None = None
    # Tool calls by call id, newest last: what a masking or a recall refers to.
    by_call_id: dict[str, list[int]] = attrs.field(factory=dict)
    # A custom op, by its id, until its turn starts (it is written when the session handles
    # it: for a queued op, inside the turn it waits behind).
    ops: dict[str, str] = attrs.field(factory=dict)
    # A patch whose call is not read yet, by call id (a call is written before its patch
    # ends, but a file cut or reordered is read as well as it can be).
    patches: dict[str, Patch] = attrs.field(factory=dict)
    patches_ended: int = 0
    patches_failed: int = 0
    # The latest plan of each turn, in the order the turns first set one.
    plans: dict[str | None, Plan] = attrs.field(factory=dict)
    plan_updates: int = 0

    @property
    def turn_id(self) -> str | None:
        return self.open.id if self.open is not None else None

    def end_open_turn(self) -> None:
        if self.open is not None:
            self.turns.append(self.open.close(None, "unfinished", None, None))
            self.open = None

    def line(self, line: RolloutLine) -> None:
        match line:
            case EventMsgLine(msg=msg, timestamp=time):
                self.event(msg, time)
            case ResponseItemLine(item=p.FunctionCall() | p.CustomToolCall() as item):
                self.tool_call(item, line.timestamp)
            case CompactedLine():
                self.compacted(line)
            case OpLine():
                self.ops[line.started.id] = _cut_input(line.text)
            case _:
                pass

    def event(self, msg: p.EventMsg, time: str | None) -> None:
        match msg:
            case p.SessionConfigured():
                self.end_open_turn()
                self.configured.append(msg)
                self.window = msg.model_context_window
            case p.TurnStarted():
                self.end_open_turn()
                self.open = _OpenTurn(msg.turn_id, time, self.ops.pop(msg.turn_id, None))
                self.window = msg.model_context_window
                self.limit = msg.auto_compact_token_limit
            case p.TurnComplete(turn_id=turn_id, duration_ms=ms):
                self.close(turn_id, time, "completed", None, ms)
            case p.TurnAborted(turn_id=turn_id, reason=reason, duration_ms=ms):
                self.interrupts.append(Interrupt(turn_id, time, reason.value, ms, len(self.calls)))
                self.close(turn_id, time, "aborted", reason.value, ms)
            case p.ShutdownComplete():
                self.end_open_turn()
            case p.UserMessage(message=message) if self.open and self.open.input is None:
                self.open.input = _cut_input(message)
            case p.TokenCount(info=p.TokenUsageInfo() as info):
                last = info.last_token_usage
                if info.model_context_window is not None:
                    self.window = info.model_context_window
                self.calls.append(
                    ModelCall(
                        len(self.calls),
                        self.turn_id,
                        time,
                        last.input_tokens,
                        last.output_tokens,
                        last.total_tokens,
                        last.total_tokens,
                        info.total_token_usage.total_tokens,
                        info.model_context_window,
                        self.limit,
                        info.estimated,
                    )
                )
                if self.open is not None and not info.estimated:
                    self.open.model_calls += 1
            case p.ErrorEvent(message=message, code=code):
                self.errors.append(
                    ErrorEntry(self.turn_id, time, code.value, message, len(self.calls))
                )
                if self.open is not None:
                    self.open.errors += 1
            case p.WarningEvent(message=message):
                self.warnings.append(WarningEntry(self.turn_id, time, message))
            case p.PatchApplyEnd():
                self.patch_ended(msg)
            case p.PlanUpdate():
                planned = msg.turn_id or self.turn_id
                earlier = self.plans.get(planned)
                self.plans[planned] = plan_of(
                    msg, planned, time, earlier.updates + 1 if earlier else 1
                )
                self.plan_updates += 1
            case _:
                pass

    def patch_ended(self, msg: p.PatchApplyEnd) -> None:
        self.patches_ended += 1
        self.patches_failed += not msg.success
        target = self.latest_call(msg.call_id)
        if target is not None and target["patch"] is None:
            target["patch"] = patch_of(msg)
        else:
            self.patches[msg.call_id] = patch_of(msg)

    def close(
        self, turn_id: str, time: str | None, outcome: str, reason: str | None, ms: int
    ) -> None:
        if self.open is None or self.open.id != turn_id:
            # An end without its start (a file cut at its beginning): a turn of its own.
            self.end_open_turn()
            self.open = _OpenTurn(turn_id, None)
        self.turns.append(self.open.close(time, outcome, reason, ms))
        self.open = None

    def tool_call(self, item: p.FunctionCall | p.CustomToolCall, time: str | None) -> None:
        reference: str | None = None
        if item.name == "recall":
            reference = _recall_reference(item)
        self.by_call_id.setdefault(item.call_id, []).append(len(self.tools))
        self.tools.append(
            {
                "turn_id": self.turn_id,
                "time": time,
                "name": item.name,
                "call_id": item.call_id,
                "masked": False,
                "recalled": False,
                "masked_by": None,
                "reference": reference,
                "patch": self.patches.pop(item.call_id, None),
            }
        )
        if self.open is not None:
            self.open.tool_calls += 1
        if reference is not None:
            target = self.latest_call(reference.rpartition("#")[0] or reference)
            if target is not None:
                target["recalled"] = True

    def latest_call(self, call_id: str) -> dict[str, Any] | None:
        found = self.by_call_id.get(call_id)
        return self.tools[found[-1]] if found else None

    def compacted(self, line: CompactedLine) -> None:
        number = len(self.compactions) + 1
        for reference in line.compacted.masked_outputs:
            target = self.latest_call(reference.rpartition("#")[0] or reference)
            if target is not None and not target["masked"]:
                target["masked"] = True
                target["masked_by"] = number
        receipt = line.compacted.receipt
        self.compactions.append(
            Compaction(
                number=number,
                turn_id=self.turn_id,
                time=line.timestamp,
                backend=receipt.backend if receipt else None,
                trigger=receipt.trigger.value if receipt else None,
                tokens_before=receipt.tokens_before if receipt else None,
                tokens_after=receipt.tokens_after if receipt else None,
                counted_before=receipt.counted_before if receipt else False,
                duration_ms=receipt.duration_ms if receipt else None,
                background=receipt.background if receipt else False,
                cut=receipt.cut if receipt else False,
                window_number=line.compacted.window_number,
                masked_outputs=len(line.compacted.masked_outputs),
                summary=_summary(line),
                summary_cut=False,
                at_call=len(self.calls),
            )
        )
        if self.open is not None:
            self.open.compactions += 1


def _recall_reference(item: p.FunctionCall | p.CustomToolCall) -> str | None:
    text = item.arguments if isinstance(item, p.FunctionCall) else item.input
    try:
        args = json.loads(text)
    except ValueError:
        return None
    reference = args.get("reference") if isinstance(args, dict) else None
    return reference if isinstance(reference, str) and reference else None


def _summary(line: CompactedLine) -> str | None:
    """The summary a compaction installed, without the opening every summary shares: only
    the local backend writes one (a remote backend's is an opaque item, and a masking or a
    fresh window has none)."""
    prefix = summary_prefix() + "\n"
    text = line.compacted.message
    if text.startswith(prefix):
        text = text[len(prefix) :]
    return text if text.strip() else None


def read_timeline(rollout: Rollout, *, agents: bool = True, load: Load | None = None) -> Timeline:
    """The whole timeline of ``rollout``, nothing collapsed or sampled; with ``agents``, its
    sub-agents' too, their rollouts read through ``load`` (the files, by default)."""
    reader = _Reader(rollout)
    for line in rollout.lines:
        reader.line(line)
    if reader.open is not None:
        reader.end_open_turn()
    meta = rollout.meta
    first = reader.configured[0] if reader.configured else None
    last = reader.configured[-1] if reader.configured else None
    session = Session(
        id=meta.id if meta else (first.session_id if first else None),
        model=last.model if last else (meta.model if meta else None),
        model_provider=last.model_provider if last else (meta.model_provider if meta else None),
        cwd=last.cwd if last else (meta.cwd if meta else None),
        created=meta.created if meta else None,
        relay_version=last.relay_version if last else (meta.relay_version if meta else None),
        rollout=rollout.name,
        model_context_window=reader.window,
        auto_compact_token_limit=reader.limit,
        resumed=sum(1 for configured in reader.configured if configured.resumed),
    )
    tools = tuple(ToolCall(**fields) for fields in reader.tools)
    record, _ = restore_work_record(rollout.lines)
    tree, agent_count = read_agents(rollout, load) if agents else ((), 0)
    return Timeline(
        session=session,
        counts=Counts(
            turns=len(reader.turns),
            model_calls=len(reader.calls),
            estimates=sum(1 for call in reader.calls if call.estimated),
            compactions=len(reader.compactions),
            tool_calls=len(tools),
            masked=sum(1 for tool in tools if tool.masked),
            recalled=sum(1 for tool in tools if tool.recalled),
            errors=len(reader.errors),
            interrupts=len(reader.interrupts),
            warnings=len(reader.warnings),
            notes=len(rollout.notes),
            patches=reader.patches_ended,
            patches_failed=reader.patches_failed,
            plan_updates=reader.plan_updates,
            agents=agent_count,
        ),
        turns=tuple(reader.turns),
        collapsed=(),
        model_calls=tuple(reader.calls),
        sampled=False,
        compactions=tuple(reader.compactions),
        tool_calls=tools,
        errors=tuple(reader.errors),
        interrupts=tuple(reader.interrupts),
        warnings=tuple(reader.warnings),
        work_state=record.to_json(),
        notes=tuple(str(note) for note in rollout.notes),
        plans=tuple(reader.plans.values()),
        agents=tree,
    )


def timeline_json(timeline: Timeline) -> dict[str, Any]:
    """The timeline as JSON data (docs/timeline.md)."""
    data: dict[str, Any] = attrs.asdict(timeline, value_serializer=_plain)
    return {"format": data.pop("format"), **data}


def _plain(instance: Any, field: Any, value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


__all__ = [
    "FORMAT",
    "Compaction",
    "Counts",
    "ErrorEntry",
    "Interrupt",
    "ModelCall",
    "Session",
    "Stretch",
    "Timeline",
    "ToolCall",
    "Turn",
    "WarningEntry",
    "read_timeline",
    "timeline_json",
]
