"""The ``relay`` command's arguments: every command and its options (``docs/cli.md``).

Only ``argparse`` is imported: ``relay --version`` and ``relay --help`` need nothing else.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .._version import __version__

#: ``-c``'s help where Codex's keys are taken too.
CODEX_OVERRIDE_HELP = (
    "override a config key (value parsed as TOML); a key of Codex's that relay has not is a warning"
)

#: The exit status of bad usage (``relay --help`` lists the others per command).
EXIT_USAGE = 2


class Parser(argparse.ArgumentParser):
    """A parser whose usage errors exit 2 with one ``relay:`` line (after the usage)."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"relay: {message}\n")


def config_options(
    sub: argparse.ArgumentParser,
    config_help: str = "config file (default $RELAY_HOME/config.toml)",
    override_help: str = "override a config key (value parsed as TOML)",
) -> None:
    """``--config FILE`` and ``-c KEY=VALUE`` (any number), as every command that opens sessions
    takes them."""
    sub.add_argument("--config", help=config_help)
    sub.add_argument(
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=override_help,
    )


class ConfigFileOrKey(argparse.Action):
    """``--config FILE``, or ``--config KEY=VALUE`` as Codex's ``exec`` takes it: a value with
    ``=`` that names no file is a key (gathered in ``codex_overrides``)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        import os

        text = str(values)
        if "=" in text and not os.path.exists(text):
            namespace.codex_overrides = [*namespace.codex_overrides, text]
        else:
            setattr(namespace, self.dest, text)


def codex_config_options(sub: argparse.ArgumentParser) -> None:
    """``relay exec``'s ``--config``: a file, or a key as Codex takes it; and ``-c``."""
    sub.add_argument(
        "--config",
        action=ConfigFileOrKey,
        metavar="FILE|KEY=VALUE",
        help="config file (default $RELAY_HOME/config.toml); KEY=VALUE (naming no file) sets a "
        "key as Codex's --config does: Codex's keys relay has too, openai_base_url and "
        "model_reasoning_effort; any other is a warning (docs/codex-compat.md)",
    )
    sub.set_defaults(codex_overrides=[])
    sub.add_argument(
        "-c",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=CODEX_OVERRIDE_HELP,
    )


def feature_options(sub: argparse.ArgumentParser) -> None:
    """Codex's ``--enable FEATURE`` and ``--disable FEATURE`` (any number of each): relay's
    features are switched, Codex's others are warnings (docs/cli.md)."""
    for flag, dest, does, value in (
        ("--enable", "enable", "on", "true"),
        ("--disable", "disable", "off", "false"),
    ):
        sub.add_argument(
            flag,
            dest=dest,
            action="append",
            default=[],
            metavar="FEATURE",
            help=f"switch a feature {does} (features.FEATURE={value}); "
            "a feature of Codex's that relay has not is a warning",
        )


def exec_options(sub: argparse.ArgumentParser) -> None:
    """The options of Codex's ``exec`` that ``relay exec`` takes (docs/codex-compat.md)."""
    sub.add_argument("-m", "--model", help="the model (the config key model)")
    sub.add_argument(
        "-C", "--cd", dest="cd", metavar="DIR", help="the working directory (the config key cwd)"
    )
    sub.add_argument(
        "-s",
        "--sandbox",
        metavar="MODE",
        choices=("read-only", "workspace-write", "danger-full-access"),
        help="what commands may touch: read-only, workspace-write or danger-full-access "
        "(the config key sandbox_mode)",
    )
    sub.add_argument(
        "--add-dir",
        dest="add_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder commands may also write to (added to "
        "sandbox_workspace_write.writable_roots)",
    )
    sub.add_argument(
        "--output-schema",
        metavar="FILE",
        help="a JSON Schema file the answer must fit: the turn asks for JSON of that schema, "
        "and an answer that does not fit fails it",
    )
    sub.add_argument(
        "-i",
        "--image",
        dest="images",
        action="append",
        default=[],
        metavar="FILE",
        help="an image given with the prompt (any number)",
    )
    sub.add_argument(
        "--skip-git-repo-check",
        action="store_true",
        help="accepted as Codex takes it; relay checks no repository",
    )
    for flag in ("--thread-source", "--cyber-access-program"):
        sub.add_argument(
            flag,
            metavar="VALUE",
            help="accepted as Codex takes it, with a warning: relay has no such feature",
        )


