"""A long session's timeline made to fit a page (``relay show --html``, docs/timeline.md).

:func:`condense` keeps a long session's page small: past :data:`FULL_TURNS` turns, stretches of
uneventful turns are collapsed into one entry each, and so are the eventful turns past the
first and last halves of :data:`EVENTFUL_TURNS`; past :data:`MAX_POINTS` model calls the
chart's points are sampled (every point next to a compaction or a listed error is kept); past
:data:`SUMMARIES_BUDGET` characters of summaries, each summary is cut. The errors, aborted
turns, warnings and malformed lines listed are those of the turns listed, at most
:data:`MAX_ENTRIES` of each (the first and last halves), each message cut at
:data:`MESSAGE_CHARS`: however many there were, the page stays a few MB. Each patch's diffs are
cut at :data:`DIFF_LINES` lines and :data:`DIFF_CHARS` characters, past :data:`PATCH_FILES`
files a patch's others are counted, not listed, and past :data:`DIFFS_BUDGET` characters of
diffs in all, each is cut at :data:`SHORT_DIFF_LINES` and :data:`SHORT_DIFF_CHARS` and only
the first and last of them are kept. The plans listed are those of the turns listed, at most
:data:`MAX_ENTRIES` (and of each, as many steps), their texts cut at :data:`MESSAGE_CHARS`.

Pure functions of the timeline :func:`~._timeline.read_timeline` read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import attrs

from ._timeline import Compaction, ModelCall, Stretch, Timeline, ToolCall, Turn
from ._timeline_edits import Patch, Plan, cut_diff

#: Up to this many turns, every turn is listed; beyond, uneventful stretches are collapsed.
FULL_TURNS = 1_000
#: Up to this many model calls, every one is a point of the chart; beyond, they are sampled.
MAX_POINTS = 2_000
#: Turns listed on each side of an eventful turn, and at each end, when collapsing.
CONTEXT_TURNS = 2
#: A run of uneventful turns shorter than this is listed rather than collapsed.
MIN_STRETCH = 5
#: Above this many characters of summaries in all, each summary is cut to SUMMARY_CHARS.
SUMMARIES_BUDGET = 1_000_000
SUMMARY_CHARS = 4_000
#: The most eventful turns a long timeline lists (the first and the last halves).
EVENTFUL_TURNS = 100
#: The most errors, aborted turns, warnings and notes listed, each (first and last halves).
MAX_ENTRIES = 200
#: A listed error's or warning's message is cut at this many characters.
MESSAGE_CHARS = 2_000
#: A diff is cut at this many lines or characters, whichever comes first.
DIFF_LINES = 400
DIFF_CHARS = 40_000
#: The most files of one patch listed (the others are counted).
PATCH_FILES = 100
#: Above this many characters of diffs in all, each diff is cut at SHORT_DIFF_LINES and
#: SHORT_DIFF_CHARS, and only as many as fit (the first and last halves) are kept.
DIFFS_BUDGET = 1_000_000
SHORT_DIFF_LINES = 40
SHORT_DIFF_CHARS = 2_000

T = TypeVar("T")


def _eventful(turn: Turn) -> bool:
    return bool(turn.compactions or turn.errors) or turn.outcome != "completed"


def kept_turns(turns: Sequence[Turn], eventful_turns: int = EVENTFUL_TURNS) -> list[bool]:
    """Which turns a long timeline lists: each eventful one (a compaction, an error, not
    completed) of the first and last halves of ``eventful_turns`` of them,
    :data:`CONTEXT_TURNS` around each and at both ends; a run of fewer than
    :data:`MIN_STRETCH` other turns is listed too."""
    shown = set(_ends([i for i, turn in enumerate(turns) if _eventful(turn)], eventful_turns))
    keep = [False] * len(turns)
    for index in range(len(turns)):
        if index in shown or index < CONTEXT_TURNS or index >= len(turns) - CONTEXT_TURNS:
            for near in range(max(0, index - CONTEXT_TURNS), index + CONTEXT_TURNS + 1):
                if near < len(turns):
                    keep[near] = True
    start = None
    for index in range(len(turns) + 1):
        if index < len(turns) and not keep[index]:
            start = index if start is None else start
            continue
        if start is not None and index - start < MIN_STRETCH:
            keep[start:index] = [True] * (index - start)
        start = None
    return keep


def _ends(items: Sequence[T], limit: int) -> list[T]:
    """``items``, or past ``limit`` of them, the first and the last halves of ``limit``."""
    if len(items) <= limit:
        return list(items)
    head = limit // 2
    return [*items[:head], *items[len(items) - (limit - head) :]]


def _stretch(at: int, turns: Sequence[Turn]) -> Stretch:
    return Stretch(
        at=at,
        first=turns[0].id,
        last=turns[-1].id,
        turns=len(turns),
        started=turns[0].started,
        ended=turns[-1].ended,
        model_calls=sum(turn.model_calls for turn in turns),
        tool_calls=sum(turn.tool_calls for turn in turns),
        compactions=sum(turn.compactions for turn in turns),
        errors=sum(turn.errors for turn in turns),
        aborted=sum(1 for turn in turns if turn.outcome in ("aborted", "unfinished")),
    )


def sample_calls(calls: Sequence[ModelCall], marks: Iterable[int], limit: int) -> list[ModelCall]:
    """At most about ``limit`` of ``calls``: the first, the last, those at ``marks`` and right
    before each (a compaction's drop, an error), and the lowest and highest of each stretch in
    between, so the chart keeps its shape."""
    if len(calls) <= limit:
        return list(calls)
    chosen = {0, len(calls) - 1}
    for mark in marks:
        chosen.update(index for index in (mark - 1, mark) if 0 <= index < len(calls))
    chosen.update(call.index for call in calls if call.estimated)
    buckets = max(1, (limit - len(chosen)) // 2)
    size = -(-len(calls) // buckets)
    for start in range(0, len(calls), size):
        bucket = calls[start : start + size]
        chosen.add(min(bucket, key=lambda call: call.context_tokens).index)
        chosen.add(max(bucket, key=lambda call: call.context_tokens).index)
    return [calls[index] for index in sorted(chosen)]


def condense(
    timeline: Timeline, *, full_turns: int = FULL_TURNS, max_points: int = MAX_POINTS
) -> Timeline:
    """``timeline`` made to fit a page: see the module doc. A short session is unchanged."""
    turns: list[Turn] = list(timeline.turns)
    stretches: list[Stretch] = []
    if len(turns) > full_turns:
        keep = kept_turns(turns)
        listed: list[Turn] = []
        run: list[Turn] = []
        for turn, kept in zip(turns, keep, strict=True):
            if kept:
                if run:
                    stretches.append(_stretch(len(listed), run))
                    run = []
                listed.append(turn)
            else:
                run.append(turn)
        if run:
            stretches.append(_stretch(len(listed), run))
        turns = listed
    shown = {turn.id for turn in turns}

    def of_listed(turn_id: str | None) -> bool:
        return turn_id is None or turn_id in shown or not stretches

    tools = bound_patches([tool for tool in timeline.tool_calls if of_listed(tool.turn_id)])
    plans = tuple(
        _bound_plan(plan)
        for plan in _ends([p for p in timeline.plans if of_listed(p.turn_id)], MAX_ENTRIES)
    )
    errors = tuple(
        attrs.evolve(error, message=_cut(error.message))
        for error in _ends([e for e in timeline.errors if of_listed(e.turn_id)], MAX_ENTRIES)
    )
    interrupts = tuple(_ends([i for i in timeline.interrupts if of_listed(i.turn_id)], MAX_ENTRIES))
    warnings = tuple(
        attrs.evolve(warning, message=_cut(warning.message))
        for warning in _ends([w for w in timeline.warnings if of_listed(w.turn_id)], MAX_ENTRIES)
    )
    marks = [c.at_call for c in timeline.compactions] + [e.at_call for e in errors]
    marks += [i.at_call for i in interrupts]
    calls = sample_calls(timeline.model_calls, marks, max_points)
    compactions = timeline.compactions
    if sum(len(c.summary or "") for c in compactions) > SUMMARIES_BUDGET:
        compactions = tuple(_cut_summary(c) for c in compactions)
    return attrs.evolve(
        timeline,
        turns=tuple(turns),
        collapsed=tuple(stretches),
        model_calls=tuple(calls),
        sampled=len(calls) < len(timeline.model_calls),
        compactions=compactions,
        tool_calls=tools,
        errors=errors,
        interrupts=interrupts,
        warnings=warnings,
        notes=tuple(_cut(note) for note in _ends(timeline.notes, MAX_ENTRIES)),
        plans=plans,
    )


def bound_patches(tools: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """``tools`` with their patches bounded: see the module doc. Diffs within the bounds are
    unchanged."""
    patches = [(index, tool.patch) for index, tool in enumerate(tools) if tool.patch]
    files = {index: patch.changes[:PATCH_FILES] for index, patch in patches}
    diffs = [(index, n) for index, _ in patches for n in range(len(files[index]))]
    total = sum(min(len(files[i][n].diff), DIFF_CHARS) for i, n in diffs)
    lines, chars, kept = DIFF_LINES, DIFF_CHARS, set(diffs)
    if total > DIFFS_BUDGET:
        lines, chars = SHORT_DIFF_LINES, SHORT_DIFF_CHARS
        kept = set(_ends(diffs, DIFFS_BUDGET // SHORT_DIFF_CHARS))
    out = list(tools)
    for index, patch in patches:
        changes = tuple(
            cut_diff(change, lines, chars)
            if (index, n) in kept or not change.diff
            else attrs.evolve(change, diff="", diff_cut=True)
            for n, change in enumerate(files[index])
        )
        bounded = Patch(patch.success, _cut(patch.message), patch.files, changes)
        if bounded != patch:
            out[index] = attrs.evolve(tools[index], patch=bounded)
    return tuple(out)


def _bound_plan(plan: Plan) -> Plan:
    steps = tuple(
        attrs.evolve(step, step=_cut(step.step)) for step in _ends(plan.steps, MAX_ENTRIES)
    )
    explanation = _cut(plan.explanation) if plan.explanation is not None else None
    return attrs.evolve(plan, steps=steps, explanation=explanation)


def _cut(message: str) -> str:
    return message if len(message) <= MESSAGE_CHARS else message[: MESSAGE_CHARS - 1] + "…"


def _cut_summary(compaction: Compaction) -> Compaction:
    summary = compaction.summary
    if summary is None or len(summary) <= SUMMARY_CHARS:
        return compaction
    return attrs.evolve(compaction, summary=summary[:SUMMARY_CHARS] + "…", summary_cut=True)


__all__ = [
    "DIFFS_BUDGET",
    "DIFF_CHARS",
    "DIFF_LINES",
    "EVENTFUL_TURNS",
    "FULL_TURNS",
    "MAX_ENTRIES",
    "MAX_POINTS",
    "MESSAGE_CHARS",
    "PATCH_FILES",
    "SHORT_DIFF_CHARS",
    "SHORT_DIFF_LINES",
    "bound_patches",
    "condense",
    "kept_turns",
    "sample_calls",
]
