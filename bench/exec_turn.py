"""One SDK turn, whole process: ``relay exec --experimental-json`` against ``codex exec --json``.

Codex's TypeScript SDK starts one ``exec`` process per turn, so a turn through it pays the
engine's start-up every time (docs/benchmarks.md, "Start-up, per turn"). This group measures
that turn as the SDK makes it, interleaved, each round running every command once in a rotated
order against one loopback ``relay mock-server`` started for the whole group:

- ``relay exec --experimental-json --skip-git-repo-check "hi"`` over HTTP: the ``openai``
  provider given a base URL with ``--config openai_base_url=...`` and its key in
  ``CODEX_API_KEY``, as the SDK's ``baseUrl`` and ``apiKey`` do;
- the same command on the scripted model (no HTTP at all);
- ``codex exec --json --skip-git-repo-check "hi"``, the native binary of the pinned release
  (the one the SDK spawns), its ``CODEX_HOME`` a folder of its own whose ``config.toml`` points
  a model provider at the mock, every proxy variable pointing at the mock too;
- ``python -c pass``, the floor of any Python process.

relay runs from its byte-compiled sources (compiled first, ``PYTHONDONTWRITEBYTECODE`` unset
for it), as an installed relay does. Each side keeps one home for the group (``RELAY_HOME``,
``CODEX_HOME``), as an SDK user's does, and one round that is not counted warms both. Wall
time and CPU time (user + system, the children's ``rusage`` of a small parent) are taken per
process; the ratios are relay's medians over Codex's. Without the Codex binary the group says
so and measures relay alone. Then, where relay's HTTP turn spends its time: the CPU of
processes that import, step by step, what the turn imports (each step adds a layer to the one
before; ``trio`` and ``h2`` marked unavailable, as the command does), interleaved, each step's
figure the CPU it adds; and ``python -X importtime`` over the same command, self time summed
per top-level package.

``python -m bench --only exec`` runs it; ``--codex-prefix DIR`` names the ``npm --prefix``
folder holding ``@openai/codex`` when it is neither the default one nor on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ._core import Figure, Options, Target, percentile
from .process import (
    CODEX_PREFIX,
    CODEX_VERSION,
    Run,
    _codex_version,
    _compile_relay,
    _MockServer,
    _model_script,
    _relay_argv,
    measure,
)

GROUP = "one SDK turn: relay exec --experimental-json vs codex exec --json"
IMPORTS = "import time, relay exec --experimental-json over HTTP"
WHERE = "where an SDK turn over HTTP spends its CPU: imports, step by step"
#: The issue's goal: one SDK turn through relay costs at most 1.2× Codex's, wall and CPU.
TARGET = Target("≤ 1.2× codex exec", 1.2)
PROMPT = "hi"
#: The key relay's ``openai`` provider reads, as the SDK passes its ``apiKey``.
API_KEY = "sk-bench-not-a-real-key"


@dataclass
class _Command:
    label: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    expect: str
    """A text every run's standard output must hold (the turn completed)."""
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    peaks: list[float] = field(default_factory=list)


def _relay_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(RELAY_HOME=str(home), NO_PROXY="127.0.0.1,localhost", CODEX_API_KEY=API_KEY)
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env


def _relay_http_args(server: _MockServer) -> list[str]:
    return [
        "exec",
        "--experimental-json",
        "--skip-git-repo-check",
        "--config",
        f'openai_base_url="{server.base_url}"',
        "-m",
        "mock-model",
        PROMPT,
    ]


def _relay_scripted_argv() -> list[str]:
    return [*_relay_argv(), "exec", "--experimental-json", "--skip-git-repo-check", PROMPT]


