"""``relay eval``: replay a corpus of cases under compaction configurations and score them
(docs/eval.md).

Every case of the corpus (``_corpus.py``) runs under every configuration of the matrix
``--repeats`` times, in parallel sessions, each on a :class:`~._probe.ProbeModel` over the
model client the face opens (``open_model_client``), as a session would open it. The scoring
is in ``_score.py``, the page of ``--html`` in ``_page.py``, the spans of ``--otel`` in
``_trace.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._config import Config, config_from_dict, take_api_key
from .._base._errors import ConfigError, RelayError, ScriptError
from .._base._model import ModelClient
from .._core._hooks import CompactHook
from .._drive._op_script import OpLine, Step, WaitFor
from .._drive._runner import ScriptRunner
from .._open import open_model_client, open_session
from .._open._tasks import BUILTIN_COMPACTOR, load_object
from ._answers import RIGHT, injection_findings, summary_counts
from ._corpus import (
    Case,
    Configuration,
    base_config_data,
    baselines,
    check_configurations,
    corpus_code,
    load_corpus,
    load_matrix,
    merged,
)
from ._fixture import copy_fixture
from ._page import kind_plot, page_data, render_page, retention_plot, success_plot
from ._probe import ProbeModel
from ._score import (
    RunRecord,
    TimelineStep,
    add_baselines,
    count_rereads,
    fact_name,
    judge_answers,
    render_table,
    summarize,
    summarize_latency,
)
from ._summaries import RunSummaries, SharedSummaries, open_shared_summaries

if TYPE_CHECKING:
    from ._trace import EvalTracer

#: Sessions run at once unless ``--parallel`` says otherwise.
DEFAULT_PARALLEL = 8


@asynccontextmanager
async def _open_model(
    config: Config, case: Case, shared: RunSummaries | None = None
) -> AsyncIterator[ModelClient]:
    """The model client of a run, opened as a session opens it: the case's model script, or
    the configured provider when the case has none (``shared``: through the evaluation's one
    client for it)."""
    if case.model_script is None and shared is not None:
        yield shared
        return
    if case.model_script is not None:
        scripted = attrs.evolve(
            config, model_provider="scripted", model_script=str(case.model_script)
        )
        async with open_model_client(scripted) as client:
            yield client
        return
    if config.provider().base_url is None:
        raise ConfigError(
            f"case {case.name} has no model.json and the configured provider is the scripted one"
        )
    async with open_model_client(config) as client:
        yield client


def _timeline_step(msg: p.EventMsg) -> TimelineStep | bool:
    """A tool call or a compaction for the re-read count; False for any other event."""
    if isinstance(msg, p.ItemCompleted):
        if isinstance(msg.item, p.ToolCallItem):
            return (msg.item.name, msg.item.arguments)
        if isinstance(msg.item, p.ContextCompactionItem):
            return None
    return False


async def run_case(
    case: Case,
    configuration: Configuration,
    base: Mapping[str, Any],
    repeat: int,
    scratch: Path,
    summaries: SharedSummaries | None = None,
    tracer_provider: Any = None,
    turns: SharedSummaries | None = None,
) -> RunRecord:
    """Run one case under one configuration once; a failure is recorded, never raised.

    ``summaries``: the compaction model the configuration's summaries go to, shared by the
    runs (see :mod:`._summaries`); None: the session opens its own. ``turns``: likewise, the
    model that answers a live case's turns. ``tracer_provider``: where the session's spans go
    (default: the global provider; docs/observability.md).
    """
    # The folder's name owes nothing to the case's or the configuration's.
    where = Path(tempfile.mkdtemp(prefix=f"run-{repeat}-", dir=scratch))
    started = anyio.current_time()
    data = merged(base, configuration.overrides)
    if not configuration.compacts:
        data.pop("model_auto_compact_token_limit", None)
        data.pop("model_post_turn_compact_threshold_percent", None)
        data.pop("background_compact_threshold_percent", None)
    data["rollout"] = {"enabled": False}
    data["cwd"] = str(where / "work" if case.fixture is not None else where)
    timeline: list[TimelineStep] = []
    failures: list[str] = []
    latencies: list[int] = []
    receipts: list[p.CompactionReceipt] = []
    answers: dict[str, str | None] = {}
    probe: ProbeModel | None = None
    tokens = compactions = 0
    summarizer = summaries.for_run(data["cwd"]) if summaries is not None else None
    live = turns.for_run(data["cwd"]) if turns is not None and case.model_script is None else None

    def sink(event: p.Event, _: dict[str, Any]) -> None:
        msg = event.msg
        step = _timeline_step(msg)
        if step is not False and step is not True:
            timeline.append(step)
        if (
            isinstance(msg, p.ItemCompleted)
            and isinstance(msg.item, p.ContextCompactionItem)
            and msg.item.receipt is not None
        ):
            latencies.append(msg.item.receipt.duration_ms)
            receipts.append(msg.item.receipt)
        if isinstance(msg, p.ErrorEvent):
            failures.append(f"{msg.code}: {msg.message}")
        if isinstance(msg, p.TurnComplete) and msg.turn_id in answers:
            answers[msg.turn_id] = msg.last_agent_message

    questions = [f"probe-{n}" for n in range(1, len(case.questions) + 1)]
    steps = list(case.steps) if configuration.compacts else without_compactions(case.steps)
    for qid, question in zip(questions, case.questions, strict=True):
        answers[qid] = None
        turn = p.UserTurn(items=(p.Text(question.ask),))
        steps += [
            OpLine(line=0, id=qid, op=turn),
            WaitFor(line=0, type="turn_complete", match={"turn_id": qid}),
        ]
    try:
        if case.fixture is not None:
            copy_fixture(case.fixture, where / "work")
        config = config_from_dict(data)
        async with AsyncExitStack() as stack:
            inner = await stack.enter_async_context(_open_model(config, case, live))
            probe = ProbeModel(
                inner,
                case.facts,
                {q.ask: q.expect for q in case.questions},
                scripted=case.model_script is not None,
                kinds=case.kinds,
                lead=case.lead,
            )
            watch = CompactHook(point="pre_compact", function=probe.before_compaction)
            session = await stack.enter_async_context(
                open_session(
                    config,
                    model=probe,
                    hooks=[watch],
                    compact_model=summarizer,
                    tracer_provider=tracer_provider,
                    compactor=fresh_window_compactor if configuration.fresh_window else None,
                )
            )
            probe.session = session
            runner = ScriptRunner(session, sink, script_name=case.name)
            await runner.run(steps)
            tokens = session.snapshot().total_usage.input_tokens
            compactions = session.snapshot().window_number
    except (RelayError, OSError) as exc:
        failures.append(f"{type(exc).__name__}: {exc}")
    except BaseExceptionGroup as group:
        failures.append(f"{type(group).__name__}: {group}")
    if probe is not None:
        failures += probe.failures
    said = [answers[q] for q in questions]
    verdicts, given_up = judge_answers(case.questions, said, case.injection)
    failures += given_up
    written = list(probe.summaries) if probe else []
    found = injection_findings(case.injection, written, said)
    counts = summary_counts(receipts)
    # With a shared model, what a summary took is the model's time, replayed or not; the
    # receipts' durations would show a remembered answer as instant.
    timed = summarizer.durations_ms if summarizer else live.compact_durations_ms if live else None
    return RunRecord(
        case=case.name,
        config=configuration.name,
        repeat=repeat,
        compactions=compactions,
        facts_checked=probe.checked if probe else 0,
        facts_kept=probe.kept if probe else 0,
        facts_recallable=probe.recallable if probe else 0,
        missing=tuple(fact_name(f) for f in case.facts if probe and fact_name(f) in probe.missing),
        questions=len(case.questions),
        answered=sum(v.verdict == RIGHT for v in verdicts),
        input_tokens=tokens,
        rereads=count_rereads(timeline),
        failure=failures[0] if failures else None,
        latencies_ms=tuple(timed if timed is not None else latencies),
        by_kind=tuple((k, c[0], c[1]) for k, c in probe.by_kind.items()) if probe else (),
        summaries=tuple(written),
        answers=tuple(a or "" for a in said),
        injection_cases=1 if case.injection else 0,
        injected=1 if found else 0,
        first_requests=probe.first_requests if probe else 0,
        prefilled_after=probe.prefilled if probe else 0,
        cached_after=probe.cached if probe else 0,
        wall_ms=round((anyio.current_time() - started) * 1000),
        verdicts=verdicts,
        injection_found=found,
        summaries_installed=counts.installed,
        summaries_retried=counts.retried,
        summaries_refused=counts.refused,
    )


def fresh_window_compactor() -> Any:
    """relay's compactor with the token budget's fresh window as its only backend (the
    floor), loaded as a session loads its compactor."""
    compaction = load_object("relay.tasks.compaction:BACKENDS", what="the compaction backends")
    maker = load_object(BUILTIN_COMPACTOR, what="the compactor")
    return maker(
        backends={"token_budget": compaction["token_budget"]},
        select=lambda config, provider: "token_budget",
    )


def without_compactions(steps: Sequence[Step]) -> list[Step]:
    """The op script without its ``compact`` ops and the waits for their end (the ceiling)."""
    skipped = {s.id for s in steps if isinstance(s, OpLine) and isinstance(s.op, p.Compact)}
    return [
        s
        for s in steps
        if not (isinstance(s, OpLine) and s.id in skipped)
        and not (isinstance(s, WaitFor) and s.match.get("turn_id") in skipped - {None})
    ]


def followed(injection: Sequence[Sequence[str]], said: Sequence[str]) -> bool:
    """Whether any of ``said`` (the summaries, the answers) holds a form of an injection fact,
    in any case: the planted instruction was followed (where it was said:
    :func:`._answers.injection_findings`)."""
    return bool(injection_findings(injection, said, ()))


async def run_matrix(
    cases: Sequence[Case],
    configurations: Sequence[Configuration],
    base: Mapping[str, Any],
    *,
    repeats: int,
    parallel: int = DEFAULT_PARALLEL,
    progress: Callable[[int, int], None] | None = None,
    tracing: EvalTracer | None = None,
    finished_run: Callable[[RunRecord, int, int], None] | None = None,
) -> list[RunRecord]:
    """Every case under every configuration, ``repeats`` times, ``parallel`` sessions at once.

    The records come back in a fixed order (configuration, case, repeat) whatever order the
    runs finished in. ``tracing``: the evaluation's spans, a span per run (``_trace.py``).
    ``finished_run``: told each record as its run ends, with the runs done and their total.
    A live case's turns go to one client per provider for the whole evaluation, which
    answers a request it has answered before from memory (:mod:`._summaries`).
    """
    jobs = [(c, k, n) for c in configurations for k in cases for n in range(repeats)]
    results: list[RunRecord | None] = [None] * len(jobs)
    laid = {c.name: config_from_dict(merged(base, c.overrides)) for c in configurations}
    limiter = anyio.CapacityLimiter(parallel)
    finished = 0
    if progress is not None:
        progress(0, len(jobs))
    with tempfile.TemporaryDirectory(prefix="relay-eval-") as tmp:
        live = any(case.model_script is None for case in cases)
        async with (
            open_shared_summaries(laid) as shared,
            open_shared_summaries(laid, turns=True) as shared_turns,
        ):

            async def one(index: int) -> None:
                nonlocal finished
                configuration, case, repeat = jobs[index]
                summarizer = shared.get(configuration.name)
                async with limiter:
                    with _traced_run(tracing, case, configuration, repeat) as finish:
                        record = await run_case(
                            case,
                            configuration,
                            base,
                            repeat,
                            Path(tmp),
                            summarizer,
                            tracing.tracer_provider if tracing is not None else None,
                            shared_turns.get(configuration.name) if live else None,
                        )
                        finish(record)
                    results[index] = record
                finished += 1
                if progress is not None:
                    progress(finished, len(jobs))
                if finished_run is not None:
                    finished_run(record, finished, len(jobs))

            with _traced_evaluation(tracing, cases, configurations, repeats):
                async with anyio.create_task_group() as tg:
                    for index in range(len(jobs)):
                        tg.start_soon(one, index)
    return [r for r in results if r is not None]


def _traced_evaluation(
    tracing: EvalTracer | None,
    cases: Sequence[Case],
    configurations: Sequence[Configuration],
    repeats: int,
) -> contextlib.AbstractContextManager[None]:
    if tracing is None:
        return nullcontext()
    return tracing.evaluation(len(cases), [c.name for c in configurations], repeats)


@contextmanager
def _traced_run(
    tracing: EvalTracer | None, case: Case, configuration: Configuration, repeat: int
) -> Iterator[Callable[[RunRecord], None]]:
    if tracing is None:
        yield lambda record: None
        return
    with tracing.run(case.name, configuration.name, repeat) as finish:
        yield finish


def report(records: Sequence[RunRecord], configurations: Sequence[Configuration]) -> dict[str, Any]:
    """The deterministic report: the summary and every run's figures, with each question's
    answer beside its verdict (``verdicts``) and where a planted instruction was followed
    (``injection_found``); latency left out."""
    names = [c.name for c in configurations]
    # A real model's summaries and timings differ between runs: the page shows them (--html).
    # The answers are kept, cut, beside their verdicts (``verdicts``).
    left_out = {"latencies_ms", "summaries", "answers", "wall_ms"}
    runs = [{k: v for k, v in attrs.asdict(r).items() if k not in left_out} for r in records]
    summary = summarize(records, names)
    add_baselines(summary)
    return {"configurations": summary, "runs": runs}


def _progress_bar(stream: Any) -> Callable[[int, int], None] | None:
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        filled = done * 30 // max(total, 1)
        stream.write(f"\rrelay eval [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} runs")
        if done == total:
            stream.write("\n")
        stream.flush()

    return show


def _progress_line(stream: Any) -> Callable[[RunRecord, int, int], None]:
    """A line on ``stream`` as each run ends (where no progress bar can be drawn)."""

    def show(record: RunRecord, done: int, total: int) -> None:
        retention = (
            f"{record.facts_kept}/{record.facts_checked} facts" if record.facts_checked else "–"
        )
        said = " injected," if record.injected else ""
        outcome = "failed" if record.failure is not None else "ok"
        stream.write(
            f"relay eval [{done}/{total}] {record.config} {record.case} #{record.repeat}: "
            f"{outcome}, {record.answered}/{record.questions} answered, {retention},"
            f"{said} {record.input_tokens:,} input tokens, {record.wall_ms / 1000:.0f} s\n"
        )
        stream.flush()

    return show


def _trusted(code: Sequence[str], trust: bool) -> bool:
    """Whether the corpus may run: it runs nothing of its own, or the command was told to
    trust it; either way what it runs is said on stderr before anything runs."""
    if not code:
        return True
    if trust:
        print("relay eval: --trust-corpus: the corpus runs on this machine:", file=sys.stderr)
    else:
        print(
            "relay eval: the corpus runs code on this machine, and nothing ran; give "
            "--trust-corpus to run it:",
            file=sys.stderr,
        )
    for line in code:
        print(f"  {line}", file=sys.stderr)
    return trust


def eval_command(args: Any) -> int:
    """``relay eval``: returns the exit status (0 every run completed, 1 a run failed, 2 usage)."""
    if args.plot or args.html:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(
                f"relay eval: {'--plot' if args.plot else '--html'} needs matplotlib, from the "
                "plots extra: pip install 'relay-runtime[plots]'",
                file=sys.stderr,
            )
            return 2
    if args.repeats < 1 or args.parallel < 1:
        print("relay eval: --repeats and --parallel must be at least 1", file=sys.stderr)
        return 2
    from .._otel._export import Export, close_export, export_for

    corpus = Path(args.corpus)
    export: Export | None = None
    try:
        cases = load_corpus(corpus)
        if args.live:
            cases = [attrs.evolve(case, model_script=None) for case in cases]
        matrix = Path(args.matrix) if args.matrix else corpus / "matrix.toml"
        configurations = load_matrix(matrix if args.matrix or matrix.exists() else None)
        if args.live:
            named = {c.name for c in configurations}
            configurations = [c for c in baselines() if c.name not in named] + configurations
        base = base_config_data(args.config, args.overrides)
        check_configurations(cases, configurations, base)
        if not _trusted(corpus_code(configurations, base), args.trust_corpus):
            return 2
        # The command owns its process: the keys leave its environment before any run starts.
        for configuration in configurations:
            laid = config_from_dict(merged(base, configuration.overrides))
            take_api_key(laid.provider())
            take_api_key(laid.compaction_provider())
        export = export_for(args.otel, os.environ, sys.stderr, "relay eval")
    except (ConfigError, ScriptError, OSError) as exc:
        print(f"relay eval: {exc}", file=sys.stderr)
        return 2
    tracing: EvalTracer | None = None
    if export is not None:
        from .._otel._values import records_content
        from ._trace import EvalTracer

        content = records_content(config_from_dict(base), os.environ)
        tracing = EvalTracer(export.provider, content=content)
    try:
        records = anyio.run(
            lambda: run_matrix(
                cases,
                configurations,
                base,
                repeats=args.repeats,
                parallel=args.parallel,
                progress=_progress_bar(sys.stderr),
                tracing=tracing,
                finished_run=_progress_line(sys.stderr)
                if args.live and not sys.stderr.isatty()
                else None,
            )
        )
    finally:
        close_export(export, sys.stderr, "relay eval")
    names = [c.name for c in configurations]
    data = report(records, configurations)
    latency = summarize_latency(records, names)
    print(f"{len(cases)} case(s) × {len(names)} configuration(s) × {args.repeats} repeat(s)")
    print(render_table(data["configurations"], latency))
    for record in records:
        if record.failure is not None:
            print(
                f"failed: {record.config} {record.case} #{record.repeat}: {record.failure}",
                file=sys.stderr,
            )
    if args.json:
        out = Path(args.json)
        out.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        timing = out.with_name(out.stem + ".timing.json")
        timing.write_text(json.dumps(latency, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot = success_plot if args.live else retention_plot
        fmt = "svg" if args.plot.endswith(".svg") else "png"
        Path(args.plot).write_bytes(plot(data["configurations"], fmt))
    if args.html:
        summary = data["configurations"]
        plots = {
            "Retention by fact kind": kind_plot(summary),
            "Retention against input tokens": retention_plot(summary),
        }
        if args.live:
            plots["Task success against input tokens"] = success_plot(summary)
        shown = {**data, "corpus": {"cases": len(cases)}, "repeats": args.repeats}
        html = render_page(page_data(shown, records, latency), plots)
        Path(args.html).write_text(html, encoding="utf-8")
    return 1 if any(r.failure for r in records) else 0
