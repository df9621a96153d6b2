"""Whole processes: start-up against its floors, ``relay run``, and the Codex CLI as a peer.

Every process is measured by its parent: wall time from spawn to exit, CPU time (user +
system) and the peak resident set, both from GNU ``time`` (which waits for the measured process
itself), so memory is always that of a fresh process.

- One turn, interleaved: each repetition runs every command once, in turn, against one
  loopback ``relay mock-server``: the floors (``python -c pass``; one streamed request with
  asyncio + h11, and with trio + httpx2), ``import relay``, ``relay --version`` and
  ``relay --help`` (against ``python -c pass``), ``relay run`` of one scripted turn,
  ``relay run`` of one turn over HTTP, and ``codex exec`` of the same turn.
  ``--only startup`` runs this and the import times alone.
- Import time per top-level package of ``relay run`` over HTTP (``python -X importtime``).
- ``relay run`` of many turns on the scripted provider: CPU per turn as the session grows
  (the op-script runner included), and the peak resident set.
- Peer: the Codex CLI, pinned to :data:`CODEX_VERSION`, in an ``npm --prefix`` folder
  (``--install-codex`` puts it in :data:`CODEX_PREFIX`; ``--codex-prefix`` names another).
  Without it the Codex column is skipped with a note. Codex reaches the mock as a custom
  provider (``wire_api = "responses"``, ``features.plugins = false``) with every proxy
  variable pointing at the mock, so that it reaches nothing else; it runs with its own empty
  ``CODEX_HOME``. ``codex exec`` runs one turn per process, so its three-turn scenario is an
  ``exec`` and two ``exec resume --last`` (three processes: times add up, the peak is the
  largest); relay runs its three turns in one process.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._core import Figure, Options, Target, percentile

GROUP = "whole process"
PEER = "peer: Codex CLI"

#: How long one measured process may take before it counts as hung.
PROCESS_TIMEOUT_S = 120


#: The parent of every measured process: small, so that the child does not inherit a large
#: high-water mark at ``exec`` (as a child of this process would), and exact (``wait4``'s
#: microseconds for CPU, a monotonic clock around the child for wall time).
_RUSAGE_HELPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
status = subprocess.call(sys.argv[2:])
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    out.write(f"{wall} {usage.ru_maxrss} {usage.ru_utime} {usage.ru_stime}")
sys.exit(status)
"""


@dataclass
class Run:
    """One measured process."""

    wall: float
    """Seconds from spawn to exit."""
    cpu: float
    """User + system seconds."""
    peak_mib: float
    """Peak resident set."""
    status: int
    tail: str
    """The end of its standard error."""
    stderr: str = ""
    stdout: str = ""


