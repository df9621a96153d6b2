"""``relay cluster run``: many op scripts as sessions on a Ray cluster (see ``docs/cluster.md``).

Each script runs in its own session, and its events go to their own JSON Lines file. When a
deployment is up in ``--namespace`` (``relay cluster up``), the sessions go to its hosts and
outlive this command: killed, it leaves them running, and ``relay cluster attach`` finishes
them. Otherwise the run starts hosts of its own (``--actors``), which end with it. A progress
bar on standard error (when it is a terminal) counts finished sessions; a summary table on
standard output ends the run.

Tasks of the run's own (``--task``, ``[tasks]``) are loaded here first, and their modules go
to the hosts the run starts with Ray's ``runtime_env`` (``_tasks.py``); with ``--otel``, the run
and each session are spans (``_trace.py``).

Exit codes, as for ``relay run``: 0 every session ran its script to the end; 1 at least one
failed (each failure is named on standard error); 2 bad usage (unreadable script or config, a
task that cannot be loaded, here or on a host, Ray missing or unreachable, a cluster without
room for the hosts), nothing run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._config import Config, load_config
from .._base._errors import ConfigError, RelayError, ScriptError
from .._drive._op_script import Step, parse_op_script
from ._client import ClusterClient, client_of
from ._command import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    LOCAL_CPUS,
    event_line,
    init_ray,
    ray_address,
)
from ._deploy import existing_registry, open_session_pool
from ._ray import DEFAULT_PREFIX, import_ray
from ._script import run_op_script
from ._tasks import Carried, load_tasks, task_options

if TYPE_CHECKING:
    from .._otel._export import Export
from ._trace import RunTracer, SessionSpan, host_variables


@attrs.define
class _Tally:
    """What the run has done so far."""

    total: int
    finished: int = 0
    turns: int = 0
    failures: int = 0
    failovers: int = 0


def _progress(tally: _Tally, out: IO[str]) -> None:
    width = 30
    filled = width * tally.finished // max(tally.total, 1)
    failed = f" · {tally.failures} failed" if tally.failures else ""
    out.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] {tally.finished}/{tally.total} sessions"
        f"{failed}"
    )
    out.flush()


def summary_table(tally: _Tally, seconds: float) -> str:
    """The table printed at the end of a run."""
    heads = ("sessions", "turns", "failures", "failovers", "time")
    cells = (
        str(tally.total),
        str(tally.turns),
        str(tally.failures),
        str(tally.failovers),
        f"{seconds:.1f} s",
    )
    widths = [max(len(h), len(c)) for h, c in zip(heads, cells, strict=True)]
    line = "  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))
    row = "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
    return f"{line}\n{row}"


def load_session_config(args: argparse.Namespace) -> Config:
    """The sessions' configuration from the command line, paths absolute where it was given."""
    config = load_config(args.config, args.overrides)
    if args.tasks:
        config = attrs.evolve(config, tasks={**config.tasks, **task_options(args.tasks)})
    if args.model_script:
        config = attrs.evolve(config, model_script=str(Path(args.model_script).absolute()))
    if args.rollout_dir:
        rollout = attrs.evolve(config.rollout, dir=str(Path(args.rollout_dir).absolute()))
        config = attrs.evolve(config, rollout=rollout)
    config.provider()
    if config.model_provider == "scripted" and config.model_script:
        from .._models._script import load_model_script

        load_model_script(config.model_script)
    return config


