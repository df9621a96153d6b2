"""``relay eval``: replay a corpus of cases under compaction configurations and score them.

A corpus is a folder; each sub-folder with an ``ops.jsonl`` is a case (``docs/eval.md``):

- ``ops.jsonl``: the op script;
- ``model.json``: the model script (absent: the configured provider answers);
- ``fixture/``: the files the tools work on (copied afresh for every run; see ``_fixture.py``);
- ``probes.json``: ``{"facts": [...], "questions": [{"ask": ..., "expect": REGEX}]}``; a fact
  is a string, or a list of the forms it may take (any one present keeps it).

A matrix (``--matrix FILE``, else ``CORPUS/matrix.toml``) is TOML with one ``[[configuration]]``
table per configuration: a ``name`` and any configuration keys, laid over the base
configuration (``--config``, ``-c``). Every case runs under every configuration ``--repeats``
times, in parallel sessions. The scoring is in ``_score.py``.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
import tomllib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._codec import encode_response_item
from .._base._config import (
    Config,
    config_from_dict,
    parse_override,
    resolve_api_key,
    take_api_key,
    unknown_keys,
)
from .._base._errors import ConfigError, RelayError, ScriptError
from .._base._model import CompactRequest, ModelClient, ModelEvent, Prompt
from .._core._hooks import CompactHook, HookInput
from .._core._session import Session
from .._core._summary import summary_prefix
from .._drive._op_script import OpLine, Step, WaitFor, parse_op_script
from .._drive._runner import ScriptRunner
from .._models._responses import request_body
from .._models._scripted import ScriptedModel
from .._open import open_session
from ._fixture import Fixture, copy_fixture, scan_fixture
from ._page import kind_plot, page_data, render_page, retention_plot
from ._score import (
    Fact,
    PatternTimeout,
    RunRecord,
    TimelineStep,
    answer_matches,
    check_expect,
    count_rereads,
    fact_name,
    missing_facts,
    oracle_answer,
    recallable_facts,
    render_table,
    summarize,
    summarize_latency,
)
from ._summaries import SharedSummaries, open_shared_summaries

#: Sessions run at once unless ``--parallel`` says otherwise.
DEFAULT_PARALLEL = 8
#: The longest name of a configuration, in characters.
NAME_MAX = 64


@attrs.frozen
class Question:
    """A question asked after the session, and the pattern a right answer contains."""

    ask: str
    expect: str


@attrs.frozen
class Case:
    """One case of a corpus."""

    name: str
    steps: tuple[Step, ...]
    model_script: Path | None
    fixture: Fixture | None
    facts: tuple[tuple[str, ...], ...]
    questions: tuple[Question, ...]
    kinds: tuple[str, ...] = ()
    """The kind of each fact, in the order of ``facts`` (``fact`` when the probes name none)."""


@attrs.frozen
class Configuration:
    """One configuration of a matrix: its name and the config data laid over the base."""

    name: str
    overrides: Mapping[str, Any]


def load_case(folder: Path) -> Case:
    """Read one case folder.

    Raises:
        ScriptError: the op script or the probes are malformed.
    """
    ops = folder / "ops.jsonl"
    steps = parse_op_script(ops.read_text(encoding="utf-8"), str(ops))
    probes_file = folder / "probes.json"
    probes: Any = {}
    if probes_file.exists():
        try:
            probes = json.loads(probes_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ScriptError(f"{probes_file}: invalid JSON: {exc}") from exc
    if not isinstance(probes, dict) or not set(probes) <= {"facts", "questions"}:
        raise ScriptError(f"{probes_file}: expected an object with facts and questions")
    facts = probes.get("facts", [])
    questions = probes.get("questions", [])
    parsed = [parse_fact(f) for f in facts] if isinstance(facts, list) else [None]
    if any(f is None for f in parsed):
        raise ScriptError(
            f"{probes_file}: each fact must be a non-empty string, a list of them, or an "
            'object {"kind": ..., "forms": [...]} (or "text": ...)'
        )
    forms = [f[1] for f in parsed if f is not None]
    kinds = [f[0] for f in parsed if f is not None]
    if not isinstance(questions, list) or not all(
        isinstance(q, dict) and isinstance(q.get("ask"), str) and isinstance(q.get("expect"), str)
        for q in questions
    ):
        raise ScriptError(f"{probes_file}: each question needs an ask and an expect string")
    for number, question in enumerate(questions, 1):
        wrong = check_expect(question["expect"])
        if wrong is not None:
            raise ScriptError(
                f"{probes_file}: question {number}: expect {question['expect']!r} is not a "
                f"regular expression: {wrong}"
            )
    model = folder / "model.json"
    return Case(
        name=folder.name,
        steps=tuple(steps),
        model_script=model if model.exists() else None,
        fixture=scan_fixture(folder / "fixture"),
        facts=tuple(tuple(f) for f in forms),
        questions=tuple(Question(q["ask"], q["expect"]) for q in questions),
        kinds=tuple(kinds),
    )


#: The kind of a fact whose probes name none.
DEFAULT_KIND = "fact"


def parse_fact(data: Any) -> tuple[str, list[str]] | None:
    """A fact of ``probes.json`` as ``(kind, forms)``, or None when it is not one.

    A fact is a string, a list of the forms it may take, or an object with a ``kind`` and
    either ``forms`` (a list) or ``text`` (one form).
    """
    kind = DEFAULT_KIND
    if isinstance(data, dict):
        if set(data) - {"kind", "forms", "text"} or not isinstance(data.get("kind"), str):
            return None
        kind = data["kind"]
        if not kind or ("forms" in data and "text" in data):
            return None
        data = data["forms"] if "forms" in data else data.get("text")
    forms = [data] if isinstance(data, str) else data
    if not isinstance(forms, list) or not forms:
        return None
    if not all(isinstance(form, str) and form for form in forms):
        return None
    return kind, list(forms)


def load_corpus(corpus: Path) -> list[Case]:
    """Every case of a corpus, in name order.

    Raises:
        ScriptError: the folder holds no case, or a case is malformed.
    """
    if not corpus.is_dir():
        raise ScriptError(f"{corpus}: not a folder")
    folders = sorted(
        (f for f in corpus.rglob("ops.jsonl") if "fixture" not in f.relative_to(corpus).parts),
        key=lambda f: f.parent.relative_to(corpus).as_posix(),
    )
    if not folders:
        raise ScriptError(f"{corpus}: no case in it (a case is a folder with an ops.jsonl)")
    return [load_case(f.parent) for f in folders]


def load_matrix(path: Path | None) -> list[Configuration]:
    """The configurations of a matrix file; without one, the base configuration alone.

    Raises:
        ConfigError: the file cannot be read, a configuration has no name, a name repeats,
            or a key is not a configuration key.
    """
    if path is None:
        return [Configuration("default", {})]
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read matrix {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in matrix {path}: {exc}") from exc
    tables = data.get("configuration")
    if not isinstance(tables, list) or not tables or set(data) != {"configuration"}:
        raise ConfigError(f"{path}: expected one or more [[configuration]] tables and nothing else")
    out: list[Configuration] = []
    for number, table in enumerate(tables, 1):
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{path}: configuration {number} has no name")
        wrong = name_problem(name)
        if wrong is not None:
            raise ConfigError(f"{path}: configuration {number}: {wrong}")
        if name in {c.name for c in out}:
            raise ConfigError(f"{path}: configuration name {name!r} is used twice")
        overrides = {k: v for k, v in table.items() if k != "name"}
        unknown = unknown_keys(overrides)
        if unknown:
            raise ConfigError(
                f"{path}: configuration {name!r}: unknown key(s) {', '.join(unknown)}"
            )
        out.append(Configuration(name, overrides))
    return out


def name_problem(name: str) -> str | None:
    """What makes ``name`` unusable as a configuration's name, or None.

    A name is shown in the table, the reports and the plot, and may be used for a file of its
    own: 1 to :data:`NAME_MAX` printable characters, no ``/`` or ``\\``, not ``.`` or ``..``.
    """
    shown = repr(name if len(name) <= 40 else name[:37] + "...")
    if len(name) > NAME_MAX:
        return f"the name {shown} is longer than {NAME_MAX} characters ({len(name)})"
    bad = next((c for c in name if not c.isprintable()), None)
    if bad is not None:
        return f"the name {shown} has a control character ({bad!r}); a name is printable text"
    for separator in ("/", "\\"):
        if separator in name:
            return f"the name {shown} has a {separator!r}; a name is no path"
    if name in {".", ".."} or not name.strip():
        return f"the name {shown} is not a name"
    return None


def base_config_data(path: str | None, overrides: Sequence[str]) -> dict[str, Any]:
    """The base configuration as plain data: the file, then the ``-c`` overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"invalid TOML in config file {path}: {exc}") from exc
    for override in overrides:
        keys, value = parse_override(override)
        node = data
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    config_from_dict(data)  # a bad base is found before anything runs
    return data


def merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` laid on ``base``: tables merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class ProbeModel:
    """The model of one run: it passes requests on and checks the first one after each
    compaction for the case's facts.

    On a scripted case compaction requests go to a script-less scripted model (its summary is
    a deterministic extract), so every configuration plays the case's script in step, and the
    questions asked after the session, once the script is spent, are answered by
    :func:`oracle_answer`.
    """

    def __init__(
        self,
        inner: ModelClient,
        facts: Sequence[Fact],
        questions: Mapping[str, str],
        *,
        scripted: bool,
        kinds: Sequence[str] = (),
    ) -> None:
        self.inner = inner
        self.kinds = {fact_name(f): k for f, k in zip(facts, kinds, strict=False)}
        self.by_kind: dict[str, list[int]] = {}
        """Per fact kind: ``[checked, kept]``."""
        self.recallable = 0
        """Facts lost from the context that ``recall`` can bring back: the original of a
        masked output whose reference the request names holds them."""
        self.summaries: list[str] = []
        """The summary each compaction installed, in order (what the first request after it
        carries as a summary)."""
        self.summarizer: ModelClient = ScriptedModel() if scripted else inner
        self.scripted = scripted
        self.facts = facts
        self.session: Session | None = None
        self.window = 0
        self.checked = 0
        self.kept = 0
        self.missing: dict[str, None] = {}
        self.seen: dict[str, None] = {}
        self.questions = questions
        self.failures: list[str] = []
        """What went wrong in the reader (an ``expect`` given up)."""

    def _note(self, body: Mapping[str, Any]) -> None:
        absent = set(missing_facts(body, self.facts))
        self.seen.update(dict.fromkeys(n for f in self.facts if (n := fact_name(f)) not in absent))

    async def before_compaction(self, _: HookInput) -> None:
        """Note the facts the history holds as a compaction starts (a tool output that arrived
        just before it was in no request yet)."""
        if self.session is not None:
            items = [encode_response_item(i) for i in self.session.history]
            self._note({"input": items})

    def _check(self, body: Mapping[str, Any]) -> None:
        if self.session is None:
            return
        window = self.session.snapshot().window_number
        if window == self.window:
            return
        self.window = window
        # Only what the session had seen can be kept: a fact of a later step is not checked yet.
        known = [fact for fact in self.facts if fact_name(fact) in self.seen]
        lost = missing_facts(body, known)
        self.checked += len(known)
        self.kept += len(known) - len(lost)
        self.missing.update(dict.fromkeys(lost))
        self.recallable += len(
            recallable_facts(
                body, [f for f in known if fact_name(f) in lost], self.session.snapshot().outputs
            )
        )
        for fact in known:
            name = fact_name(fact)
            counts = self.by_kind.setdefault(self.kinds.get(name, DEFAULT_KIND), [0, 0])
            counts[0] += 1
            counts[1] += name not in lost
        self.summaries += [
            s for s in summaries_in(body.get("input", [])) if s not in self.summaries
        ]

    @asynccontextmanager
    async def stream(self, prompt: Prompt) -> AsyncIterator[AsyncIterator[ModelEvent]]:
        if prompt.purpose == "compact":
            async with self.summarizer.stream(prompt) as events:
                yield events
            return
        body = request_body(prompt)
        self._check(body)
        self._note(body)
        target = self.inner
        items = body.get("input", [])
        asked = _user_text(items[-1]) if items else None
        expect = self.questions.get(asked) if asked is not None else None
        if asked is not None and expect is not None and self.scripted and _spent(self.inner):
            context = json.dumps(items[:-1], ensure_ascii=False)
            try:
                answer = oracle_answer(context, expect)
            except PatternTimeout as exc:
                number = list(self.questions).index(asked) + 1
                self.failures.append(f"question {number}: {exc}")
                answer = "I no longer know."
            target = ScriptedModel({"responses": [answer]})
        async with target.stream(prompt) as events:
            yield events

    async def compact(self, request: CompactRequest) -> Any:
        return await self.summarizer.compact(request)


def summaries_in(items: Sequence[Any]) -> list[str]:
    """The summaries a request's input carries (user messages that hand a summary over)."""
    return [
        text.removeprefix(prefix)
        for item in items
        if (text := _user_text(item)) is not None
        and text.startswith(prefix := summary_prefix() + "\n")
    ]


def _user_text(item: Any) -> str | None:
    if not isinstance(item, Mapping) or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
    return None


def _spent(model: ModelClient) -> bool:
    script = getattr(model, "script", None)
    return script is None or script.next_response >= len(script.responses)


@asynccontextmanager
async def _open_model(config: Config, case: Case) -> AsyncIterator[ModelClient]:
    if case.model_script is not None:
        yield ScriptedModel(case.model_script)
        return
    provider = config.provider()
    if provider.base_url is None:
        raise ConfigError(
            f"case {case.name} has no model.json and the configured provider is the scripted one"
        )
    from .._wire import open_http_client

    async with open_http_client(provider, api_key=resolve_api_key(provider)) as client:
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
) -> RunRecord:
    """Run one case under one configuration once; a failure is recorded, never raised.

    ``summaries``: the compaction model the configuration's summaries go to, shared by the
    runs (see :mod:`._summaries`); None: the session opens its own.
    """
    # The folder's name owes nothing to the case's or the configuration's.
    where = Path(tempfile.mkdtemp(prefix=f"run-{repeat}-", dir=scratch))
    data = merged(base, configuration.overrides)
    data["rollout"] = {"enabled": False}
    data["cwd"] = str(where / "work" if case.fixture is not None else where)
    timeline: list[TimelineStep] = []
    failures: list[str] = []
    latencies: list[int] = []
    answers: dict[str, str | None] = {}
    probe: ProbeModel | None = None
    tokens = compactions = 0
    summarizer = summaries.for_run(data["cwd"]) if summaries is not None else None

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
        if isinstance(msg, p.ErrorEvent):
            failures.append(f"{msg.code}: {msg.message}")
        if isinstance(msg, p.TurnComplete) and msg.turn_id in answers:
            answers[msg.turn_id] = msg.last_agent_message

    questions = [f"probe-{n}" for n in range(1, len(case.questions) + 1)]
    steps: list[Step] = list(case.steps)
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
            inner = await stack.enter_async_context(_open_model(config, case))
            probe = ProbeModel(
                inner,
                case.facts,
                {q.ask: q.expect for q in case.questions},
                scripted=case.model_script is not None,
                kinds=case.kinds,
            )
            watch = CompactHook(point="pre_compact", function=probe.before_compaction)
            session = await stack.enter_async_context(
                open_session(config, model=probe, hooks=[watch], compact_model=summarizer)
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
    answered = 0
    for number, (qid, question) in enumerate(zip(questions, case.questions, strict=True), 1):
        try:
            answered += answer_matches(answers[qid], question.expect)
        except PatternTimeout as exc:
            failures.append(f"question {number}: {exc}")
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
        answered=answered,
        input_tokens=tokens,
        rereads=count_rereads(timeline),
        failure=failures[0] if failures else None,
        # With a shared compaction model, what a summary took is the model's time, replayed or
        # not; the receipts' durations would show a remembered answer as instant.
        latencies_ms=tuple(summarizer.durations_ms if summarizer is not None else latencies),
        by_kind=tuple((k, c[0], c[1]) for k, c in probe.by_kind.items()) if probe else (),
        summaries=tuple(probe.summaries) if probe else (),
    )


async def run_matrix(
    cases: Sequence[Case],
    configurations: Sequence[Configuration],
    base: Mapping[str, Any],
    *,
    repeats: int,
    parallel: int = DEFAULT_PARALLEL,
    progress: Callable[[int, int], None] | None = None,
) -> list[RunRecord]:
    """Every case under every configuration, ``repeats`` times, ``parallel`` sessions at once.

    The records come back in a fixed order (configuration, case, repeat) whatever order the
    runs finished in.
    """
    jobs = [(c, k, n) for c in configurations for k in cases for n in range(repeats)]
    results: list[RunRecord | None] = [None] * len(jobs)
    laid = {c.name: config_from_dict(merged(base, c.overrides)) for c in configurations}
    limiter = anyio.CapacityLimiter(parallel)
    finished = 0
    if progress is not None:
        progress(0, len(jobs))
    with tempfile.TemporaryDirectory(prefix="relay-eval-") as tmp:
        async with open_shared_summaries(laid) as shared:

            async def one(index: int) -> None:
                nonlocal finished
                configuration, case, repeat = jobs[index]
                summarizer = shared.get(configuration.name)
                async with limiter:
                    results[index] = await run_case(
                        case, configuration, base, repeat, Path(tmp), summarizer
                    )
                finished += 1
                if progress is not None:
                    progress(finished, len(jobs))

            async with anyio.create_task_group() as tg:
                for index in range(len(jobs)):
                    tg.start_soon(one, index)
    return [r for r in results if r is not None]


def report(records: Sequence[RunRecord], configurations: Sequence[Configuration]) -> dict[str, Any]:
    """The deterministic report: the summary and every run's figures, latency left out."""
    names = [c.name for c in configurations]
    # A real model's summaries and timings differ between runs: the page shows them (--html).
    left_out = {"latencies_ms", "summaries"}
    runs = [{k: v for k, v in attrs.asdict(r).items() if k not in left_out} for r in records]
    return {"configurations": summarize(records, names), "runs": runs}


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


def check_configurations(
    cases: Sequence[Case], configurations: Sequence[Configuration], base: Mapping[str, Any]
) -> None:
    """Build every configuration once, before anything runs.

    Raises:
        ConfigError: a configuration is invalid, or a case without a model script would be
            answered by no model server.
    """
    unscripted = [case.name for case in cases if case.model_script is None]
    for configuration in configurations:
        config = config_from_dict(merged(base, configuration.overrides))
        if unscripted and config.provider().base_url is None:
            raise ConfigError(
                f"configuration {configuration.name!r}: case {unscripted[0]} has no "
                "model.json, and no model server is configured to answer it"
            )


def eval_command(args: Any) -> int:
    """``relay eval``: returns the exit status (0 every run completed, 1 a run failed, 2 usage)."""
    if args.plot or args.html:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(
                f"relay eval: {'--plot' if args.plot else '--html'} needs matplotlib, from the "
                "bench extra: pip install 'relay-runtime[bench]'",
                file=sys.stderr,
            )
            return 2
    if args.repeats < 1 or args.parallel < 1:
        print("relay eval: --repeats and --parallel must be at least 1", file=sys.stderr)
        return 2
    corpus = Path(args.corpus)
    try:
        cases = load_corpus(corpus)
        if args.live:
            cases = [attrs.evolve(case, model_script=None) for case in cases]
        matrix = Path(args.matrix) if args.matrix else corpus / "matrix.toml"
        configurations = load_matrix(matrix if args.matrix or matrix.exists() else None)
        base = base_config_data(args.config, args.overrides)
        check_configurations(cases, configurations, base)
        # The command owns its process: the keys leave its environment before any run starts.
        for configuration in configurations:
            laid = config_from_dict(merged(base, configuration.overrides))
            take_api_key(laid.provider())
            take_api_key(laid.compaction_provider())
    except (ConfigError, ScriptError, OSError) as exc:
        print(f"relay eval: {exc}", file=sys.stderr)
        return 2
    records = anyio.run(
        lambda: run_matrix(
            cases,
            configurations,
            base,
            repeats=args.repeats,
            parallel=args.parallel,
            progress=_progress_bar(sys.stderr),
        )
    )
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
        Path(args.plot).write_bytes(retention_plot(data["configurations"]))
    if args.html:
        summary = data["configurations"]
        plots = {
            "Retention by fact kind": kind_plot(summary),
            "Retention against input tokens": retention_plot(summary),
        }
        shown = {**data, "corpus": {"cases": len(cases)}, "repeats": args.repeats}
        html = render_page(page_data(shown, records, latency), plots)
        Path(args.html).write_text(html, encoding="utf-8")
    return 1 if any(r.failure for r in records) else 0