def measure(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    keep_stderr: bool = False,
    keep_stdout: bool = False,
    timeout: float = PROCESS_TIMEOUT_S,
) -> Run:
    """Run ``argv`` to its end and measure it."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-time-") as tmp:
        report = Path(tmp) / "rusage"
        wrapped = [sys.executable, "-c", _RUSAGE_HELPER, str(report), *argv]
        try:
            result = subprocess.run(
                wrapped,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Run(timeout, 0.0, 0.0, -9, "timed out")
        stderr = result.stderr.decode("utf-8", "replace")
        try:
            fields = report.read_text().split()
            wall, peak_kib = float(fields[0]), float(fields[1])
            user, system = float(fields[2]), float(fields[3])
        except (OSError, ValueError, IndexError):
            wall, peak_kib, user, system = math.nan, 0.0, 0.0, 0.0
    return Run(
        wall,
        user + system,
        peak_kib / 1024,
        result.returncode,
        stderr[-600:],
        stderr if keep_stderr else "",
        result.stdout.decode("utf-8", "replace") if keep_stdout else "",
    )


def _python_env() -> dict[str, str]:
    # PYTHONPATH is kept: it lets another checkout of relay be measured with this bench.
    env = dict(os.environ)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


def _compile_relay() -> None:
    """Compile relay's modules (``__pycache__`` beside them, as Python itself would).

    Installed from a wheel, relay ships its bytecode (pip compiles it on install); an editable
    checkout run with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module again
    in every process, a cost no installed ``relay run`` pays.
    """
    probe = (
        "import importlib.util\n"
        "for name in ('relay', 'relay.tasks'):\n"
        "    print(importlib.util.find_spec(name).submodule_search_locations[0])"
    )
    env = _python_env()
    found = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    # compileall does not follow a linked folder, and relay.tasks may live apart from relay
    # (a checkout keeps it in tasks/): name each package's own folder.
    folders = found.stdout.split()
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], env=env, check=True)


def _checked(run: Run, argv: Sequence[str]) -> Run:
    if run.status != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited with {run.status}: {run.tail}")
    return run


COMPACT_TWICE = [
    {
        "id": "t1",
        "op": {"type": "user_turn", "items": [{"type": "text", "text": "Remember: hatchling."}]},
    },
    {"wait_for": {"type": "turn_complete"}},
    {"id": "c1", "op": {"type": "compact"}},
    {"wait_for": {"type": "context_compacted"}},
    {
        "id": "t2",
        "op": {
            "type": "user_turn",
            "items": [{"type": "text", "text": "And the tests use pytest."}],
        },
    },
    {"wait_for": {"type": "turn_complete", "count": 3}},
    {"id": "c2", "op": {"type": "compact"}},
    {"wait_for": {"type": "context_compacted", "count": 2}},
    {
        "id": "t3",
        "op": {
            "type": "user_turn",
            "items": [{"type": "text", "text": "What does the build use?"}],
        },
    },
]


def _op_script(path: Path, turns: int) -> Path:
    steps: list[dict[str, object]] = []
    for index in range(turns):
        steps.append(
            {
                "id": f"t{index + 1}",
                "op": {
                    "type": "user_turn",
                    "items": [{"type": "text", "text": f"Question {index + 1}: say hello."}],
                },
            }
        )
        steps.append({"wait_for": {"type": "turn_complete", "count": index + 1}})
    path.write_text("".join(json.dumps(step) + "\n" for step in steps), encoding="utf-8")
    return path


def _relay_argv() -> list[str]:
    script = Path(sys.executable).with_name("relay")
    return [str(script)] if script.exists() else [sys.executable, "-m", "relay"]


def _http_options(server: _MockServer) -> list[str]:
    return [
        "-c",
        'model_provider="mock"',
        "-c",
        'model_providers.mock.name="mock"',
        "-c",
        f'model_providers.mock.base_url="{server.base_url}"',
        "-c",
        'model_providers.mock.wire_api="responses"',
        "-c",
        'model="mock-model"',
    ]


# ----------------------------------------------------------------------------- Codex

#: The Codex CLI release measured (npm ``@openai/codex``).
CODEX_VERSION = "0.169.0"
#: Where ``--install-codex`` puts it (an ``npm --prefix`` folder, outside the repository).
CODEX_PREFIX = Path.home() / ".cache" / "relay-bench" / f"codex-{CODEX_VERSION}"


class _MockServer:
    """``relay mock-server`` in a child process, serving one model script."""

    def __init__(self, script: Path, log: Path | None = None) -> None:
        argv = [*_relay_argv(), "mock-server", "--script", str(script)]
        if log is not None:
            argv += ["--log", str(log)]
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_python_env(),
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://"):
            self.stop()
            raise RuntimeError("relay mock-server did not start")
        self.port = self.base_url.split(":")[2].split("/")[0]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _model_script(path: Path, turns: int) -> Path:
    replies = [{"text": f"Hello from the mock ({i}).", "total_tokens": 50} for i in range(turns)]
    path.write_text(json.dumps({"responses": replies}), encoding="utf-8")
    return path


def install_codex(prefix: Path = CODEX_PREFIX) -> str:
    """Install the pinned Codex CLI with npm into ``prefix``; npm's complaint, or ""."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    result = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            f"@openai/codex@{CODEX_VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return "" if result.returncode == 0 else result.stderr.strip()[-300:] or "npm failed"


