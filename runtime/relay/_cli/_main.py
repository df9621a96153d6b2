"""The ``relay`` command line (``README.md`` and ``docs/cli.md``).

Exit status of ``relay run`` and ``relay resume``:

- 0: every turn completed, or was interrupted or replaced on purpose;
- 1: a turn failed (it ended with an ``error`` event), an op was refused, or the runtime failed;
- 2: bad usage, config, op script or rollout: a message on stderr, and nothing ran;
- 130 / 143: SIGINT / SIGTERM ended the session (the running task aborted with reason
  ``shutdown``, the rollout flushed, ``shutdown_complete`` last, one line on stderr);
- 141: standard output was closed (a pipe whose reader went away): ended the same way;
  standard output that cannot be written otherwise (closed, a full disk) is exit 1, ended the
  same way, with ``relay: cannot write to standard output: REASON`` on stderr.

The signals and the standard streams that end a run early are watched by :mod:`._streams`.

``relay show`` exits 2 only when the file cannot be read; like ``relay resume`` it reports
malformed lines as warnings on stderr, naming the line, and goes on without them.

Only ``argparse`` is imported up front: ``relay --version`` and ``relay --help`` need nothing else,
and each command imports what it uses.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._parser import EXIT_USAGE, build_parser
from ._preflight import app_server_config, check_config, codex_base_url, sort_codex_flags
from ._streams import (
    END_BOUND,
    EXIT_FAILED,
    EXIT_OK,
    Interrupted,
    discard_stdout,
    end_after,
    ended_early_status,
    exit_before_start,
    hold_standard_descriptors,
    lingering_warning,
    signal_status,
    to_stdout,
)

if TYPE_CHECKING:
    from .._base._config import Config
    from .._core._exec_gate import ApprovalCallback
    from .._drive._op_script import Step
    from .._otel._export import Export
    from .._rollout._lines import Rollout
    from ._codex_stream import CodexExecStream
    from ._exec import ExecRequest
    from ._outcome import RunOutcome
    from ._pretty import PrettyPrinter

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

USAGE_HINT = """\
relay run: no op script given, and standard input is a terminal.
  relay run SCRIPT.jsonl           run an op script (JSON Lines of ops)
  relay run - < SCRIPT.jsonl       read the script from standard input
  relay run --help                 every option
