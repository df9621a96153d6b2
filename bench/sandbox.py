"""What the process guard and the sandbox cost a command (docs/benchmarks.md, docs/approvals.md).

Six ways to run ``true``, its output read to the end: a bare spawn (``anyio.open_process``,
nothing guarding it); the process guard (``open_command``: the command in a PID namespace of
its own under a keeper, with a time limit) unconfined and in ``workspace-write`` (bwrap, its
namespaces and the seccomp filter); and the real ``shell`` tool (``run_shell`` through a
session's gate, its rules and environment: the guard, the command, its exit, the output
collected) unconfined (``danger-full-access``), in
``workspace-write`` without network and with network access (bwrap without the network
namespace and the filter). Each repetition runs a batch of calls of each way in turn, their
order rotated, so that a busy moment of the machine hits all of them alike.

Wall time is taken per call. CPU time is taken per batch, per call: relay's process and the
children it reaped (``getrusage``), and the guard, which lives on and is not reaped: its own
time and that of the keepers and commands it reaped (``utime + stime + cutime + cstime`` in
``/proc/<guard>/stat``, read once the guard has reaped the batch's keepers). The kernel counts
those in clock ticks (10 ms), hence batches. The figures held to targets: the CPU the guard
adds over the bare spawn, each repetition's guarded batch less its bare one, and the wall time
the sandbox adds to a ``shell`` call, each call less the unconfined one of the same place.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.abc
import trio

from relay._base._exec_rules import ExecRules
from relay._core._exec_gate import Gate
from relay._core._shell import run_shell
from relay._core._tools import ToolContext
from relay._exec import _process
from relay._exec._command import CommandResult, OutputSink
from relay._exec._process import open_command
from relay._exec._sandbox import SandboxPolicy, open_sandboxed, sandbox_problem

from ._core import Figure, Options, Target

GROUP = "sandbox"
ADDED_TARGET = Target("< 20 ms added per call", 20.0)
GUARD_TARGET = Target("≤ 5 ms CPU added per call", 5.0)
#: Calls of each way in a batch (CPU is read per batch: the guard's is in 10 ms ticks).
BATCH = 20

_TICK = os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _guard_cpu_s() -> float:
    """The guard's CPU time and that of the children it reaped, once it has reaped them all
    (waited for here, between batches, where nothing else runs)."""
    pid = _process._guard_pid()
    if pid is None:
        return 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    while children.read_text().strip():  # a keeper that said "done" may not be reaped yet
        time.sleep(0.001)
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return sum(int(tick) for tick in fields[11:15]) / _TICK


async def _read_to_end(stream: object) -> None:
    assert isinstance(stream, anyio.abc.ByteReceiveStream)
    async for _ in stream:
        pass


def run(opts: Options) -> list[Figure]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        opts.note("sandbox: skipped, bwrap is not installed (apt-get install bubblewrap)")
        return []
    problem = sandbox_problem(SandboxPolicy("read-only", bwrap))
    if problem is not None:
        opts.note(f"sandbox: skipped, {problem}")
        return []
    write = SandboxPolicy(
        "workspace-write", bwrap, exclude_tmpdir_env_var=True, exclude_slash_tmp=True
    )
    network = SandboxPolicy(
        "workspace-write",
        bwrap,
        network_access=True,
        exclude_tmpdir_env_var=True,
        exclude_slash_tmp=True,
    )
    rounds = opts.count(12, 2)
    batch = BATCH if not opts.quick else 3
    work = tempfile.mkdtemp(prefix="relay-bench-sandbox-")

    async def bare() -> None:
        async with await anyio.open_process(
            ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        ) as process:
            await _read_to_end(process.stdout)
            assert await process.wait() == 0

    def guarded(policy: SandboxPolicy | None) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE}
            async with open_sandboxed(
                policy,
                ["true"],
                cwd=work,
                env=None,
                stderr=subprocess.STDOUT,
                time_limit=60.0,
                **streams,
            ) as command:
                await _read_to_end(command.stdout)
                assert await command.wait() == 0

        return call

    def shell(policy: SandboxPolicy | None) -> Callable[[], Awaitable[None]]:
        # The session's gate, as a session builds it: its rules and the sandbox they make.
        rules = ExecRules(
            sandbox_mode="danger-full-access" if policy is None else policy.mode,
            network_access=policy is not None and policy.network_access,
            exclude_tmpdir_env_var=True,
            exclude_slash_tmp=True,
        )
        gate = Gate(rules, sandbox=policy)

        async def run_command(
            argv: Sequence[str],
            cwd: str,
            timeout_ms: int,
            /,
            *,
            on_output: OutputSink | None = None,
        ) -> CommandResult:
            ran = await gate.run(argv, cwd=cwd, timeout_ms=timeout_ms, on_output=on_output)
            return CommandResult(ran)

        async def call() -> None:
            ctx = ToolContext("t1", work, lambda _: None, run_command=run_command)
            result = await run_shell({"argv": ["true"]}, ctx)
            assert result.exit_code == 0, result.output

        return call

    ways: dict[str, Callable[[], Awaitable[None]]] = {
        "bare spawn": bare,
        "guarded, unconfined": guarded(None),
        "guarded, workspace-write": guarded(write),
        "shell, unconfined": shell(None),
        "shell, workspace-write": shell(write),
        "shell, workspace-write, network": shell(network),
    }
    wall: dict[str, list[float]] = {name: [] for name in ways}
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    guard_namespaced: list[bool] = []

    async def measure() -> None:
        names = list(ways)
        async with open_command(["true"], cwd=work, stdin=None, stdout=None, stderr=None) as probe:
            guard_namespaced.append(probe.namespaced)
        for index in range(rounds + 1):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                start_cpu = _own_cpu_s() + _guard_cpu_s()
                times = []
                for _ in range(batch):
                    start = time.perf_counter()
                    await ways[name]()
                    times.append((time.perf_counter() - start) * 1000)
                used = _own_cpu_s() + _guard_cpu_s() - start_cpu
                if index:  # the first round warms the caches up
                    wall[name] += times
                    cpu[name].append(used * 1000 / batch)

    try:
        trio.run(measure)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not guard_namespaced[0]:
        opts.note("sandbox: the guard ran without PID namespaces here (the fallback)")

    figures: list[Figure] = []
    for name, ref in (
        ("bare spawn", None),
        ("guarded, unconfined", "bare spawn"),
        ("guarded, workspace-write", "bare spawn"),
        ("shell, unconfined", None),
        ("shell, workspace-write", "shell, unconfined"),
        ("shell, workspace-write, network", "shell, unconfined"),
    ):
        for kind, samples in (("wall", wall), ("CPU", cpu)):
            figures.append(
                Figure(
                    GROUP,
                    f"`true`, {name}: {kind}",
                    "ms",
                    samples[name],
                    ref_name=ref,
                    ref_value=None if ref is None else _median(samples[ref]),
                    note="per call; relay, its reaped children and the guard's"
                    if kind == "CPU"
                    else "",
                )
            )
    added_cpu = [g - b for g, b in zip(cpu["guarded, unconfined"], cpu["bare spawn"], strict=True)]
    figures.append(
        Figure(
            GROUP,
            "CPU added by the guard over a bare spawn",
            "ms",
            added_cpu,
            target=GUARD_TARGET,
            note="each repetition's guarded batch less its bare one, per call",
        )
    )
    for name in ("shell, workspace-write", "shell, workspace-write, network"):
        added = [s - u for s, u in zip(wall[name], wall["shell, unconfined"], strict=True)]
        figures.append(
            Figure(
                GROUP,
                f"added by the sandbox, {name.removeprefix('shell, ')}: wall",
                "ms",
                added,
                target=ADDED_TARGET,
                note="each `shell` call less the unconfined one of the same place",
            )
        )
    return figures


def _median(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] if ordered else 0.0
