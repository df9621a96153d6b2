"""The figures of ``relay eval`` (``docs/eval.md``): plain functions over plain data.

A run is one case under one configuration, once; :class:`RunRecord` is what it observed.
:func:`summarize` turns every run into the per-configuration figures, each with its spread
over the repeats; :func:`render_table` prints them. Nothing here reads a clock: the summary of
a scripted corpus is the same bytes every time. Wall-clock compaction latency is kept apart
(:func:`summarize_latency`) and never enters the summary.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import regex

from ._answers import (
    GIVEN_UP,
    MISSED,
    RIGHT,
    UNANSWERED,
    Asked,
    InjectionFinding,
    QuestionVerdict,
    cut_text,
    planted_form,
)

#: A step of a run's timeline: a tool call's ``(name, arguments)``, or ``None`` for a compaction.
TimelineStep = tuple[str, str] | None


@attrs.frozen
class RunRecord:
    """What one run of one case under one configuration observed."""

    case: str
    """The case's name."""
    config: str
    """The configuration's name."""
    repeat: int
    """Which repeat (from 0)."""
    compactions: int = 0
    """Compactions installed during the run."""
    facts_checked: int = 0
    """Facts looked for: the case's facts times the requests checked (one per compaction)."""
    facts_kept: int = 0
    """Of those, the facts found in the request."""
    facts_recallable: int = 0
    """Of those not found, the facts ``recall`` can bring back (a masked output's original,
    whose reference the request names, holds them)."""
    missing: tuple[str, ...] = ()
    """Facts absent from at least one first request after a compaction, in the case's order."""
    questions: int = 0
    """Probe questions asked."""
    answered: int = 0
    """Probe questions whose answer matched the expected pattern."""
    input_tokens: int = 0
    """Input tokens of every model request of the run, summaries included."""
    rereads: int = 0
    """Tool calls that repeated an identical call made before a compaction."""
    failure: str | None = None
    """Why the run failed (an error event, an exception), or None."""
    latencies_ms: tuple[int, ...] = attrs.field(default=(), eq=False)
    """Wall-clock duration of each compaction; not part of the deterministic summary."""
    by_kind: tuple[tuple[str, int, int], ...] = ()
    """Per fact kind: ``(kind, facts looked for, facts found)``."""
    summaries: tuple[str, ...] = attrs.field(default=(), eq=False)
    """The summaries the run's compactions installed (a real model's differ between runs)."""
    answers: tuple[str, ...] = attrs.field(default=(), eq=False)
    """The answers to the questions, in order (a real model's differ between runs)."""
    injection_cases: int = 0
    """1 when the case plants an instruction aimed at the summary (a fact of kind
    ``injection``), else 0."""
    injected: int = 0
    """1 when a summary of the run, or an answer to a question, says what the planted
    instruction asked for."""
    first_requests: int = 0
    """First requests after a compaction whose usage the server reported."""
    prefilled_after: int = 0
    """Tokens of those requests the server read anew (their input less what its prompt cache
    held)."""
    cached_after: int = 0
    """Tokens of those requests the server's prompt cache held."""
    wall_ms: int = attrs.field(default=0, eq=False)
    """Wall-clock duration of the run; not part of the deterministic summary."""
    verdicts: tuple[QuestionVerdict, ...] = attrs.field(default=(), eq=False)
    """Each question with its answer (cut) and its verdict, in order."""
    injection_found: tuple[InjectionFinding, ...] = attrs.field(default=(), eq=False)
    """The summaries and answers that say what a planted instruction asked for."""
    summaries_installed: int = 0
    """Summaries a model wrote that a compaction installed (a retry's included)."""
    summaries_retried: int = 0
    """Of those, the ones a retry wrote after the first summary was refused."""
    summaries_refused: int = 0
    """Summaries refused, relay's record installed in their place."""


#: A fact: a string, or its alternatives (any one present keeps it; the first names it).
Fact = str | Sequence[str]


