"""What the sandbox costs a ``shell`` call (docs/approvals.md).

The same call, ``shell`` running ``true``, through the real tool (``run_shell``: the process
guard, the command, its exit), unconfined (``danger-full-access``), in ``workspace-write``
without network (bwrap with its namespaces and the seccomp filter) and with network access
(bwrap without the network namespace and the filter). Each repetition runs the three in turn,
their order rotated, so that a busy moment of the machine hits all of them alike. Wall time
and CPU time (relay's process and every process of the call, reaped) per call; the figure held
to the target is the time the sandbox adds, each repetition's sandboxed call less its
unconfined one.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time

import trio

from relay._core._sandbox import SandboxPolicy, sandbox_problem
from relay._core._tools import ToolContext, run_shell

from ._core import Figure, Options, Target

GROUP = "sandbox"
ADDED_TARGET = Target("< 20 ms added per call", 20.0)


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(opts: Options) -> list[Figure]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        opts.note("sandbox: skipped, bwrap is not installed (apt-get install bubblewrap)")
        return []
    problem = sandbox_problem(SandboxPolicy("read-only", bwrap))
    if problem is not None:
        opts.note(f"sandbox: skipped, {problem}")
        return []
    variants: dict[str, SandboxPolicy | None] = {
        "unconfined": None,
        "workspace-write": SandboxPolicy(
            "workspace-write", bwrap, exclude_tmpdir_env_var=True, exclude_slash_tmp=True
        ),
        "workspace-write, network": SandboxPolicy(
            "workspace-write",
            bwrap,
            network_access=True,
            exclude_tmpdir_env_var=True,
            exclude_slash_tmp=True,
        ),
    }
    calls = opts.count(60, 3)
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}

    with tempfile.TemporaryDirectory(prefix="relay-bench-sandbox-") as work:

        async def measure() -> None:
            names = list(variants)
            for index in range(calls + 1):
                order = names[index % len(names) :] + names[: index % len(names)]
                for name in order:
                    ctx = ToolContext("t1", work, lambda _: None, sandbox=variants[name])
                    start_cpu, start = _cpu_s(), time.perf_counter()
                    result = await run_shell({"argv": ["true"]}, ctx)
                    elapsed, used = time.perf_counter() - start, _cpu_s() - start_cpu
                    assert result.exit_code == 0, result.output
                    if index:  # the first round warms the caches up
                        wall[name].append(elapsed * 1000)
                        cpu[name].append(used * 1000)

        trio.run(measure)

    base_wall = sorted(wall["unconfined"])[len(wall["unconfined"]) // 2]
    base_cpu = sorted(cpu["unconfined"])[len(cpu["unconfined"]) // 2]
    figures: list[Figure] = []
    for name in variants:
        figures.append(
            Figure(
                GROUP,
                f"shell `true`, {name}: wall",
                "ms",
                wall[name],
                ref_name="unconfined",
                ref_value=base_wall,
            )
        )
        figures.append(
            Figure(
                GROUP,
                f"shell `true`, {name}: CPU",
                "ms",
                cpu[name],
                ref_name="unconfined",
                ref_value=base_cpu,
                note="relay's process and the call's processes",
            )
        )
    for name in ("workspace-write", "workspace-write, network"):
        added = [s - u for s, u in zip(wall[name], wall["unconfined"], strict=True)]
        figures.append(
            Figure(
                GROUP,
                f"added by the sandbox, {name}: wall",
                "ms",
                added,
                target=ADDED_TARGET,
                note="each repetition's sandboxed call less its unconfined one",
            )
        )
    return figures
