"""The ``relay`` command line (SPEC §1.3).

Exit codes: 0 the script ran to its end and the session shut down; 2 bad usage, bad config or
unreadable script (message on stderr, nothing run); 1 the runtime itself failed.

``relay resume`` is ``relay run`` in the session of a rollout file: a file that cannot be read
or has no ``session_meta`` line is bad usage (2). ``relay show`` prints a transcript; it exits 2
only when the file cannot be read. Both report malformed lines as warnings on stderr, naming the
line, and go on without them.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs

from . import _protocol as p
from ._config import Config, load_config
from ._errors import ConfigError, RelayError, RolloutError, RolloutLockedError, ScriptError
from ._op_script import Step, parse_op_script
from ._pretty import PrettyPrinter
from ._resume import describe_note, reconstruct, resume_session
from ._rollout_reader import Rollout, read_rollout
from ._runner import ScriptRunner, json_line
from ._session import open_session
from ._transcript import render_transcript
from ._version import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"relay: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="relay", description="Run agent sessions from op scripts.")
    parser.add_argument("--version", action="version", version=f"relay {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def session_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "script",
            nargs="?",
            default="-",
            help="op script (JSON Lines); '-' or nothing reads standard input",
        )
        sub.add_argument("--config", help="config file (default $RELAY_HOME/config.toml)")
        sub.add_argument(
            "-c",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a config key (value parsed as TOML)",
        )
        sub.add_argument("--model-script", help="model script for the scripted provider")
        sub.add_argument("--rollout-dir", help="directory for rollout files")
        sub.add_argument("--pretty", action="store_true", help="readable output for a terminal")

    run = commands.add_parser("run", help="run an op script in a new session")
    session_options(run)

    resume = commands.add_parser(
        "resume", help="resume the session of a rollout file and run an op script in it"
    )
    resume.add_argument("rollout", help="the rollout file (it is appended to)")
    session_options(resume)

    show = commands.add_parser("show", help="print a rollout file as a readable transcript")
    show.add_argument("rollout", help="the rollout file")

    mock = commands.add_parser("mock-server", help="serve a model script over HTTP on loopback")
    mock.add_argument("--script", required=True, help="model script")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=0)
    mock.add_argument("--log", help="append every request as a JSON line to this file")
    from ._cluster_cli import add_cluster_command

    add_cluster_command(commands)
    return parser


def _config(args: argparse.Namespace) -> Config:
    config = load_config(args.config, args.overrides)
    if args.model_script:
        config = attrs.evolve(config, model_script=args.model_script)
    if args.rollout_dir:
        config = attrs.evolve(config, rollout=attrs.evolve(config.rollout, dir=args.rollout_dir))
    config.provider()  # an unknown provider is a usage error, found before anything runs
    return config


def _read_script(name: str) -> tuple[str, list[Step]]:
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
    return label, parse_op_script(text)


async def _run(
    config: Config, label: str, steps: list[Step], pretty: bool, resume: Rollout | None = None
) -> None:
    printer = PrettyPrinter(sys.stdout, live=sys.stdout.isatty()) if pretty else None

    def sink(event: p.Event, _: dict[str, Any]) -> None:
        if printer is not None:
            printer.event(event)
        else:
            sys.stdout.write(json_line(event) + "\n")
            sys.stdout.flush()

    opened = open_session(config) if resume is None else resume_session(resume, config)
    async with opened as session:
        runner = ScriptRunner(session, sink, script_name=label)
        async with anyio.create_task_group() as tg:
            if printer is not None and printer.live:

                async def tick() -> None:
                    while True:
                        await anyio.sleep(0.1)
                        printer.tick()

                tg.start_soon(tick)
            await runner.run(steps)
            tg.cancel_scope.cancel()


def _backend() -> str:
    try:
        import trio  # noqa: F401
    except ImportError:
        return "asyncio"
    return "trio"


def _run_command(args: argparse.Namespace) -> int:
    resume: Rollout | None = None
    try:
        config = _config(args)
        if args.command == "resume":
            resume = read_rollout(args.rollout, for_resume=True)
            reconstruct(resume)  # a rollout that cannot be resumed is found before anything runs
        label, steps = _read_script(args.script)
        if config.model_provider == "scripted" and config.model_script:
            from ._model_script import load_model_script

            load_model_script(config.model_script)
    except (ConfigError, ScriptError, RolloutError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if resume is not None:
        _print_notes(resume)
    try:
        anyio.run(_run, config, label, steps, args.pretty, resume, backend=_backend())
    except (ConfigError, RolloutLockedError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except RelayError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception:
        print("relay: internal error", file=sys.stderr)
        traceback.print_exc()
        return EXIT_FAILED
    return EXIT_OK


def _print_notes(rollout: Rollout) -> None:
    for note in rollout.notes:
        print(f"relay: warning: {describe_note(rollout, note)}", file=sys.stderr)


def _show_command(args: argparse.Namespace) -> int:
    try:
        rollout = read_rollout(args.rollout)
    except RolloutError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _print_notes(rollout)
    try:
        for line in render_transcript(rollout):
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``relay`` console script and ``python -m runtime``."""
    args = _parser().parse_args(argv)
    if args.command in {"run", "resume"}:
        return _run_command(args)
    if args.command == "show":
        return _show_command(args)
    if args.command == "cluster":
        from ._cluster_cli import cluster_command

        return cluster_command(args)
    if args.command == "mock-server":
        from ._mock_server import main as mock_main

        status: int = mock_main(args.script, args.host, args.port, args.log)
        return status
    _parser().print_help(sys.stderr)
    return EXIT_USAGE


def console_main() -> None:
    """The ``relay`` console script."""
    sys.exit(main())