def _find_codex(opts: Options) -> Path | None:
    """The native ``codex`` binary of the pinned release, or None (with a note)."""
    prefix = opts.codex_prefix or CODEX_PREFIX
    how = (
        f"install it with `python -m bench --install-codex` (npm install --prefix {CODEX_PREFIX} "
        f"@openai/codex@{CODEX_VERSION})"
    )
    found = sorted(prefix.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    launcher = prefix / "node_modules" / ".bin" / "codex"
    binary = found[0] if found else launcher if launcher.exists() else None
    if binary is None:
        opts.note(
            f"Codex CLI {CODEX_VERSION} is not installed in {prefix}: its column was "
            f"skipped; {how}."
        )
        return None
    version = _codex_version(binary)
    if CODEX_VERSION not in version:
        opts.note(
            f"{binary} is {version}, not {CODEX_VERSION}: the Codex column was skipped; {how}."
        )
        return None
    return binary


def _codex_version(binary: Path) -> str:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return "?"
    return out.stdout.strip() or "?"


def _codex_env(home: Path, server: _MockServer) -> dict[str, str]:
    proxy = f"http://127.0.0.1:{server.port}"
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "HTTP_PROXY": proxy,
        "HTTPS_PROXY": proxy,
        "ALL_PROXY": proxy,
        "http_proxy": proxy,
        "https_proxy": proxy,
        "all_proxy": proxy,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "LANG": "C.UTF-8",
    }


def _codex_argv(binary: Path, server: _MockServer, prompt: str, *, resume: bool) -> list[str]:
    argv = [str(binary), "exec"]
    if resume:
        argv += ["resume", "--last"]
    argv += [
        "--skip-git-repo-check",
        "-c",
        'model_providers.mock.name="mock"',
        "-c",
        f'model_providers.mock.base_url="{server.base_url}"',
        "-c",
        'model_providers.mock.wire_api="responses"',
        "-c",
        'model_provider="mock"',
        "-c",
        "features.plugins=false",
        "-m",
        "mock-model",
        prompt,
    ]
    return argv


# ----------------------------------------------------------------------------- one turn


@dataclass
class _Command:
    label: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path | None = None
    fresh: Callable[[int], tuple[list[str], dict[str, str], Path]] | None = None
    """Builds argv, env and cwd anew for each repetition (a fresh home or rollout folder)."""
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)


def _one_turn_commands(opts: Options, tmp: Path, server: _MockServer) -> list[_Command]:
    env = _python_env()
    floors = Path(__file__).parent / "floors"
    relay_env = {**env, "RELAY_HOME": str(tmp / "relay-home")}
    one_turn = _op_script(tmp / "one-turn.jsonl", 1)
    relay = _relay_argv()
    commands = [
        _Command("python -c pass", [sys.executable, "-c", "pass"], env),
        _Command(
            "floor: asyncio + h11, one request",
            [sys.executable, str(floors / "asyncio_h11.py"), server.base_url],
            env,
        ),
        _Command(
            "floor: trio + httpx2, one request",
            [sys.executable, str(floors / "trio_httpx2.py"), server.base_url],
            env,
        ),
        _Command("python -c 'import relay'", [sys.executable, "-c", "import relay"], env),
        _Command("relay --version", [*relay, "--version"], env),
        _Command("relay --help", [*relay, "--help"], env),
        _Command(
            "relay run, 1 scripted turn",
            [*relay, "run", str(one_turn), "--rollout-dir", str(tmp / "rollouts")],
            relay_env,
            tmp,
        ),
        _Command(
            "relay run, 1 turn over HTTP",
            [
                *relay,
                "run",
                str(one_turn),
                *_http_options(server),
                "--rollout-dir",
                str(tmp / "rollouts"),
            ],
            relay_env,
            tmp,
        ),
    ]
    if opts.quick:
        commands = [c for c in commands if "HTTP" not in c.label and "httpx2" not in c.label]
    binary = _find_codex(opts) if opts.codex else None
    if not opts.codex:
        opts.note("The Codex CLI peer was not run (--quick or --no-codex).")
    if binary is not None:
        version = _codex_version(binary)

        def fresh(attempt: int) -> tuple[list[str], dict[str, str], Path]:
            work = tmp / f"codex-1-{attempt}"
            (work / "home").mkdir(parents=True)
            (work / "cwd").mkdir()
            argv = _codex_argv(binary, server, "Question 1: say hello.", resume=False)
            return argv, _codex_env(work / "home", server), work / "cwd"

        commands.append(_Command(f"{version} exec, 1 turn", [], {}, fresh=fresh))
    return commands