def add_cluster_command(commands: Any) -> None:
    """Register ``relay cluster run|up|ls|attach|down`` on the ``relay`` command's subparsers."""
    cluster = commands.add_parser("cluster", help="run sessions on a Ray cluster")
    actions = cluster.add_subparsers(
        dest="cluster_command", metavar="COMMAND", required=True, parser_class=type(cluster)
    )

    def where(sub: argparse.ArgumentParser, address_help: str) -> None:
        sub.add_argument("--address", help=address_help)
        sub.add_argument(
            "--namespace",
            default="relay",
            help="Ray namespace of the deployment (default relay)",
        )

    run = actions.add_parser("run", help="run op scripts as sessions on a Ray cluster")
    run.add_argument("scripts", nargs="+", metavar="SCRIPT", help="op scripts (JSON Lines)")
    where(
        run,
        "Ray cluster to connect to (default $RAY_ADDRESS, else start a local one for the run); "
        "the hosts of a deployment up there are used",
    )
    run.add_argument(
        "--actors",
        type=int,
        default=2,
        help="session hosts to start when no deployment is up (default 2)",
    )
    run.add_argument(
        "--out",
        default="relay-cluster-events",
        help="directory for each session's events (default ./relay-cluster-events)",
    )
    run.add_argument(
        "--parallel", type=int, default=64, help="sessions running at once (default 64)"
    )
    config_options(run)
    run.add_argument("--model-script", help="model script for the scripted provider")
    run.add_argument(
        "--rollout-dir", help="directory for rollout files; on a cluster, one every node reaches"
    )
    run.add_argument(
        "--task",
        dest="tasks",
        action="append",
        default=[],
        metavar="OP=FACTORY",
        help="serve ops of type OP with FACTORY ('pkg.mod:factory' or 'file.py:factory'); "
        "its module goes to the hosts the run starts",
    )
    otel_option(run, "the run's (a span for it and one per session, and over OTLP the sessions')")

    cluster_address = "Ray cluster to connect to (default $RAY_ADDRESS)"
    start = actions.add_parser(
        "up", help="start a registry and session hosts that outlive the command"
    )
    where(start, cluster_address)
    start.add_argument("--hosts", type=int, default=2, help="session hosts to start (default 2)")
    start.add_argument(
        "--host-cpus", type=float, default=1.0, help="CPUs Ray reserves per host (default 1)"
    )
    start.add_argument(
        "--rollout-dir",
        help="the shared directory for rollout files (default $RELAY_HOME/sessions)",
    )
    start.add_argument(
        "--lease-seconds",
        type=float,
        default=10.0,
        help="how long a host that stops renewing keeps its sessions (default 10)",
    )
    start.add_argument(
        "--task",
        dest="tasks",
        action="append",
        default=[],
        metavar="OP=FACTORY",
        help="carry FACTORY's module to the hosts, for sessions that serve ops of type OP with it",
    )
    listing = actions.add_parser("ls", help="list the deployment's hosts and sessions")
    where(listing, cluster_address)
    listing.add_argument("--json", action="store_true", help="print the listing as JSON")
    attach = actions.add_parser(
        "attach",
        help="stream a session's events and submit ops read from standard input",
    )
    attach.add_argument("session", metavar="SESSION_ID", help="the session to attach to")
    where(attach, cluster_address)
    attach.add_argument(
        "--from",
        dest="from_seq",
        type=int,
        metavar="N",
        help="the events after seq N (older ones from the rollout; default: what is new)",
    )
    attach.add_argument(
        "--shutdown",
        action="store_true",
        help="shut the session down once the script has run (default: leave it running)",
    )
    stop = actions.add_parser("down", help="shut the deployment's sessions down and end it")
    where(stop, cluster_address)