def fact_name(fact: Fact) -> str:
    """The name of a fact in reports: the fact, or its first alternative."""
    return fact if isinstance(fact, str) else fact[0]


def missing_facts(request: Mapping[str, Any], facts: Sequence[Fact]) -> list[str]:
    """The names of the facts that do not appear in a request body (instructions included)."""
    text = json.dumps(
        [request.get("instructions"), request.get("input"), request.get("messages")],
        ensure_ascii=False,
    )
    return [
        fact_name(fact)
        for fact in facts
        if not any(
            form in text or _escaped(form) in text
            for form in ((fact,) if isinstance(fact, str) else fact)
        )
    ]


def recallable_facts(
    request: Mapping[str, Any], facts: Sequence[Fact], originals: Mapping[str, str]
) -> list[str]:
    """The names of ``facts`` that the original of a masked output holds, whose reference the
    request names: ``recall`` brings them back, though the context lacks them."""
    text = json.dumps(
        [request.get("instructions"), request.get("input"), request.get("messages")],
        ensure_ascii=False,
    )
    named = [output for reference, output in originals.items() if reference in text]
    return [
        fact_name(fact)
        for fact in facts
        if any(
            form in output
            for output in named
            for form in ((fact,) if isinstance(fact, str) else fact)
        )
    ]


def _escaped(fact: str) -> str:
    # A fact inside a JSON string in the request appears with its quotes escaped.
    return json.dumps(fact, ensure_ascii=False)[1:-1]


def count_rereads(timeline: Iterable[TimelineStep]) -> int:
    """Tool calls identical (name and arguments) to one made before a compaction that precedes
    them: what the model asks again because the compaction lost it.

    A call repeated with no compaction in between is not a re-read; each repeated call counts
    once however many times it was made before.
    """
    before: set[tuple[str, str]] = set()
    since: set[tuple[str, str]] = set()
    count = 0
    for step in timeline:
        if step is None:
            before |= since
            since = set()
            continue
        key = (step[0], canonical_arguments(step[1]))
        if key in before:
            count += 1
        since.add(key)
    return count