#: Ratio targets of the one-turn comparison.
HTTP_TARGET = Target("≤ 1.5× codex exec", 1.5)
SCRIPTED_TARGET = Target("≤ 1.0× codex exec", 1.0)
#: Ratio targets of start-up against ``python -c pass`` (docs/benchmarks.md).
STARTUP_TARGETS = {
    "python -c 'import relay'": Target("≤ 4× python -c pass", 4.0),
    "relay --version": Target("≤ 5× python -c pass", 5.0),
    "relay --help": Target("≤ 5× python -c pass", 5.0),
}


def _one_turn_figures(opts: Options, tmp: Path) -> list[Figure]:
    count = opts.count(max(5, opts.repeat), 1)
    server = _MockServer(_model_script(tmp / "echo.json", 0))
    try:
        commands = _one_turn_commands(opts, tmp, server)
        for attempt in range(count):  # interleaved: every command once per repetition
            for command in commands:
                argv, env, cwd = command.argv, command.env, command.cwd
                if command.fresh is not None:
                    argv, env, cwd = command.fresh(attempt)
                try:
                    run = _checked(measure(argv, env=env, cwd=cwd), argv)
                except RuntimeError as exc:
                    opts.note(f"{command.label}: failed, not measured: {exc}")
                    commands.remove(command)
                    break
                command.walls.append(run.wall * 1000)
                command.cpus.append(run.cpu * 1000)
                command.peaks.append(run.peak_mib)
    finally:
        server.stop()
    floor = commands[0]
    codex = next((c for c in commands if "exec" in c.label), None)
    figures: list[Figure] = []
    for command in commands:
        is_relay = command.label.startswith("relay run")
        ref: _Command | None = codex if (codex is not None and is_relay) else floor
        if command is floor or command is codex:
            ref = None
        target = STARTUP_TARGETS.get(command.label)
        if is_relay and codex is not None:
            target = HTTP_TARGET if "HTTP" in command.label else SCRIPTED_TARGET
        ref_name = None if ref is None else ("codex" if ref is codex else "python -c pass")
        for what, samples, ref_samples in (
            ("wall", command.walls, None if ref is None else ref.walls),
            ("CPU", command.cpus, None if ref is None else ref.cpus),
        ):
            figures.append(
                Figure(
                    GROUP,
                    f"{command.label}: {what}",
                    "ms",
                    samples,
                    ref_name=ref_name,
                    ref_value=statistics.median(ref_samples) if ref_samples else None,
                    ratio_target=target,
                    note=f"p95 {percentile(samples, 95):.0f}" if len(samples) >= 5 else "",
                )
            )
        figures.append(
            Figure(
                GROUP,
                f"{command.label}: peak RSS",
                "MiB",
                command.peaks,
                ref_name="codex" if ref is codex and ref is not None else None,
                ref_value=statistics.median(codex.peaks) if ref is codex and codex else None,
            )
        )
    opts.extra["python_floor_ms"] = statistics.median(floor.walls)
    return figures


# ----------------------------------------------------------------------------- imports

IMPORTS = "import time, relay run over HTTP"