Example: relay run examples/hello.jsonl --model-script examples/hello.model.json
"""


def _config(args: argparse.Namespace) -> Config:
    import attrs

    from .._base._config import load_config
    from .._base._errors import ConfigError

    config = load_config(args.config, args.overrides)
    if args.tasks:
        given: dict[str, str] = {}
        for text in args.tasks:
            op_type, sep, factory = text.partition("=")
            if not sep or not op_type.strip() or not factory.strip():
                raise ConfigError(f"--task {text!r}: expected OP=FACTORY")
            given[op_type.strip()] = factory.strip()
        config = attrs.evolve(config, tasks={**config.tasks, **given})
    if getattr(args, "compactor", None):
        config = attrs.evolve(config, compactor=args.compactor)
    if args.model_script:
        config = attrs.evolve(config, model_script=args.model_script)
    if args.rollout_dir:
        config = attrs.evolve(config, rollout=attrs.evolve(config.rollout, dir=args.rollout_dir))
    config = codex_base_url(config, args, _chosen_keys)
    config.provider()  # an unknown provider is a usage error, found before anything runs
    return config


def _chosen_keys(args: argparse.Namespace) -> set[str]:
    """The top-level config keys the command line chose: ``-c`` keys, the keys of the
    ``--config`` file, and ``model_provider`` for ``--model-script``."""
    import tomllib

    from .._base._config import parse_override

    chosen = {parse_override(text)[0][0] for text in args.overrides}
    if args.config:
        with open(args.config, "rb") as file:  # load_config has read it already
            chosen.update(tomllib.load(file))
    if args.model_script:
        chosen.add("model_provider")
    return chosen


def _newest_rollout(config: Config) -> str:
    """The most recently written rollout under the rollout directory."""
    from .._base._errors import RolloutError
    from ._exec import rollout_root

    root = rollout_root(config)
    found: list[tuple[float, str]] = []
    for path in root.glob("**/rollout-*.jsonl"):
        try:
            status = path.stat()
        except OSError:
            continue  # removed while looking
        if status.st_size:  # an empty file holds no session to resume
            found.append((status.st_mtime, str(path)))
    if not found:
        raise RolloutError(f"resume --last: no rollout file under {root}")
    return max(found)[1]


def _read_script(name: str, factories: Mapping[str, Any]) -> tuple[str, list[Step]]:
    """The op script ``name``, checked against the op types of ``factories``, and each custom
    op by its factory when the factory can check one (its ``validate``)."""
    from pathlib import Path

    from .._base._errors import ScriptError
    from .._drive._op_script import parse_op_script, validate_ops
    from .._open import custom_op_types

    if name == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ScriptError("the op script on standard input is not UTF-8 text") from exc
        label = "stdin"
    else:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read op script {name}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ScriptError(f"op script {name} is not UTF-8 text") from exc
        label = Path(name).name
    steps = parse_op_script(text, label, custom_op_types(factories))
    validate_ops(steps, factories, label)
    return label, steps


def _check_registered(name: str, op_types: Sequence[str], registered: frozenset[str]) -> None:
    """A resumed session needs a task for every type of custom op it ran."""
    from .._base._errors import ConfigError

    unregistered = [op_type for op_type in op_types if op_type not in registered]
    if unregistered:
        raise ConfigError(
            f"{name}: the session ran {', '.join(map(repr, unregistered))} ops and no task is "
            "registered for them: register one with --task OP=FACTORY, [tasks] in the "
            "configuration, or an installed package's relay.tasks entry point"
        )


async def _run(
    config: Config,
    label: str,
    steps: list[Step],
    printer: PrettyPrinter | None,
    outcome: RunOutcome,
    resume: Rollout | None,
    model_name: str | None,
    answer_only: bool = False,
    tracer_provider: Any = None,
    codex: CodexExecStream | None = None,
    *,
    on_approval: ApprovalCallback | None = None,
) -> Interrupted:
    """Run the script; returns what ended it early, if anything did. With ``answer_only``, no
    event is written (the caller prints the answer); with ``codex``, Codex's events are.
    ``on_approval`` decides approvals instead of the script's ops."""
    import json

    import anyio

    from .._base import _protocol as p
    from .._base._util import single_exception
    from .._core._work_state import WorkState
    from .._drive._runner import ScriptRunner
    from .._open import open_session

    def output_closed(error: OSError) -> None:
        # Nobody reads the events any more (`relay run … | head -1`), or they cannot be
        # written (closed, a full disk): end the session as a shutdown, as a signal would,
        # rather than run the script unseen.
        discard_stdout()
        interrupted.close_output(error)

    def write_line(line: str) -> None:
        if not interrupted.output_closed:
            try:
                sys.stdout.write(line)
                sys.stdout.flush()
            except OSError as error:
                output_closed(error)

    def sink(event: p.Event, msg: dict[str, Any]) -> None:
        if codex is not None and not interrupted.signalled:
            # A signal ends Codex's stream where it stands, as Codex's: the SDK's aborted
            # call rejects with its AbortError (docs/codex-compat.md, Aborting).
            for line in codex.translate(event):
                write_line(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        if printer is not None and not interrupted.output_closed:
            try:
                printer.event(event)
            except OSError as error:
                output_closed(error)
        outcome.observe(event)

    interrupted = Interrupted()

    async def watch(signals: Any) -> None:
        async for signum in signals:
            interrupted.receive(int(signum))

    async def serve(signals: Any) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, signals)
            if resume is None:
                opened = open_session(
                    config, tracer_provider=tracer_provider, on_approval=on_approval
                )
            else:
                # Only a resume reads rollouts: `run` leaves the reader unimported.
                from .._open import resume_session

                opened = resume_session(
                    resume,
                    config,
                    model_name=model_name,
                    tracer_provider=tracer_provider,
                    on_approval=on_approval,
                    keep_rules=False,  # in place already, but for what the command line chose
                )
            async with opened as session:
                if printer is not None:
                    # A resumed session's record is shown at its checkpoints like a live one's.
                    record = session.snapshot().work_state
                    printer.work = WorkState(list(record.entries), list(record.pinned))
                runner = ScriptRunner(
                    session,
                    sink,
                    answers_approvals=on_approval is None,
                    script_name=label,
                    lines=write_line
                    if printer is None and not answer_only and codex is None
                    else None,
                )
                interrupted.runner = runner
                if interrupted.stopping:
                    runner.stop()
                if printer is not None and printer.live:

                    async def tick() -> None:
                        while not interrupted.output_closed:
                            await anyio.sleep(0.1)
                            try:
                                printer.tick()
                            except OSError as error:
                                output_closed(error)

                    tg.start_soon(tick)
                await runner.run(steps, release=True)
                # The session ends as the block exits; a task that ignores its cancellation
                # holds that up, but not the process past the bound.
                timer = end_after(
                    END_BOUND,
                    lambda: lingering_warning(session),
                    lambda: ended_early_status(outcome, answer_only),
                )
            timer.cancel()
            tg.cancel_scope.cancel()

    with anyio.open_signal_receiver(*_SIGNALS) as signals:
        try:
            await serve(signals)
        except BaseExceptionGroup as group:
            raise single_exception(group) from None
    return interrupted


