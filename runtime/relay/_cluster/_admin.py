"""``relay cluster up``, ``ls``, ``attach`` and ``down``: a lasting deployment, from the command
line (see ``docs/cluster.md``).

Each command connects to the Ray cluster at ``--address`` (else ``$RAY_ADDRESS``), in the
deployment's ``--namespace``, does its work and returns: the deployment goes on.

Exit codes: 0 done; 1 the work failed (``up``: a host cannot see the shared rollout directory;
``attach``: no such session, or it ended or was lost, or it failed, or a ``wait_for`` can no
longer be met); 2 bad usage (Ray missing or unreachable, no deployment, a cluster without
room).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from typing import Any

from .._base import _protocol as p
from .._base._config import relay_home
from .._base._errors import ConfigError, RelayError, ScriptError
from .._drive._op_script import Step, parse_op_script
from ._client import absolute, connect
from ._command import EXIT_FAILED, EXIT_OK, EXIT_USAGE, event_line, init_ray, ray_address
from ._deploy import down, up
from ._ray import import_ray
from ._script import run_op_script
from ._tasks import load_tasks, task_options


def admin_command(args: argparse.Namespace) -> int:
    """``relay cluster up|ls|attach|down``."""
    commands: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int]]] = {
        "up": _up,
        "ls": _ls,
        "attach": _attach,
        "down": _down,
    }
    try:
        address = _address(args)
        steps = _stdin_script() if args.cluster_command == "attach" else None
        # The modules of the tasks ``up`` carries are loaded here first, then go with the job.
        carried = load_tasks(task_options(args.tasks))[0] if args.cluster_command == "up" else None
        ray = import_ray()
    except (ConfigError, ScriptError) as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    args.steps, args.carried = steps, carried
    try:
        init_ray(ray, address, args.namespace, carried.runtime_env() if carried else None)
    except Exception as exc:
        print(f"relay: cannot reach Ray at {address}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(commands[args.cluster_command](args))
    except ConfigError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RelayError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    finally:
        ray.shutdown()


def _address(args: argparse.Namespace) -> str:
    address = ray_address(args)
    if address is None:
        raise ConfigError(
            f"relay cluster {args.cluster_command} needs the Ray cluster's address: "
            "--address HOST:PORT (or RAY_ADDRESS)"
        )
    return address


def _stdin_script() -> list[Step] | None:
    """The op script on standard input, or None when it is a terminal (nothing to run)."""
    if sys.stdin is None or sys.stdin.isatty():
        return None
    try:
        text = sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScriptError("the op script on standard input is not UTF-8 text") from exc
    return parse_op_script(text, "stdin")


async def _up(args: argparse.Namespace) -> int:
    rollout_dir = absolute(args.rollout_dir or relay_home() / "sessions")
    result = await up(
        namespace=args.namespace,
        hosts=args.hosts,
        host_cpus=args.host_cpus,
        lease_s=args.lease_seconds,
        rollout_dir=rollout_dir,
        tasks=dict(args.carried.tasks),
    )
    settings = result["settings"]
    print(
        f"relay: {len(result['hosts'])} host(s) up in namespace {args.namespace!r} "
        f"({len(result['started'])} started now): {', '.join(result['hosts'])}; rollouts in "
        f"{settings['rollout_dir']}, lease {settings['lease_s']:g} s"
    )
    if settings["rollout_dir"] != rollout_dir and args.rollout_dir:
        print(
            f"relay: the deployment was up already; its rollout directory stays "
            f"{settings['rollout_dir']}",
            file=sys.stderr,
        )
    if settings["tasks"]:
        print(f"relay: the hosts carry the tasks of {', '.join(sorted(settings['tasks']))}")
    if args.tasks and settings["tasks"] != args.carried.tasks:
        print(
            "relay: the deployment was up already; its hosts carry the modules they started "
            "with (relay cluster down, then up, to change them)",
            file=sys.stderr,
        )
    for problem in result["problems"]:
        print(f"relay: {problem}", file=sys.stderr)
    return EXIT_FAILED if result["problems"] else EXIT_OK


async def _down(args: argparse.Namespace) -> int:
    ended = await down(namespace=args.namespace)
    print(
        f"relay: deployment in namespace {args.namespace!r} ended: {ended['sessions']} "
        f"session(s) shut down, {ended['hosts']} host(s) ended"
    )
    return EXIT_OK


async def _ls(args: argparse.Namespace) -> int:
    async with connect(namespace=args.namespace) as client:
        listing = await client.listing()
    if args.json:
        print(json.dumps(listing, default=str))
        return EXIT_OK
    for line in listing_lines(listing, time.time()):
        print(line)
    return EXIT_OK


def _table(heads: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(heads)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [heads, *rows]
    ]


def listing_lines(listing: dict[str, Any], now: float) -> list[str]:
    """What ``relay cluster ls`` prints: the hosts, then the sessions, then the problems."""
    hosts = [
        (
            h["name"],
            (h["node"] or "")[:12],
            h["state"],
            str(h["sessions"]),
            f"{h['renewed_s_ago']:.1f} s ago"
            if h["renewed_s_ago"] is not None and h["state"] != "lost"
            else "",
        )
        for h in listing["hosts"]
    ]
    sessions = []
    for s in listing["sessions"]:
        last = ""
        if s["last_seq"] is not None:
            last = f"#{s['last_seq']} {s['last_event']} {max(0.0, now - s['last_at']):.0f} s ago"
        sessions.append((s["id"], s["host"] or "-", str(s["epoch"]), s["state"], last))
    lines = _table(("HOST", "NODE", "STATE", "SESSIONS", "LEASE RENEWED"), hosts)
    lines.append("")
    lines += _table(("SESSION", "HOST", "EPOCH", "STATE", "LAST EVENT"), sessions)
    problems = [h["problem"] for h in listing["hosts"] if h["problem"]]
    problems += [f"session {s['id']}: {s['problem']}" for s in listing["sessions"] if s["problem"]]
    if problems:
        lines.append("")
        lines += problems
    return lines


async def _attach(args: argparse.Namespace) -> int:
    async with connect(namespace=args.namespace) as client, AsyncExitStack() as stack:
        try:
            session = await stack.enter_async_context(
                client.attach(args.session, after=args.from_seq)
            )
        except ConfigError as exc:  # no such session: the work failed, the usage was right
            print(f"relay: {exc}", file=sys.stderr)
            return EXIT_FAILED
        last = session.followed_at
        if args.from_seq is not None and last is not None and args.from_seq > last:
            print(
                f"relay: warning: --from {args.from_seq} is past the last event of session "
                f"{session.id} (seq {last}): its events come from the next one",
                file=sys.stderr,
            )

        def sink(event: p.Event) -> None:
            sys.stdout.write(event_line(event) + "\n")
            sys.stdout.flush()

        if args.steps is None:
            async for event in session.events():
                sink(event)
            return EXIT_OK
        try:
            await run_op_script(
                session, args.steps, sink, script_name="stdin", shut_down=args.shutdown
            )
        except ScriptError as exc:
            print(f"relay: {exc}", file=sys.stderr)
            return EXIT_FAILED
    return EXIT_OK


__all__ = ["admin_command", "listing_lines"]