def canonical_arguments(arguments: str) -> str:
    """Arguments as sorted compact JSON, so key order and spacing do not hide a repeat."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments


#: How long one match of an ``expect`` pattern may take, in seconds, before it is given up.
MATCH_TIMEOUT_S = 1.0


class PatternTimeout(Exception):
    """An ``expect`` pattern took longer than :data:`MATCH_TIMEOUT_S` to match: it backtracks
    too much on the text (a nested quantifier such as ``(a+)+``, overlapping alternatives)."""


def check_expect(pattern: str) -> str | None:
    """Why ``pattern`` is not a regular expression, or None when it is one."""
    try:
        regex.compile(pattern, _FLAGS)
    except regex.error as exc:
        return str(exc)
    return None


_FLAGS = regex.IGNORECASE | regex.VERSION0


def _given_up(pattern: str) -> PatternTimeout:
    shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
    return PatternTimeout(
        f"matching expect {shown!r} took longer than {MATCH_TIMEOUT_S:g} s and was given up "
        "(the pattern backtracks too much: a nested quantifier such as (a+)+, or alternatives "
        "that overlap)"
    )


def answer_matches(answer: str | None, pattern: str) -> bool:
    """Whether an answer contains the expected pattern (a regular expression, any case).

    The match runs for at most :data:`MATCH_TIMEOUT_S`.

    Raises:
        PatternTimeout: it ran longer.
    """
    if answer is None:
        return False
    try:
        return regex.search(pattern, answer, _FLAGS, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise _given_up(pattern) from None


def oracle_answer(context: str, pattern: str) -> str:
    """The scripted reader's answer: every line of its context that holds the expected pattern.

    It answers right exactly when the answer is still in the context, which is what a question
    measures on a scripted case. The search runs for at most :data:`MATCH_TIMEOUT_S`.

    Raises:
        PatternTimeout: it ran longer.
    """
    try:
        found = [
            m.group(0) for m in regex.finditer(pattern, context, _FLAGS, timeout=MATCH_TIMEOUT_S)
        ]
    except TimeoutError:
        raise _given_up(pattern) from None
    return "; ".join(dict.fromkeys(found)) if found else "I no longer know."


def judge_answers(
    questions: Sequence[Asked],
    answers: Sequence[str | None],
    injection: Sequence[Sequence[str]] = (),
) -> tuple[tuple[QuestionVerdict, ...], list[str]]:
    """Each question's verdict beside its answer (None: no answer came), and the failures of
    the judging (``question N: …``, a pattern given up)."""
    verdicts: list[QuestionVerdict] = []
    failures: list[str] = []
    for number, (question, answer) in enumerate(zip(questions, answers, strict=True), 1):
        try:
            right = answer_matches(answer, question.expect)
        except PatternTimeout as exc:
            failures.append(f"question {number}: {exc}")
            verdict = GIVEN_UP
        else:
            verdict = RIGHT if right else MISSED if answer is not None else UNANSWERED
        shown, cut = cut_text(answer or "")
        verdicts.append(
            QuestionVerdict(
                number=number,
                ask=question.ask,
                expect=question.expect,
                verdict=verdict,
                answer=shown,
                cut=cut,
                injected=bool(answer) and planted_form(injection, answer or "") is not None,
            )
        )
    return tuple(verdicts), failures


def spread(values: Sequence[float | None]) -> dict[str, float | None]:
    """Mean, min, max and spread (max - min) of a figure over repeats, rounded for JSON."""
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "min": None, "max": None, "spread": None}
    low, high = min(known), max(known)
    return {
        "mean": round(statistics.fmean(known), 4),
        "min": round(low, 4),
        "max": round(high, 4),
        "spread": round(high - low, 4),
    }


def _repeat_figures(runs: Sequence[RunRecord]) -> dict[str, float | None]:
    checked = sum(r.facts_checked for r in runs)
    asked = sum(r.questions for r in runs)
    return {
        "retention": sum(r.facts_kept for r in runs) / checked if checked else None,
        "recallable": sum(r.facts_recallable for r in runs) / checked if checked else None,
        "accuracy": sum(r.answered for r in runs) / asked if asked else None,
        "input_tokens": float(sum(r.input_tokens for r in runs)),
        "compactions": float(sum(r.compactions for r in runs)),
        "rereads": float(sum(r.rereads for r in runs)),
        "failures": float(sum(r.failure is not None for r in runs)),
        "injection": _ratio(sum(r.injected for r in runs), sum(r.injection_cases for r in runs)),
        "prefill_after_compaction": _ratio(
            sum(r.prefilled_after for r in runs), sum(r.first_requests for r in runs)
        ),
        "cached_after_compaction": _ratio(
            sum(r.cached_after for r in runs), sum(r.first_requests for r in runs)
        ),
        "summaries_installed": float(sum(r.summaries_installed for r in runs)),
        "summaries_retried": float(sum(r.summaries_retried for r in runs)),
        "summaries_refused": float(sum(r.summaries_refused for r in runs)),
    }


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _kinds(runs: Sequence[RunRecord]) -> list[str]:
    """The fact kinds the runs looked for, in order of first appearance."""
    return list(dict.fromkeys(kind for r in runs for kind, _, _ in r.by_kind))


def _kind_retention(runs: Sequence[RunRecord], kind: str) -> float | None:
    checked = sum(c for r in runs for k, c, _ in r.by_kind if k == kind)
    kept = sum(f for r in runs for k, _, f in r.by_kind if k == kind)
    return kept / checked if checked else None


FIGURES = (
    "retention",
    "recallable",
    "accuracy",
    "input_tokens",
    "compactions",
    "rereads",
    "failures",
    "injection",
    "prefill_after_compaction",
    "cached_after_compaction",
    "summaries_installed",
    "summaries_retried",
    "summaries_refused",
)

#: The baselines ``relay eval --live`` runs beside the matrix: no compaction at all, and every
#: history item but the last turn dropped.
CEILING, FLOOR = "ceiling", "floor"


def add_baselines(summary: dict[str, Any]) -> None:
    """Give each configuration its task success against the baselines, when both ran:
    ``of_ceiling`` (its success ÷ the ceiling's) and ``gap_closed`` (how much of the way from
    the floor to the ceiling it went); None where the ceiling's success, or the gap, is 0."""
    if CEILING not in summary or FLOOR not in summary:
        return
    top = summary[CEILING]["accuracy"]["mean"]
    bottom = summary[FLOOR]["accuracy"]["mean"]
    for figures in summary.values():
        mine = figures["accuracy"]["mean"]
        known = mine is not None and top is not None and bottom is not None
        figures["of_ceiling"] = round(mine / top, 4) if known and top else None
        gap = top - bottom if known else 0
        figures["gap_closed"] = round((mine - bottom) / gap, 4) if known and gap else None