def _backend() -> str:
    """The event loop of a run: asyncio, or trio when ``RELAY_BACKEND=trio``.

    On asyncio, trio is marked unavailable in this process: the HTTP stack of the SDK imports
    trio whenever it is installed, only to be able to run under it, and that costs a run over
    HTTP about a tenth of a second. Nothing of a run on asyncio uses trio. On either, so is
    h2: the same stack imports its HTTP/2 connection whenever h2 is installed, and relay never
    asks for HTTP/2 (about 30 ms of CPU of a turn over HTTP).
    """
    sys.modules.setdefault("h2", None)  # type: ignore[arg-type]
    if os.environ.get("RELAY_BACKEND", "") == "trio":
        return "trio"
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    return "asyncio"


def _run_command(args: argparse.Namespace) -> int:
    for each in _SIGNALS:
        signal.signal(each, exit_before_start)
    if args.command == "resume":
        if args.last and args.rollout is not None:
            if args.script is not None:
                print("relay: resume --last takes no rollout file", file=sys.stderr)
                return EXIT_USAGE
            # With --last, the one positional argument is the script.
            args.script, args.rollout = args.rollout, None
        elif not args.last and args.rollout is None:
            print("relay: resume needs a rollout file, or --last", file=sys.stderr)
            return EXIT_USAGE
    if args.command != "exec" and args.script is None:
        if sys.stdin.isatty():
            sys.stderr.write(USAGE_HINT)
            return EXIT_USAGE
        args.script = "-"

    from .._base._config import take_api_key
    from .._base._errors import (
        ConfigError,
        ErrorCode,
        RelayError,
        RolloutError,
        RolloutLockedError,
        ScriptError,
    )
    from .._open import custom_op_types, task_factories
    from .._otel._export import close_export, export_for
    from ._outcome import RunOutcome
    from ._pretty import PrettyPrinter

    resume: Rollout | None = None
    model_name: str | None = None
    export: Export | None = None
    request: ExecRequest | None = None
    try:
        if args.command == "exec":
            from ._exec import exec_request

            request = exec_request(args)
            for warning in request.warnings:
                print(f"relay: warning: {warning}", file=sys.stderr)
        config = _config(args)
        chosen = _chosen_keys(args)
        path: str | None = None
        if request is not None:
            from ._exec import MissingThread, exec_config

            try:
                config, path = exec_config(config, request, chosen)
            except MissingThread as exc:
                print(f"relay: {exc}", file=sys.stderr)
                return EXIT_FAILED
        elif args.command == "resume":
            path = _newest_rollout(config) if args.last else args.rollout
        # A task that cannot be loaded is found before anything runs, and the op script is
        # checked against the op types registered.
        factories = task_factories(config.tasks)
        custom_types = custom_op_types(factories)
        if path is not None:
            from .._rollout._reader import read_rollout
            from .._rollout._resume import reconstruct, resumed_config
            from ._exec import resume_rules

            resume = read_rollout(path, for_resume=True)
            # A rollout that cannot be resumed, or not with the model it recorded, is found
            # before anything runs.
            state = reconstruct(resume)
            config = resumed_config(config, state, chosen=chosen)
            model_name = config.model if "model" in chosen else None
            config = resume_rules(config, state.rules, args.overrides, request)
            _check_registered(resume.name, state.op_types, custom_types)
        if request is not None:
            from ._exec import prompt_steps

            label, steps = prompt_steps(request, config)
        else:
            label, steps = _read_script(args.script, factories)
        if config.model_provider == "scripted" and config.model_script:
            from .._models._script import load_model_script

            load_model_script(config.model_script)
        # The command owns its process: the key leaves its environment, /proc/PID/environ
        # included, before any process is started (a library leaves its host's alone).
        take_api_key(config.provider())
        take_api_key(config.compaction_provider())
        if request is not None:
            from .._codex._defaults import with_codex_tools
            from ._exec import take_codex_key

            take_codex_key(config)
            config = with_codex_tools(config)
        check_config(config, chosen)
        export = export_for(args.otel, os.environ, sys.stderr, "relay")
    except (ConfigError, ScriptError, RolloutError) as exc:
        _print_error(exc)
        return EXIT_USAGE
    if resume is not None:
        _print_notes(resume)
    outcome = RunOutcome()
    codex: CodexExecStream | None = None
    if args.command == "exec":
        # exec prints its answer, or relay's events with --events, Codex's with --json
        # (--experimental-json), or a transcript with --pretty.
        pretty = args.output == "pretty"
        answer_only = args.output is None
        if args.output == "codex":
            from ._codex_stream import CodexExecStream

            codex = CodexExecStream()
    else:
        pretty = args.output == "pretty" or (args.output is None and sys.stdout.isatty())
        answer_only = False
    printer = (
        PrettyPrinter(sys.stdout, live=sys.stdout.isatty(), outcome=outcome) if pretty else None
    )
    try:
        import functools

        import anyio

        from ._approve import exec_approver

        # exec asks on a terminal, or denies; the ops of a script decide for run and resume.
        on_approval = exec_approver() if args.command == "exec" else None
        ended = anyio.run(
            functools.partial(_run, on_approval=on_approval),
            config,
            label,
            steps,
            printer,
            outcome,
            resume,
            model_name,
            answer_only,
            export.provider if export is not None else None,
            codex,
            backend=_backend(),
        )
    except (ConfigError, RolloutLockedError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # Closed while nothing more was to be written by the session (a last flush).
        discard_stdout()
        return signal_status(signal.SIGPIPE)
    except RelayError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception:
        import traceback

        print("relay: internal error", file=sys.stderr)
        traceback.print_exc()
        return EXIT_FAILED
    finally:
        close_export(export, sys.stderr, "relay")
    signum = ended.signum
    if signum == signal.SIGPIPE:
        print("relay: standard output was closed; the session was shut down", file=sys.stderr)
        return signal_status(signum)
    if signum is not None:
        print("relay: interrupted", file=sys.stderr)
        return signal_status(signum)
    if ended.output_error is not None:
        print(
            f"relay: cannot write to standard output: {ended.output_error.strerror}; the "
            "session was shut down",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if answer_only or codex is not None:
        for error in outcome.errors:
            print(f"relay: {error.message}", file=sys.stderr)
    if answer_only:
        answer = outcome.last_answer
        if answer is not None and to_stdout(lambda: print(answer)) != EXIT_OK:
            return EXIT_FAILED
    elif codex is None:
        # What the events said on stdout, said on stderr too: relay's own record failed.
        for error in outcome.errors:
            if error.code == ErrorCode.ROLLOUT:
                print(f"relay: {error.message}", file=sys.stderr)
    return EXIT_FAILED if outcome.failed else EXIT_OK


def _print_error(exc: BaseException) -> None:
    """One ``relay:`` line per problem that the error reports."""
    for line in str(exc).splitlines():
        print(f"relay: {line}", file=sys.stderr)


def _print_notes(rollout: Rollout) -> None:
    from .._rollout._resume import describe_note

    for note in rollout.notes:
        print(f"relay: warning: {describe_note(rollout, note)}", file=sys.stderr)


def _show_command(args: argparse.Namespace) -> int:
    from .._base._errors import RolloutError
    from .._rollout._reader import read_rollout
    from ._transcript import render_transcript

    try:
        rollout = read_rollout(args.rollout)
    except RolloutError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _print_notes(rollout)
    if args.html:
        return _write_page(rollout)
    return to_stdout(
        lambda: sys.stdout.writelines(line + "\n" for line in render_transcript(rollout))
    )


def _write_page(rollout: Rollout) -> int:
    """``relay show --html``: the timeline page on standard output (docs/timeline.md)."""
    from ._timeline import read_timeline
    from ._timeline_condense import condense
    from ._timeline_page import render_page

    page = render_page(condense(read_timeline(rollout)))
    return to_stdout(lambda: sys.stdout.buffer.write(page.encode("utf-8", "replace")))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``relay`` console script and ``python -m relay``."""
    args = build_parser().parse_args(argv)
    if args.command in {"run", "resume", "exec", "app-server"}:
        refused = sort_codex_flags(args)
        if refused is not None:
            return refused
    if args.command in {"run", "resume", "exec"}:
        return _run_command(args)
    if args.command == "cluster":
        from .._cluster._cli import cluster_command

        return cluster_command(args)
    if args.command == "show":
        return _show_command(args)
    if args.command == "eval":
        from .._eval._run import eval_command

        return eval_command(args)
    if args.command == "app-server":
        from .._appserver._command import app_server_command

        return app_server_command(
            args, lambda parsed: app_server_config(parsed, _config, _chosen_keys)
        )
    if args.command == "mock-server":
        from .._testing._mock_server import main as mock_main

        status: int = mock_main(args.script, args.host, args.port, args.log, args.prompt_cache)
        return status
    build_parser().print_help(sys.stderr)
    return EXIT_USAGE


def console_main() -> None:
    """The ``relay`` console script."""
    import logging

    # What went wrong reaches the user as an event (`error`, `warning`) and a line on stderr;
    # the log records behind it, tracebacks included, are for embedders who configure logging.
    # The MCP SDK's too ("client" is the name its client session logs under).
    for name in ("relay", "mcp", "client"):
        quiet = logging.getLogger(name)
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    hold_standard_descriptors()
    try:
        status = main()
    except KeyboardInterrupt:
        # Ctrl-C before a command took charge of its signals (while parsing, importing).
        sys.stderr.write("relay: interrupted\n")
        status = signal_status(signal.SIGINT)
    sys.exit(status)
