"""``python -m bench.against REF``: groups of the bench, run in turn on another commit's relay
and on this checkout's, in one sitting.

A change that cannot be switched on and off at run time is measured this way. REF's
``runtime/`` and ``tasks/`` are exported (``git archive``) into a temporary folder, which goes
first on ``PYTHONPATH`` for REF's runs; the bench itself is this checkout's for both. Each round
runs ``python -m bench --only GROUPS --json`` once on each, each in a fresh process, REF first
in odd rounds and second in even ones, so that a busy moment of the machine hits both alike.

Printed: each figure's median over the rounds (of each round's own median) for REF and for
this checkout, their ratio (this ÷ REF) and the rounds' range; then each whole bench process's
wall and CPU time.

Options: ``--only GROUPS`` (default ``scale``), ``--rounds N`` (default 3), ``--repeat N`` and
``--quick`` (passed on to the bench), ``--markdown FILE`` (also write the table as Markdown).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from ._report import _number

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def export(ref: str, into: Path) -> str:
    """Export REF's source roots into ``into``; returns the short commit it names."""
    commit = _git("rev-parse", "--short", f"{ref}^{{commit}}").decode().strip()
    with tarfile.open(fileobj=io.BytesIO(_git("archive", commit, "runtime", "tasks"))) as tar:
        tar.extractall(into, filter="data")
    return commit


def run_bench(bench_args: list[str], out: Path, paths: list[Path]) -> tuple[float, float]:
    """One bench process, with ``paths`` first on ``PYTHONPATH``; its wall and CPU seconds."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *filter(None, [env.get("PYTHONPATH")])])
    command = [sys.executable, "-m", "bench", *bench_args, "--no-plots", "--json", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu


Row = tuple[str, str, list[float], list[float]]
"""A figure's name, its unit, and its medians in each round: REF's, then this checkout's."""


def compare(rounds: list[dict[str, list[dict[str, Any]]]]) -> list[Row]:
    """The rows of the comparison, from each round's figures by side (``ref``, ``this``)."""
    order: list[tuple[str, str]] = []
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for figures_by_side in rounds:
        for side, figures in figures_by_side.items():
            for figure in figures:
                key = (figure["name"], figure["unit"])
                if key not in values:
                    order.append(key)
                    values[key] = {"ref": [], "this": []}
                values[key][side].append(figure["median"])
    return [
        (name, unit, values[name, unit]["ref"], values[name, unit]["this"]) for name, unit in order
    ]


def table(rows: list[Row], ref_label: str, this_label: str) -> list[tuple[str, ...]]:
    """The cells: figure, REF, this checkout, ratio, the rounds' ranges."""
    cells: list[tuple[str, ...]] = [
        ("figure", ref_label, this_label, "ratio", "range over the rounds")
    ]
    for name, unit, ref, this in rows:
        if not ref or not this:
            continue
        before, after = statistics.median(ref), statistics.median(this)
        ratio = f"{after / before:.2f}×" if before > 0 else ""
        spread = (
            f"{_number(min(ref))}–{_number(max(ref))}; {_number(min(this))}–{_number(max(this))}"
        )
        cells.append((name, f"{_number(before)} {unit}", f"{_number(after)} {unit}", ratio, spread))
    return cells


def _text(cells: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _markdown(cells: list[tuple[str, ...]]) -> str:
    rows = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    rows.insert(1, "|" + "---|" * len(cells[0]))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.against", description=__doc__)
    parser.add_argument("ref", help="the commit to measure this checkout against")
    parser.add_argument("--only", default="scale", help="the bench's groups (default: scale)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--repeat", type=int, help="passed on to the bench")
    parser.add_argument("--quick", action="store_true", help="passed on to the bench")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    bench_args = ["--only", args.only]
    if args.repeat:
        bench_args += ["--repeat", str(args.repeat)]
    if args.quick:
        bench_args.append("--quick")
    head = _git("rev-parse", "--short", "HEAD").decode().strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no").strip())
    this_label = f"this checkout ({head}{' + changes' if dirty else ''})"
    processes: dict[str, list[tuple[float, float]]] = {"ref": [], "this": []}
    rounds: list[dict[str, list[dict[str, Any]]]] = []
    with tempfile.TemporaryDirectory(prefix="relay-against-") as work:
        base = Path(work)
        commit = export(args.ref, base / "ref")
        ref_label = f"{args.ref} ({commit})" if args.ref != commit else commit
        sides = {"ref": [base / "ref" / "runtime", base / "ref" / "tasks"], "this": []}
        for number in range(1, args.rounds + 1):
            figures: dict[str, list[dict[str, Any]]] = {}
            for side in ("ref", "this") if number % 2 else ("this", "ref"):
                print(f"round {number}: {side} ...", file=sys.stderr, flush=True)
                out = base / f"{side}-{number}.json"
                processes[side].append(run_bench(bench_args, out, sides[side]))
                figures[side] = json.loads(out.read_text(encoding="utf-8"))
            rounds.append(figures)
    rows = compare(rounds)
    for index, what in enumerate(("wall", "CPU")):
        rows.append(
            (
                f"the whole bench process ({args.only}): {what}",
                "s",
                [run[index] for run in processes["ref"]],
                [run[index] for run in processes["this"]],
            )
        )
    cells = table(rows, ref_label, this_label)
    print(_text(cells))
    print(f"\n{args.rounds} rounds, in turn; each value is the median of the rounds' medians.")
    if args.markdown is not None:
        args.markdown.write_text(_markdown(cells) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