def summarize(records: Sequence[RunRecord], configs: Sequence[str]) -> dict[str, Any]:
    """Per configuration, each figure over the whole corpus per repeat, then its spread.

    Also, per configuration and case, the facts some repeat lost, the failures, the questions
    some repeat did not answer right and the runs that followed a planted instruction, so a
    figure can be traced to the case behind it (and, in the runs, to the answers).
    """
    out: dict[str, Any] = {}
    for name in configs:
        mine = [r for r in records if r.config == name]
        repeats = sorted({r.repeat for r in mine})
        per_repeat = [_repeat_figures([r for r in mine if r.repeat == n]) for n in repeats]
        cases: dict[str, Any] = {}
        for case in sorted({r.case for r in mine}):
            runs = sorted((r for r in mine if r.case == case), key=lambda r: r.repeat)
            lost = sorted({fact for r in runs for fact in r.missing})
            failures = [r.failure for r in runs if r.failure is not None]
            retained = [r.facts_kept / r.facts_checked if r.facts_checked else None for r in runs]
            missed = sorted({v.number for r in runs for v in r.verdicts if v.verdict != RIGHT})
            cases[case] = {
                "retention": spread(retained),
                "lost": lost,
                "failures": failures,
                "missed": missed,
                "injected": sum(r.injected for r in runs),
            }
        out[name] = {
            "repeats": len(repeats),
            **{figure: spread([f[figure] for f in per_repeat]) for figure in FIGURES},
            "retention_by_kind": {
                kind: spread(
                    [_kind_retention([r for r in mine if r.repeat == n], kind) for n in repeats]
                )
                for kind in _kinds(mine)
            },
            "cases": cases,
        }
    return out


def summarize_latency(records: Sequence[RunRecord], configs: Sequence[str]) -> dict[str, Any]:
    """Per configuration, the wall-clock compaction latency in ms (median per repeat, spread),
    and the median wall-clock duration of a run."""
    out: dict[str, Any] = {}
    for name in configs:
        mine = [r for r in records if r.config == name]
        medians: list[float | None] = []
        runs: list[float | None] = []
        for n in sorted({r.repeat for r in mine}):
            times = [t for r in mine if r.repeat == n for t in r.latencies_ms]
            medians.append(float(statistics.median(times)) if times else None)
            walls = [r.wall_ms for r in mine if r.repeat == n and r.wall_ms]
            runs.append(float(statistics.median(walls)) if walls else None)
        out[name] = {"compaction_latency_ms": spread(medians), "run_ms": spread(runs)}
    return out