def _import_figures(opts: Options, tmp: Path) -> list[Figure]:
    """Self import time summed per top-level package, over a whole ``relay run`` (HTTP)."""
    count = opts.count(3, 1)
    server = _MockServer(_model_script(tmp / "echo-imports.json", 0))
    per_package: dict[str, list[float]] = {}
    totals: list[float] = []
    modules = 0
    try:
        script = _op_script(tmp / "imports-turn.jsonl", 1)
        argv = [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "relay",
            "run",
            str(script),
            *_http_options(server),
            "--rollout-dir",
            str(tmp / "rollouts-imports"),
        ]
        env = {**_python_env(), "RELAY_HOME": str(tmp / "relay-home")}
        if opts.quick:
            argv = [sys.executable, "-X", "importtime", "-c", "import relay"]
        for _ in range(count):
            run = _checked(measure(argv, env=env, cwd=tmp, keep_stderr=True), argv)
            sums: dict[str, float] = {}
            modules = 0
            for line in run.stderr.splitlines():
                if not line.startswith("import time:") or "self [us]" in line:
                    continue
                self_us, _, name = (part.strip() for part in line[12:].split("|"))
                top = name.split(".")[0]
                sums[top] = sums.get(top, 0.0) + float(self_us) / 1000
                modules += 1
            for top, value in sums.items():
                per_package.setdefault(top, []).append(value)
            totals.append(sum(sums.values()))
    finally:
        server.stop()
    total = statistics.median(totals)
    ranked = sorted(per_package.items(), key=lambda kv: -statistics.median(kv[1]))
    figures = [
        Figure(IMPORTS, f"all imports ({modules} modules)", "ms", totals),
    ]
    shown = ranked[:15]
    for top, samples in shown:
        figures.append(Figure(IMPORTS, top, "ms", samples, ref_name="all imports", ref_value=total))
    rest = [statistics.median(s) for _, s in ranked[15:]]
    if rest:
        figures.append(
            Figure(
                IMPORTS,
                f"{len(rest)} other packages",
                "ms",
                [sum(rest)],
                ref_name="all imports",
                ref_value=total,
            )
        )
    return figures


# ----------------------------------------------------------------------------- many turns

MANY = "relay run, many scripted turns"


def _many_turn_figures(opts: Options, tmp: Path) -> list[Figure]:
    """CPU per turn of a scripted ``relay run`` as the session grows, and its peak RSS.

    Each repetition runs every size once, in turn; the CPU per turn between two sizes is the
    difference of their CPU times over the difference of their turns, one sample per
    repetition, so start-up cancels out and a busy moment of the machine hits all sizes alike.
    """
    sizes = (5, 10) if opts.quick else (250, 1000, 4000, 10000)
    repeat = 1 if opts.quick else 3
    env = {**_python_env(), "RELAY_HOME": str(tmp / "relay-home")}
    scripts = {turns: _op_script(tmp / f"turns-{turns}.jsonl", turns) for turns in sizes}
    cpu: dict[int, list[float]] = {turns: [] for turns in sizes}
    peak: dict[int, list[float]] = {turns: [] for turns in sizes}
    for _ in range(repeat):
        for turns in sizes:
            argv = [*_relay_argv(), "run", str(scripts[turns]), "--rollout-dir", str(tmp / "r")]
            try:
                run = _checked(measure(argv, env=env, cwd=tmp, timeout=1800), argv)
            except RuntimeError as exc:
                opts.note(f"relay run of {turns} turns failed: {exc}")
                return []
            cpu[turns].append(run.cpu)
            peak[turns].append(run.peak_mib)
    figures: list[Figure] = []
    for previous, turns in itertools.pairwise(sizes):
        per_turn = [
            (after - before) / (turns - previous) * 1000
            for before, after in zip(cpu[previous], cpu[turns], strict=True)
        ]
        figures.append(
            Figure(
                MANY,
                f"CPU per turn, turns {previous + 1:,}–{turns:,} (whole process)",
                "ms",
                per_turn,
                target=Target("≤ 1 ms, flat", 1.0),
            )
        )
    for turns in sizes:
        figures.append(Figure(MANY, f"{turns:,} turns: peak RSS", "MiB", peak[turns]))
    opts.extra["relay_run_cpu"] = {
        "turns": list(sizes),
        "cpu_s": [statistics.median(cpu[turns]) for turns in sizes],
    }
    return figures


# ----------------------------------------------------------------------------- three turns


def _codex_scenario(binary: Path, tmp: Path, turns: int, attempt: int) -> Run:
    """One Codex scenario: times summed over its processes, the peak the largest."""
    work = tmp / f"codex-{turns}-{attempt}"
    home, cwd = work / "home", work / "cwd"
    home.mkdir(parents=True)
    cwd.mkdir()
    server = _MockServer(_model_script(work / "model.json", turns))
    total = Run(0.0, 0.0, 0.0, 0, "")
    try:
        env = _codex_env(home, server)
        for index in range(turns):
            argv = _codex_argv(
                binary, server, f"Question {index + 1}: say hello.", resume=index > 0
            )
            run = _checked(measure(argv, env=env, cwd=cwd), argv)
            total.wall += run.wall
            total.cpu += run.cpu
            total.peak_mib = max(total.peak_mib, run.peak_mib)
    finally:
        server.stop()
    return total


