"""Whole processes: start-up, a scripted ``relay run``, and the Codex CLI as a peer.

Every process is measured by its parent: wall time from spawn to exit and the peak resident
set reported by ``wait4`` (the largest of the process and the children it waited for).

- Start-up: ``python -c pass`` (the floor), ``import runtime``, ``import runtime, tasks``,
  and ``import openai, trio, attrs`` (what an HTTP run would pull in), each against the floor.
- ``relay run`` of an op script with three turns and two compactions on the embedded scripted
  provider, rollout written to a temporary folder.
- Peer: the Codex CLI (npm ``@openai/codex``, installed into a temporary folder at bench time,
  never into the repository) and relay, each run against relay's loopback mock server
  (``relay mock-server``) on a one-turn and a three-turn scenario. Codex reaches the mock as a
  custom provider (``wire_api = "responses"``, ``features.plugins = false``) with every proxy
  variable pointing at the mock, so that it reaches nothing else; it runs with its own empty
  ``CODEX_HOME``. ``codex exec`` runs one turn per process, so its three-turn scenario is an
  ``exec`` and two ``exec resume --last`` (three processes: wall times add up, the peak is the
  largest); relay runs its three turns in one process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ._core import Figure, Options

GROUP = "whole process"
PEER = "peer: Codex CLI"

#: How long one measured process may take before it counts as hung.
PROCESS_TIMEOUT_S = 120


#: GNU time: it waits for the measured process itself, so the peak it reports is that
#: process's own. (A child of this large process, spawned directly, would inherit this
#: process's high-water mark at ``exec``, and ``wait4`` would report that.)
GNU_TIME = "/usr/bin/time"

#: Fallback when GNU time is missing: a small Python parent that reports its child's rusage.
_RUSAGE_HELPER = """
import os, resource, subprocess, sys
status = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(f"0 {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
sys.exit(status)
"""


def measure(
    argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, int, str]:
    """Run ``argv`` to its end: wall seconds, peak RSS in MiB, exit status, stderr tail."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-time-") as tmp:
        report = Path(tmp) / "rusage"
        if os.access(GNU_TIME, os.X_OK):
            wrapped = [GNU_TIME, "-o", str(report), "-f", "%e %M", *argv]
        else:
            wrapped = [sys.executable, "-c", _RUSAGE_HELPER, str(report), *argv]
        start = time.perf_counter()
        try:
            result = subprocess.run(
                wrapped,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                timeout=PROCESS_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return time.perf_counter() - start, 0.0, -9, "timed out"
        wall = time.perf_counter() - start
        tail = result.stderr.decode("utf-8", "replace")[-600:]
        try:
            peak_kib = float(report.read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            peak_kib = 0.0
    return wall, peak_kib / 1024, result.returncode, tail


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def _series(
    argv: Sequence[str], count: int, *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[list[float], list[float]]:
    walls: list[float] = []
    peaks: list[float] = []
    for _ in range(count):
        wall, peak, status, tail = measure(argv, env=env, cwd=cwd)
        if status != 0:
            raise RuntimeError(f"{' '.join(argv)} exited with {status}: {tail}")
        walls.append(wall * 1000)
        peaks.append(peak)
    return walls, peaks


def _startup_figures(opts: Options) -> list[Figure]:
    count = opts.count(max(5, opts.repeat), 1)
    env = _python_env()
    floor, _ = _series([sys.executable, "-c", "pass"], count, env=env)
    floor_fig = Figure(GROUP, "python -c pass (floor)", "ms", floor)
    figures = [floor_fig]
    for label, code in (
        ("import runtime", "import runtime"),
        ("import runtime, tasks", "import runtime, tasks"),
        ("import openai, trio, attrs", "import openai, trio, attrs"),
    ):
        if opts.quick and "openai" in code:
            continue  # a second of start-up that the smoke test does not need
        try:
            walls, _ = _series([sys.executable, "-c", code], count, env=env)
        except RuntimeError as exc:
            opts.note(f"python -c '{label}' failed; not measured: {exc}")
            continue
        figures.append(
            Figure(
                GROUP,
                f"python -c '{label}'",
                "ms",
                walls,
                ref_name="python -c pass",
                ref_value=floor_fig.median,
            )
        )
    return figures


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


def _relay_run_figures(opts: Options, tmp: Path) -> list[Figure]:
    script = tmp / "compact-twice.jsonl"
    script.write_text("".join(json.dumps(step) + "\n" for step in COMPACT_TWICE), "utf-8")
    argv = [*_relay_argv(), "run", str(script), "--rollout-dir", str(tmp / "rollouts")]
    count = opts.count(max(3, opts.repeat), 1)
    env = {**_python_env(), "RELAY_HOME": str(tmp / "relay-home")}
    walls, peaks = _series(argv, count, env=env, cwd=tmp)
    floor = opts.extra.get("python_floor_ms")
    return [
        Figure(
            GROUP,
            "relay run: 3 turns + 2 compactions, scripted (wall)",
            "ms",
            walls,
            ref_name="python -c pass" if floor else None,
            ref_value=float(floor) if isinstance(floor, float) else None,
        ),
        Figure(GROUP, "relay run: 3 turns + 2 compactions, scripted (peak RSS)", "MiB", peaks),
    ]


# ----------------------------------------------------------------------------- Codex


class _MockServer:
    """``relay mock-server`` in a child process, serving one model script."""

    def __init__(self, script: Path, log: Path) -> None:
        self.proc = subprocess.Popen(
            [*_relay_argv(), "mock-server", "--script", str(script), "--log", str(log)],
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


def _install_codex(opts: Options, tmp: Path) -> Path | None:
    """The native ``codex`` binary, installed with npm into a temporary prefix."""
    prefix = opts.codex_prefix or tmp / "codex"
    npm = shutil.which("npm")
    if opts.codex_prefix is None:
        if npm is None:
            opts.note("npm is not on PATH; the Codex CLI peer was skipped.")
            return None
        result = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "@openai/codex"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            opts.note(
                f"npm install @openai/codex failed; the Codex peer was skipped: "
                f"{result.stderr.strip()[-300:]}"
            )
            return None
    found = sorted(prefix.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    if not found:
        launcher = prefix / "node_modules" / ".bin" / "codex"
        if launcher.exists():
            return launcher
        opts.note(f"no codex binary under {prefix}; the Codex peer was skipped.")
        return None
    return found[0]


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


def _codex_scenario(binary: Path, tmp: Path, turns: int, attempt: int) -> tuple[float, float]:
    """Wall ms (summed over processes) and peak MiB (the largest) of one Codex scenario."""
    work = tmp / f"codex-{turns}-{attempt}"
    home, cwd = work / "home", work / "cwd"
    home.mkdir(parents=True)
    cwd.mkdir()
    server = _MockServer(_model_script(work / "model.json", turns), work / "requests.jsonl")
    try:
        env = _codex_env(home, server)
        wall_total = 0.0
        peak = 0.0
        for index in range(turns):
            argv = _codex_argv(
                binary, server, f"Question {index + 1}: say hello.", resume=index > 0
            )
            wall, rss, status, tail = measure(argv, env=env, cwd=cwd)
            if status != 0:
                raise RuntimeError(f"codex exec exited with {status}: {tail}")
            wall_total += wall * 1000
            peak = max(peak, rss)
    finally:
        server.stop()
    return wall_total, peak


def _relay_scenario(tmp: Path, turns: int, attempt: int) -> tuple[float, float]:
    work = tmp / f"relay-{turns}-{attempt}"
    work.mkdir(parents=True)
    server = _MockServer(_model_script(work / "model.json", turns), work / "requests.jsonl")
    try:
        argv = [
            *_relay_argv(),
            "run",
            str(_op_script(work / "ops.jsonl", turns)),
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
            "--rollout-dir",
            str(work / "rollouts"),
        ]
        env = {
            **_python_env(),
            "RELAY_HOME": str(work / "relay-home"),
            "NO_PROXY": "127.0.0.1,localhost",
        }
        wall, rss, status, tail = measure(argv, env=env, cwd=work)
        if status != 0:
            raise RuntimeError(f"relay run exited with {status}: {tail}")
    finally:
        server.stop()
    return wall * 1000, rss


def _codex_figures(opts: Options, tmp: Path) -> list[Figure]:
    if not opts.codex:
        opts.note("The Codex CLI peer was not run (--quick or --no-codex).")
        return []
    binary = _install_codex(opts, tmp)
    if binary is None:
        return []
    version = _codex_version(binary)
    count = max(3, opts.repeat // 2)
    figures: list[Figure] = []
    for turns in (1, 3):
        codex_wall: list[float] = []
        codex_rss: list[float] = []
        relay_wall: list[float] = []
        relay_rss: list[float] = []
        try:
            for attempt in range(count):
                wall, rss = _codex_scenario(binary, tmp, turns, attempt)
                codex_wall.append(wall)
                codex_rss.append(rss)
                wall, rss = _relay_scenario(tmp, turns, attempt)
                relay_wall.append(wall)
                relay_rss.append(rss)
        except (RuntimeError, OSError) as exc:
            opts.note(f"Codex peer, {turns}-turn scenario failed: {exc}")
            continue
        scenario = "1 turn" if turns == 1 else "3 turns"
        processes = "" if turns == 1 else " (exec + 2 × exec resume)"
        codex_wall_fig = Figure(PEER, f"{version}, {scenario}{processes}: wall", "ms", codex_wall)
        codex_rss_fig = Figure(PEER, f"{version}, {scenario}: peak RSS", "MiB", codex_rss)
        figures += [
            codex_wall_fig,
            codex_rss_fig,
            Figure(
                PEER,
                f"relay run over HTTP, {scenario}: wall",
                "ms",
                relay_wall,
                ref_name="codex",
                ref_value=codex_wall_fig.median,
            ),
            Figure(
                PEER,
                f"relay run over HTTP, {scenario}: peak RSS",
                "MiB",
                relay_rss,
                ref_name="codex",
                ref_value=codex_rss_fig.median,
            ),
        ]
    return figures


def run(opts: Options) -> list[Figure]:
    """Start-up, ``relay run`` and the Codex peer."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as name:
        tmp = Path(name)
        figures = _startup_figures(opts)
        opts.extra["python_floor_ms"] = figures[0].median
        figures += _relay_run_figures(opts, tmp)
        figures += _codex_figures(opts, tmp)
        return figures