def find_codex(opts: Options) -> Path | None:
    """The native ``codex`` binary of the pinned release: in ``--codex-prefix``, the default
    prefix, or the ``npm`` folder of a ``codex`` on ``PATH``; None (with a note) if absent."""
    prefixes = [opts.codex_prefix] if opts.codex_prefix else [CODEX_PREFIX]
    on_path = shutil.which("codex")
    if on_path is not None:
        launcher = Path(on_path).resolve()
        # node_modules/@openai/codex/bin/codex.js: the prefix is above node_modules.
        prefixes += [p for p in launcher.parents if p.name == "node_modules"][:1]
        prefixes = [p.parent if p.name == "node_modules" else p for p in prefixes]
    for prefix in prefixes:
        found = sorted(prefix.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
        if found and CODEX_VERSION in _codex_version(found[0]):
            return found[0]
    opts.note(
        f"Codex CLI {CODEX_VERSION} not found (in {', '.join(map(str, prefixes))}): relay "
        "was measured alone; name its npm prefix with --codex-prefix DIR."
    )
    return None


def _codex_home(home: Path, server: _MockServer) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        'model = "mock-model"\n'
        'model_provider = "mock"\n'
        "\n"
        "[model_providers.mock]\n"
        'name = "mock"\n'
        f'base_url = "{server.base_url}"\n'
        'wire_api = "responses"\n'
        "\n"
        "[features]\n"
        "plugins = false\n",
        encoding="utf-8",
    )