def _relay_scenario(tmp: Path, turns: int, attempt: int) -> Run:
    work = tmp / f"relay-{turns}-{attempt}"
    work.mkdir(parents=True)
    server = _MockServer(_model_script(work / "model.json", turns))
    try:
        argv = [
            *_relay_argv(),
            "run",
            str(_op_script(work / "ops.jsonl", turns)),
            *_http_options(server),
            "--rollout-dir",
            str(work / "rollouts"),
        ]
        env = {**_python_env(), "RELAY_HOME": str(work / "relay-home")}
        return _checked(measure(argv, env=env, cwd=work), argv)
    finally:
        server.stop()


def _three_turn_figures(opts: Options, tmp: Path) -> list[Figure]:
    if not opts.codex:
        return []
    binary = _find_codex(opts)
    if binary is None:
        return []
    version = _codex_version(binary)
    count = max(3, opts.repeat // 2)
    codex: list[Run] = []
    relay: list[Run] = []
    try:
        for attempt in range(count):
            codex.append(_codex_scenario(binary, tmp, 3, attempt))
            relay.append(_relay_scenario(tmp, 3, attempt))
    except (RuntimeError, OSError) as exc:
        opts.note(f"Codex peer, 3-turn scenario failed: {exc}")
        return []
    figures: list[Figure] = []
    getters: list[tuple[str, str, Callable[[Run], float]]] = [
        ("wall", "ms", lambda r: r.wall * 1000),
        ("CPU", "ms", lambda r: r.cpu * 1000),
        ("peak RSS", "MiB", lambda r: r.peak_mib),
    ]
    for what, unit, get in getters:
        peer = Figure(
            PEER,
            f"{version}, 3 turns (exec + 2 × exec resume): {what}",
            unit,
            [get(r) for r in codex],
        )
        figures += [
            peer,
            Figure(
                PEER,
                f"relay run over HTTP, 3 turns in one process: {what}",
                unit,
                [get(r) for r in relay],
                ref_name="codex",
                ref_value=peer.median,
            ),
        ]
    return figures


def _compact_twice_figures(opts: Options, tmp: Path) -> list[Figure]:
    script = tmp / "compact-twice.jsonl"
    script.write_text("".join(json.dumps(step) + "\n" for step in COMPACT_TWICE), "utf-8")
    argv = [*_relay_argv(), "run", str(script), "--rollout-dir", str(tmp / "rollouts")]
    count = opts.count(max(3, opts.repeat), 1)
    env = {**_python_env(), "RELAY_HOME": str(tmp / "relay-home")}
    runs = [_checked(measure(argv, env=env, cwd=tmp), argv) for _ in range(count)]
    name = "relay run: 3 turns + 2 compactions, scripted"
    return [
        Figure(GROUP, f"{name} (wall)", "ms", [r.wall * 1000 for r in runs]),
        Figure(GROUP, f"{name} (CPU)", "ms", [r.cpu * 1000 for r in runs]),
        Figure(GROUP, f"{name} (peak RSS)", "MiB", [r.peak_mib for r in runs]),
    ]


def run_startup(opts: Options) -> list[Figure]:
    """Start-up and one turn against the floors and Codex, and the imports of a turn."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        tmp = Path(name)
        _compile_relay()
        return _one_turn_figures(opts, tmp) + _import_figures(opts, tmp)


def run(opts: Options) -> list[Figure]:
    """Start-up and one turn against the floors and Codex, imports, long runs, three turns."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        tmp = Path(name)
        _compile_relay()
        figures = _one_turn_figures(opts, tmp)
        figures += _compact_twice_figures(opts, tmp)
        figures += _import_figures(opts, tmp)
        figures += _many_turn_figures(opts, tmp)
        figures += _three_turn_figures(opts, tmp)
        return figures