def _load(args: argparse.Namespace) -> tuple[Config, list[tuple[str, list[Step]]], Carried]:
    """The sessions' configuration (its tasks as the hosts load them), the scripts, checked
    against the op types of the tasks, and what the hosts need of them."""
    config = load_session_config(args)
    carried, custom_types = load_tasks(config.tasks)
    config = attrs.evolve(config, tasks=dict(carried.tasks))
    if args.actors < 1:
        raise ConfigError("--actors must be at least 1")
    if args.parallel < 1:
        raise ConfigError("--parallel must be at least 1")
    scripts: list[tuple[str, list[Step]]] = []
    for name in args.scripts:
        try:
            text = Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScriptError(f"cannot read op script {name}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ScriptError(f"op script {name} is not UTF-8 text") from exc
        scripts.append((name, parse_op_script(text, Path(name).name, custom_types)))
    return config, scripts, carried


@asynccontextmanager
async def _sessions_for(
    args: argparse.Namespace, config: Config, local: bool
) -> AsyncIterator[tuple[ClusterClient, Config, str]]:
    """The deployment up in the namespace, else hosts of the run's own; and which it is (the
    namespace, or ``own``)."""
    ray = import_ray()
    registry = None if local else existing_registry(ray, args.namespace, DEFAULT_PREFIX)
    if registry is not None:
        print(
            f"relay: running on the hosts of the deployment in namespace {args.namespace!r}",
            file=sys.stderr,
        )
        async with client_of(ray, registry, args.namespace) as client:
            yield client, config, args.namespace
        return
    host_cpus = min(1.0, LOCAL_CPUS / args.actors) if local else 1.0
    async with open_session_pool(args.actors, config, host_cpus=host_cpus) as pool:
        yield pool.client, pool.config, "own"


@contextmanager
def _traced(tracer: RunTracer | None, label: str) -> Iterator[SessionSpan | None]:
    if tracer is None:
        yield None
        return
    with tracer.session(label) as span:
        yield span


async def _run_all(
    args: argparse.Namespace,
    config: Config,
    scripts: list[tuple[str, list[Step]]],
    local: bool,
    tracer: RunTracer | None,
) -> _Tally:
    out_dir = Path(args.out)
    tally = _Tally(total=len(scripts))
    bar = sys.stderr.isatty()
    limiter = anyio.CapacityLimiter(args.parallel)

    async with _sessions_for(args, config, local) as (client, config, where):
        # A host that cannot run the sessions is found once, before any of them.
        await client.check(config)

        async def one(index: int, name: str, steps: list[Step]) -> None:
            label = Path(name).name
            path = out_dir / f"{index:04d}-{Path(name).stem}.jsonl"
            with _traced(tracer, label) as traced:
                try:
                    async with limiter:
                        with path.open("w", encoding="utf-8") as sink_file:

                            def sink(event: p.Event) -> None:
                                sink_file.write(event_line(event) + "\n")
                                if traced is not None:
                                    traced.saw(event)
                                if isinstance(event.msg, p.TurnStarted):
                                    tally.turns += 1
                                elif isinstance(event.msg, p.SessionResumed):
                                    tally.failovers += 1
                                elif isinstance(event.msg, p.TurnComplete):
                                    sink_file.flush()

                            async with client.open_session(config) as session:
                                if traced is not None:
                                    traced.opened(session.id, session.host)
                                await run_op_script(session, steps, sink, script_name=label)
                except RelayError as exc:
                    tally.failures += 1
                    if traced is not None:
                        traced.failed(str(exc))
                    print(f"\nrelay: {path.name}: {exc}", file=sys.stderr)
                finally:
                    tally.finished += 1
                    if bar:
                        _progress(tally, sys.stderr)

        with tracer.run(len(scripts), where) if tracer is not None else nullcontext():
            async with anyio.create_task_group() as tg:
                for index, (name, steps) in enumerate(scripts, start=1):
                    tg.start_soon(one, index, name, steps)
    if bar:
        sys.stderr.write("\n")
    return tally


def _runtime_env(carried: Carried, export: Export | None) -> dict[str, Any]:
    """What Ray gives the processes the run starts: the tasks' modules, and the ``OTEL_``
    variables when the run's spans go over OTLP (its hosts then send theirs there too)."""
    runtime_env = carried.runtime_env()
    variables = host_variables(os.environ) if export is not None else {}
    if variables:
        runtime_env["env_vars"] = variables
    return runtime_env


def cluster_command(args: argparse.Namespace) -> int:
    """``relay cluster ...``."""
    if args.cluster_command != "run":
        from ._admin import admin_command

        return admin_command(args)
    from .._otel._export import close_export, export_for

    export: Export | None = None
    try:
        config, scripts, carried = _load(args)
        address = ray_address(args)
        ray = import_ray()
        Path(args.out).mkdir(parents=True, exist_ok=True)
        export = export_for(args.otel, os.environ, sys.stderr, "relay")
    except OSError as exc:
        print(f"relay: cannot create {args.out}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except (ConfigError, ScriptError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    local = address is None
    try:
        init_ray(ray, address, args.namespace, _runtime_env(carried, export))
    except Exception as exc:
        print(f"relay: cannot start or reach Ray: {exc}", file=sys.stderr)
        close_export(export, sys.stderr, "relay")
        return EXIT_USAGE
    tracer = RunTracer(export.provider) if export is not None else None
    started = time.perf_counter()
    try:
        tally = asyncio.run(_run_all(args, config, scripts, local, tracer))
    except ConfigError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RelayError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        ray.shutdown()
        close_export(export, sys.stderr, "relay")
    print(summary_table(tally, time.perf_counter() - started))
    return EXIT_OK if tally.failures == 0 else EXIT_FAILED


__all__ = ["cluster_command", "load_session_config", "summary_table"]