def build_parser() -> argparse.ArgumentParser:
    """The ``relay`` command's parser, every command and option of it."""
    parser = Parser(prog="relay", description="Run agent sessions from op scripts.")
    parser.add_argument("--version", action="version", version=f"relay {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def session_options(sub: argparse.ArgumentParser, *, script: bool = True) -> None:
        if script:
            sub.add_argument(
                "script",
                nargs="?",
                help="op script (JSON Lines); '-' reads standard input, as does nothing in a pipe",
            )
            config_options(sub, override_help=CODEX_OVERRIDE_HELP)
        else:
            codex_config_options(sub)
        feature_options(sub)
        sub.add_argument("--model-script", help="model script for the scripted provider")
        sub.add_argument("--rollout-dir", help="directory for rollout files")
        sub.add_argument(
            "--task",
            dest="tasks",
            action="append",
            default=[],
            metavar="OP=FACTORY",
            help="serve ops of type OP with FACTORY ('pkg.mod:factory' or 'file.py:factory')",
        )
        sub.add_argument(
            "--compactor",
            metavar="FACTORY",
            help="compact with FACTORY's compactor, manual and automatic compactions alike "
            "('pkg.mod:factory' or 'file.py:factory')",
        )
        otel_option(sub)
        # ``exec`` prints the answer alone unless asked; a script prints its events.
        output = sub.add_mutually_exclusive_group()
        output.add_argument(
            "--pretty",
            dest="output",
            action="store_const",
            const="pretty",
            help="a readable transcript (the default on a terminal)"
            if script
            else "a readable transcript instead of the answer",
        )
        if script:
            output.add_argument(
                "--json",
                dest="output",
                action="store_const",
                const="json",
                help="one JSON event per line (the default in a pipe or file)",
            )
        else:
            # Under exec, --json is Codex's event stream, as for Codex; relay's own events
            # have a flag of their own.
            output.add_argument(
                "--events",
                dest="output",
                action="store_const",
                const="json",
                help="relay's events, one JSON line each (as relay run --json prints them), "
                "instead of the answer",
            )
            output.add_argument(
                "--json",
                "--experimental-json",
                dest="output",
                action="store_const",
                const="codex",
                help="Codex's event stream, one JSON object per line, instead of the answer "
                "(docs/codex-compat.md; --experimental-json is its older name)",
            )

    run = commands.add_parser("run", help="run an op script in a new session")
    session_options(run)

    execute = commands.add_parser(
        "exec", help="run one turn with a prompt in a new session and print the answer"
    )
    execute.add_argument(
        "prompt",
        nargs="*",
        metavar="PROMPT",
        help="the prompt; '-' or none reads it from standard input. 'resume THREAD_ID' "
        "before it (after the options) continues the session THREAD_ID instead of opening a "
        "new one",
    )
    session_options(execute, script=False)
    exec_options(execute)

    resume = commands.add_parser(
        "resume", help="resume the session of a rollout file and run an op script in it"
    )
    resume.add_argument(
        "rollout", nargs="?", help="the rollout file (it is appended to); omit with --last"
    )
    resume.add_argument(
        "--last",
        action="store_true",
        help="resume the newest rollout under the rollout directory",
    )
    session_options(resume)

    show = commands.add_parser("show", help="print a rollout file as a readable transcript")
    show.add_argument("rollout", help="the rollout file")
    show.add_argument(
        "--html",
        action="store_true",
        help="write a self-contained HTML page of the session's timeline instead",
    )

    app = commands.add_parser(
        "app-server", help="serve Codex's app-server protocol (JSON-RPC) on standard input/output"
    )
    app.add_argument(
        "--listen", default="stdio://", metavar="URL", help="the transport (only stdio://)"
    )
    config_options(app, override_help=CODEX_OVERRIDE_HELP)
    feature_options(app)
    app.add_argument("--model-script", help="model script for the scripted provider")
    app.add_argument("--rollout-dir", help="directory for rollout files")
    app.add_argument(
        "--task",
        dest="tasks",
        action="append",
        default=[],
        metavar="OP=FACTORY",
        help="serve ops of type OP with FACTORY ('pkg.mod:factory' or 'file.py:factory')",
    )

    mock = commands.add_parser("mock-server", help="serve a model script over HTTP on loopback")
    mock.add_argument("--script", required=True, help="model script")
    mock.add_argument("--host", default="127.0.0.1")
    mock.add_argument("--port", type=int, default=0)
    mock.add_argument("--log", help="append every request as a JSON line to this file")
    mock.add_argument(
        "--prompt-cache",
        action="store_true",
        help="report in each answer's usage the cached tokens of a prompt cache keyed by "
        "prompt_cache_key, and count the tool list among the input tokens, as OpenAI does",
    )
    add_cluster_command(commands)
    add_eval_command(commands)
    return parser


def otel_option(parser: argparse.ArgumentParser, what: str = "the session's") -> None:
    """``--otel``: export the command's OpenTelemetry traces (docs/observability.md)."""
    parser.add_argument(
        "--otel",
        action="store_true",
        help=f"export {what} OpenTelemetry traces: JSON lines on stderr, or OTLP over HTTP when "
        "OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_TRACES_EXPORTER says so (needs opentelemetry-sdk)",
    )


def add_eval_command(commands: Any) -> None:
    """Register ``relay eval`` (``docs/eval.md``) on the ``relay`` command's subparsers."""
    ev = commands.add_parser(
        "eval", help="replay a corpus of cases under compaction configurations"
    )
    ev.add_argument("corpus", metavar="CORPUS", help="folder of cases")
    ev.add_argument("--matrix", help="configurations to compare (default CORPUS/matrix.toml)")
    ev.add_argument("--repeats", type=int, default=3, help="runs of each case (default 3)")
    ev.add_argument("--parallel", type=int, default=8, help="sessions at once (default 8)")
    config_options(
        ev,
        "base config file the configurations are laid over",
        "override a base config key (value parsed as TOML)",
    )
    ev.add_argument(
        "--live",
        action="store_true",
        help="the configured provider answers every case (the cases' model scripts are ignored)",
    )
    ev.add_argument("--json", help="write the report as JSON to this file")
    ev.add_argument("--plot", help="plot retention against input tokens to this image file")
    ev.add_argument(
        "--html",
        help="write one self-contained page: the table, the plots, and per case the summaries "
        "each configuration produced beside the facts it lost",
    )
    otel_option(ev, "the evaluation's (a span per run of a case, and the sessions')")
    ev.add_argument(
        "--trust-corpus",
        action="store_true",
        help="run the corpus's code: a corpus is code when its matrix starts MCP servers, "
        "imports tasks or a compactor, runs hooks, names providers or files to read, or a "
        "configuration turns the shell tool on (the cases' commands then run on this "
        "machine); without this, such a corpus is refused (exit 2) and what it would run "
        "is listed",
    )


__all__ = [
    "EXIT_USAGE",
    "Parser",
    "add_cluster_command",
    "add_eval_command",
    "ConfigFileOrKey",
    "build_parser",
    "codex_config_options",
    "config_options",
    "exec_options",
    "feature_options",
    "otel_option",
]