def _codex_env(home: Path, server: _MockServer) -> dict[str, str]:
    proxy = f"http://127.0.0.1:{server.port}"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home)}
    env.update({name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
    env.update({name.lower(): proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")})
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", LANG="C.UTF-8")
    return env


def _commands(opts: Options, tmp: Path, server: _MockServer) -> list[_Command]:
    relay_env = _relay_env(tmp / "relay-home")
    work = tmp / "work"
    work.mkdir()
    commands = [
        _Command("python -c pass", [sys.executable, "-c", "pass"], relay_env, work, ""),
        _Command(
            "relay exec, 1 turn over HTTP",
            [*_relay_argv(), *_relay_http_args(server)],
            relay_env,
            work,
            "turn.completed",
        ),
        _Command(
            "relay exec, 1 scripted turn",
            _relay_scripted_argv(),
            relay_env,
            work,
            "turn.completed",
        ),
    ]
    binary = find_codex(opts) if opts.codex else None
    if not opts.codex:
        opts.note("exec turn: Codex was not run (--quick or --no-codex); relay measured alone.")
    if binary is not None:
        home = tmp / "codex-home"
        _codex_home(home, server)
        argv = [str(binary), "exec", "--json", "--skip-git-repo-check", PROMPT]
        label = f"{_codex_version(binary)} exec --json, 1 turn"
        commands.append(_Command(label, argv, _codex_env(home, server), work, "turn.completed"))
    return commands


def _run(command: _Command) -> Run | str:
    run = measure(command.argv, env=command.env, cwd=command.cwd, keep_stdout=True)
    if run.status != 0:
        return f"exited with {run.status}: {run.tail}"
    if command.expect not in run.stdout:
        return f"no {command.expect!r} in its output: {run.stdout[-300:]!r} {run.tail}"
    return run


def _figures(commands: list[_Command]) -> list[Figure]:
    codex = next((c for c in commands if "codex" in c.label), None)
    floor = commands[0]
    figures: list[Figure] = []
    for command in commands:
        is_relay = command.label.startswith("relay")
        ref = codex if is_relay and codex is not None else None
        if is_relay and ref is None:
            ref = floor
        target = TARGET if ref is codex and "HTTP" in command.label else None
        ref_name = None if ref is None else "codex" if ref is codex else "python -c pass"
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
        figures.append(Figure(GROUP, f"{command.label}: peak RSS", "MiB", command.peaks))
    return figures


def _turn_figures(opts: Options, tmp: Path, server: _MockServer) -> list[Figure]:
    commands = _commands(opts, tmp, server)
    rounds = opts.count(max(11, opts.repeat), 1)
    for attempt in range(rounds + 1):  # round 0 warms the homes and the caches; not counted
        shift = attempt % len(commands)
        for command in commands[shift:] + commands[:shift]:
            if command not in commands:
                continue
            outcome = _run(command)
            if isinstance(outcome, str):
                opts.note(f"{command.label}: failed, not measured: {outcome}")
                commands.remove(command)
                continue
            if attempt == 0:
                continue
            command.walls.append(outcome.wall * 1000)
            command.cpus.append(outcome.cpu * 1000)
            command.peaks.append(outcome.peak_mib)
    return _figures([c for c in commands if c.walls])


def self_times(importtime: str) -> dict[str, float]:
    """Self import time in ms per top-level package, from ``-X importtime``'s report."""
    sums: dict[str, float] = {}
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
        top = name.split(".")[0]
        sums[top] = sums.get(top, 0.0) + float(self_us) / 1000
    return sums


def _import_figures(opts: Options, tmp: Path, server: _MockServer) -> list[Figure]:
    argv = [sys.executable, "-X", "importtime", "-m", "relay", *_relay_http_args(server)]
    env = _relay_env(tmp / "relay-home")
    per_package: dict[str, list[float]] = {}
    totals: list[float] = []
    for _ in range(opts.count(3, 1)):
        run = measure(argv, env=env, cwd=tmp / "work", keep_stderr=True)
        if run.status != 0:
            opts.note(f"exec turn, import times: exited with {run.status}: {run.tail}")
            return []
        sums = self_times(run.stderr)
        for top, value in sums.items():
            per_package.setdefault(top, []).append(value)
        totals.append(sum(sums.values()))
    total = statistics.median(totals)
    ranked = sorted(per_package.items(), key=lambda kv: -statistics.median(kv[1]))
    figures = [Figure(IMPORTS, "all imports", "ms", totals)]
    for top, samples in ranked[:12]:
        figures.append(Figure(IMPORTS, top, "ms", samples, ref_name="all imports", ref_value=total))
    return figures


#: What an SDK turn over HTTP imports, in layers: each step imports its own and all before.
STEPS = (
    ("python -c pass", ""),
    ("attrs and cattrs", "import attrs, cattrs"),
    ("anyio and asyncio", "import anyio, asyncio"),
    ("relay's configuration and protocol", "import relay._base._config, relay._base._protocol"),
    (
        "the session, its tools and tasks, the CLI",
        "import relay._open, relay.tasks, relay._cli._main, relay._cli._codex_stream",
    ),
    ("the openai SDK's client, pydantic, httpx2 and httpcore2 (relay._wire)", "import relay._wire"),
)


def _where_figures(opts: Options, tmp: Path, http_cpu: list[float]) -> list[Figure]:
    env = _relay_env(tmp / "relay-home")
    prelude = "import sys; sys.modules['trio'] = None; sys.modules['h2'] = None"
    codes = [
        ";".join([prelude, *(code for _, code in STEPS[: i + 1] if code)])
        for i in range(len(STEPS))
    ]
    cpus: list[list[float]] = [[] for _ in STEPS]
    for _ in range(opts.count(7, 1)):
        for index, code in enumerate(codes):
            run = measure([sys.executable, "-c", code], env=env, cwd=tmp)
            if run.status != 0:
                opts.note(f"exec turn, import steps: {STEPS[index][0]} failed: {run.tail}")
                return []
            cpus[index].append(run.cpu * 1000)
    medians = [statistics.median(samples) for samples in cpus]
    figures = [Figure(WHERE, f"{STEPS[0][0]}: CPU", "ms", cpus[0])]
    for index in range(1, len(STEPS)):
        figures.append(
            Figure(
                WHERE,
                f"+ {STEPS[index][0]}: CPU added",
                "ms",
                [cpu - medians[index - 1] for cpu in cpus[index]],
            )
        )
    if http_cpu:
        figures.append(
            Figure(
                WHERE,
                "+ the turn itself (the whole HTTP turn less all its imports): CPU",
                "ms",
                [cpu - medians[-1] for cpu in http_cpu],
            )
        )
    return figures


def run(opts: Options) -> list[Figure]:
    """One SDK turn through ``relay exec`` and ``codex exec``, and relay's imports in it."""
    with tempfile.TemporaryDirectory(prefix="relay-bench-exec-") as name:
        tmp = Path(name)
        _compile_relay()
        server = _MockServer(_model_script(tmp / "echo.json", 0))
        try:
            figures = _turn_figures(opts, tmp, server)
            http = next((f for f in figures if f.name == "relay exec, 1 turn over HTTP: CPU"), None)
            figures += _where_figures(opts, tmp, http.samples if http is not None else [])
            figures += _import_figures(opts, tmp, server)
        finally:
            server.stop()
        return figures
