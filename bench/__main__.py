"""``python -m bench``: run the suite and print the table.

Options: ``--quick`` (tiny sizes, a couple of repetitions, no Codex: for the smoke test),
``--repeat N``, ``--only GROUP[,GROUP...]`` (turns, ask, tracing, peer, compaction, background,
masking, rollout, long, scale, process, exec (one SDK turn: ``relay exec
--experimental-json`` against ``codex exec --json``, whole processes), sandbox, cluster, agents (a
sub-agent's spawn and idle memory, the interrupt of a streaming tree), and startup: the start-up
and one-turn part of process, run only when named; ``--quick`` leaves cluster out unless it is
named, since it starts a Ray instance),
``--markdown FILE`` (also write the table as Markdown), ``--json FILE`` (also write the figures
as JSON, as :mod:`bench.against` reads them), ``--plots DIR`` (PNG plots; default
``docs/img`` for a full run, none for ``--quick``), ``--install-codex`` (install the pinned
Codex CLI with npm first), ``--codex-prefix DIR`` (the ``npm --prefix`` folder holding it, if
not the default one) and ``--no-codex``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import _report
from ._core import Figure, Options

GROUPS = (
    "turns",
    "ask",
    "tracing",
    "peer",
    "compaction",
    "background",
    "masking",
    "rollout",
    "long",
    "scale",
    "process",
    "exec",
    "sandbox",
    "agents",
    "startup",
    "cluster",
)
#: Groups a ``--quick`` run leaves out unless ``--only`` names them.
NOT_QUICK = ("cluster",)
#: Groups that run only when ``--only`` names them (part of another group).
ONLY_NAMED = ("startup",)


def _runner(name: str) -> Callable[[Options], list[Figure]]:
    # Each group imports what it measures only when it runs.
    if name == "turns":
        from . import turns

        return turns.run
    if name == "ask":
        from . import ask

        return ask.run
    if name == "tracing":
        from . import otel

        return otel.run
    if name == "peer":
        from . import peer_agents

        return peer_agents.run
    if name == "compaction":
        from . import compaction

        return compaction.run
    if name == "background":
        from . import background

        return background.run
    if name == "masking":
        from . import masking

        return masking.run
    if name == "rollout":
        from . import rollout

        return rollout.run
    if name == "long":
        from . import long

        return long.run
    if name == "scale":
        from . import scale

        return scale.run
    if name == "sandbox":
        from . import sandbox

        return sandbox.run
    if name == "agents":
        from . import agents

        return agents.run
    if name == "exec":
        from . import exec_turn

        return exec_turn.run
    if name == "cluster":
        from . import cluster

        return cluster.run
    if name == "startup":
        from . import process as startup

        return startup.run_startup
    from . import process

    return process.run


def _options(argv: list[str] | None) -> tuple[Options, list[str], Path | None, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--repeat", type=int, help="repetitions of each measurement")
    parser.add_argument("--only", help=f"comma-separated groups of {', '.join(GROUPS)}")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--plots", type=Path, help="directory for the PNG plots")
    parser.add_argument("--no-plots", action="store_true", help="make no plots")
    parser.add_argument("--codex-prefix", type=Path, help="npm prefix holding @openai/codex")
    parser.add_argument("--no-codex", action="store_true", help="skip the Codex CLI peer")
    parser.add_argument(
        "--install-codex", action="store_true", help="npm install the pinned Codex CLI first"
    )
    args = parser.parse_args(argv)
    opts = Options.quick_run() if args.quick else Options()
    if args.repeat:
        opts.repeat = args.repeat
    if args.no_codex:
        opts.codex = False
    if args.codex_prefix:
        opts.codex_prefix = args.codex_prefix
    if args.install_codex:
        from .process import CODEX_PREFIX, CODEX_VERSION, install_codex

        problem = install_codex(opts.codex_prefix or CODEX_PREFIX)
        if problem:
            parser.error(f"could not install @openai/codex@{CODEX_VERSION}: {problem}")
    groups = [g for g in GROUPS if not (opts.quick and g in NOT_QUICK) and g not in ONLY_NAMED]
    if args.only:
        groups = [g.strip() for g in args.only.split(",") if g.strip()]
        unknown = set(groups) - set(GROUPS)
        if unknown:
            parser.error(f"unknown group(s): {', '.join(sorted(unknown))}")
    if not args.no_plots:
        opts.plots = args.plots or (None if args.quick else Path("docs/img"))
    return opts, groups, args.markdown, args.json


def main(argv: list[str] | None = None) -> int:
    opts, groups, markdown, json_path = _options(argv)
    machine = _report.machine()
    print(f"relay bench{' (quick)' if opts.quick else ''}: {machine}", flush=True)
    figures: list[Figure] = []
    started = time.perf_counter()
    for group in groups:
        begin = time.perf_counter()
        print(f"running {group} ...", file=sys.stderr, flush=True)
        figures += _runner(group)(opts)
        print(f"  {group}: {time.perf_counter() - begin:.1f} s", file=sys.stderr, flush=True)
    written = _report.plots(opts, opts.plots) if opts.plots is not None else []
    print(_report.text_table(figures))
    print()
    print(
        f"{len(figures)} figures in {time.perf_counter() - started:.0f} s; median and "
        "p10–p90 over n samples; ratio = median ÷ the reference measured in the same run."
    )
    for path in written:
        print(f"plot: {path}")
    for note in opts.notes:
        print(f"note: {note}")
    if markdown is not None:
        markdown.write_text(
            f"Machine: {machine}\n\n{_report.markdown_table(figures)}\n\n"
            + "".join(f"- {note}\n" for note in opts.notes),
            encoding="utf-8",
        )
    if json_path is not None:
        json_path.write_text(json.dumps([_report.as_json(f) for f in figures]), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