def figure_text(figure: Mapping[str, float | None], kind: str) -> str:
    """A figure as the table shows it: its mean, ± half its spread over the repeats when it
    varied; ``kind`` is ``percent``, ``count`` or ``tokens``; ``–`` when nothing was measured."""
    mean, width = figure["mean"], figure["spread"]
    if mean is None or width is None:
        return "–"
    if kind == "percent":
        return f"{mean * 100:.1f}% ±{width * 100 / 2:.1f}" if width else f"{mean * 100:.1f}%"
    if kind == "count":
        return f"{mean:.1f} ±{width / 2:.1f}" if width else f"{mean:g}"
    return f"{mean:,.0f} ±{width / 2:,.0f}" if width else f"{mean:,.0f}"


def render_table(summary: Mapping[str, Any], latency: Mapping[str, Any] | None = None) -> str:
    """The summary as a fixed-width table (mean ±half the spread over repeats; ``installed``
    and ``refused``: the summaries a model wrote that were installed, and refused), followed by
    the table of retention by fact kind."""
    header = ["configuration", "retention", "recallable", "accuracy", "input tokens", "compactions"]
    header += ["installed", "refused"]
    if latency is not None:
        header.append("latency ms")
    header += ["re-reads", "failures"]
    rows = [header]
    for name, fig in summary.items():
        row = [
            name,
            figure_text(fig["retention"], "percent"),
            figure_text(fig["recallable"], "percent"),
            figure_text(fig["accuracy"], "percent"),
            figure_text(fig["input_tokens"], "tokens"),
            figure_text(fig["compactions"], "count"),
            _figure_or_dash(fig.get("summaries_installed"), "count"),
            _figure_or_dash(fig.get("summaries_refused"), "count"),
        ]
        if latency is not None:
            row.append(figure_text(latency[name]["compaction_latency_ms"], "tokens"))
        row += [figure_text(fig["rereads"], "count"), figure_text(fig["failures"], "count")]
        rows.append(row)
    tables = [_fixed_width(rows), render_live_table(summary), render_kind_table(summary)]
    return "\n\n".join(t for t in tables if t)


def _figure_or_dash(figure: Mapping[str, float | None] | None, kind: str) -> str:
    """:func:`figure_text`, or ``–`` for a figure a summary does not have (an older report)."""
    return "–" if figure is None else figure_text(figure, kind)


def render_live_table(summary: Mapping[str, Any]) -> str:
    """Task success against the baselines, injection success and the first request after a
    compaction, a row per configuration (empty when none of them was measured)."""
    live = any(
        fig.get("of_ceiling") is not None
        or fig["injection"]["mean"] is not None
        or fig["cached_after_compaction"]["mean"]
        for fig in summary.values()
    )
    if not live:
        return ""
    rows = [
        [
            "task success",
            "success",
            "of ceiling",
            "gap closed",
            "injection",
            "prefilled after",
            "cached after",
        ]
    ]
    for name, fig in summary.items():
        rows.append(
            [
                name,
                figure_text(fig["accuracy"], "percent"),
                _share(fig.get("of_ceiling")),
                _share(fig.get("gap_closed")),
                figure_text(fig["injection"], "percent"),
                figure_text(fig["prefill_after_compaction"], "tokens"),
                figure_text(fig["cached_after_compaction"], "tokens"),
            ]
        )
    return _fixed_width(rows)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def render_kind_table(summary: Mapping[str, Any]) -> str:
    """Retention per fact kind, a row per configuration (empty when no kind was looked for)."""
    kinds = list(
        dict.fromkeys(kind for fig in summary.values() for kind in fig.get("retention_by_kind", {}))
    )
    if not kinds:
        return ""
    rows = [["retention by kind", *kinds]]
    for name, fig in summary.items():
        per = fig.get("retention_by_kind", {})
        rows.append([name, *(figure_text(per[k], "percent") if k in per else "–" for k in kinds)])
    return _fixed_width(rows)


def _fixed_width(rows: Sequence[Sequence[str]]) -> str:
    """A header row and rows as columns: the first left-aligned, the others right-aligned,
    with a rule under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
