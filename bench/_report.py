"""Rendering: the table (plain text or Markdown), the machine's description, the plots."""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from ._core import Figure, Options

HEADERS = ("figure", "median", "p10–p90", "n", "ratio", "target", "met")


def _number(value: float) -> str:
    if math.isnan(value):
        return "–"
    magnitude = abs(value)
    if magnitude >= 100_000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _ratio(figure: Figure) -> str:
    ratio = figure.ratio
    if ratio is None or figure.ref_name is None:
        return ""
    return f"{ratio:.2f}× {figure.ref_name}"


def _met(figure: Figure) -> str:
    met = figure.met
    return "" if met is None else ("met" if met else "NOT MET")


def rows(figures: Sequence[Figure]) -> list[tuple[str, ...]]:
    """The cells of every figure, in order."""
    out = []
    for figure in figures:
        name = figure.name + (f" [{figure.note}]" if figure.note else "")
        out.append(
            (
                name,
                f"{_number(figure.median)} {figure.unit}",
                f"{_number(figure.p10)}–{_number(figure.p90)}" if len(figure.samples) > 1 else "",
                str(len(figure.samples)),
                _ratio(figure),
                figure.target_text,
                _met(figure),
            )
        )
    return out


def text_table(figures: Sequence[Figure]) -> str:
    """The table for a terminal, one block per group."""
    lines: list[str] = []
    cells = rows(figures)
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(HEADERS)]
    widths[0] = min(widths[0], 100)
    rule = "  ".join("-" * w for w in widths)
    group = None
    for figure, row in zip(figures, cells, strict=True):
        if figure.group != group:
            group = figure.group
            lines += [
                "",
                f"== {group}",
                "  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)),
                rule,
            ]
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def as_json(figure: Figure) -> dict[str, object]:
    """One figure's summary, as ``--json`` writes it."""
    return {
        "group": figure.group,
        "name": figure.name,
        "unit": figure.unit,
        "median": figure.median,
        "p10": figure.p10,
        "p90": figure.p90,
        "n": len(figure.samples),
        "note": figure.note,
    }


def markdown_table(figures: Sequence[Figure]) -> str:
    """The table in Markdown, one table per group."""
    lines: list[str] = []
    group = None
    for figure, row in zip(figures, rows(figures), strict=True):
        if figure.group != group:
            group = figure.group
            lines += [
                "",
                f"### {group}",
                "",
                "| " + " | ".join(HEADERS) + " |",
                "|" + "---|" * len(HEADERS),
            ]
        cells = [c.replace("|", "\\|") for c in row]
        if cells[6] == "NOT MET":
            cells[6] = "**not met**"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines).lstrip()


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("MemTotal"):
                    return f"{int(line.split()[1]) / 2**20:.0f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine() -> str:
    """One line that names the machine and the software measured."""
    return (
        f"{_cpu()}, {os.cpu_count()} cores, {_memory()}; {platform.system()} "
        f"{platform.release()}; Python {sys.version.split()[0]}; relay-runtime "
        f"{_version('relay-runtime')}, trio {_version('trio')}, anyio {_version('anyio')}, "
        f"openai {_version('openai')}, openai-agents {_version('openai-agents')}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )


def plots(opts: Options, directory: Path) -> list[Path]:
    """Compaction cost against history size, memory against sessions, per-turn CPU against
    turns, resume time and memory against rollout size; the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        opts.note("matplotlib is not installed; no plots were made (pip install -e '.[bench]').")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    compaction = opts.extra.get("compaction")
    if isinstance(compaction, dict):
        items, times, peaks = compaction["items"], compaction["ms"], compaction["peak_mib"]
        intercept, slope, r2 = compaction["fit"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        left.plot(items, times, "o", label="measured (median)")
        xs = [0, max(items)]
        left.plot(
            xs,
            [intercept + slope * x for x in xs],
            "-",
            label=f"fit: {intercept:.1f} ms + {slope * 1000:.2f} ms/1k items (r²={r2:.3f})",
        )
        left.axhline(50, color="red", linestyle=":", label="target at 10k items: 50 ms")
        left.set_xlabel("history items (≈100 approx. tokens each)")
        left.set_ylabel("ms")
        left.set_title("Compaction bookkeeping time")
        left.legend(fontsize=7)
        right.plot(items, peaks, "o-")
        right.set_xlabel("history items")
        right.set_ylabel("MiB")
        right.set_title("Peak new allocations (tracemalloc)")
        fig.tight_layout()
        path = directory / "compaction_cost.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    scale = opts.extra.get("scale")
    if isinstance(scale, dict):
        sessions = scale["sessions"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        left.plot(sessions, scale["heap_kib"], "o-", label="Python heap (tracemalloc)")
        left.plot(sessions, scale["rss_kib"], "s--", label="resident set growth")
        left.axhline(100, color="red", linestyle=":", label="target: 100 KiB")
        left.set_xscale("log")
        left.set_xlabel("concurrent sessions")
        left.set_ylabel("KiB per idle session")
        left.set_title("Memory per idle session")
        left.set_ylim(bottom=0)
        left.legend(fontsize=7)
        right.plot(
            sessions, [k * n / 1024 for k, n in zip(scale["heap_kib"], sessions, strict=True)], "o-"
        )
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("concurrent sessions")
        right.set_ylabel("MiB")
        right.set_title("Python heap held by all idle sessions")
        fig.tight_layout()
        path = directory / "session_memory.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    growing = opts.extra.get("growing")
    if isinstance(growing, dict):
        fig, axis = plt.subplots(figsize=(7, 4))
        axis.plot(growing["turn"], growing["cpu_ms"], "-", label="in-process session (median)")
        axis.axhline(1.0, color="red", linestyle=":", label="target: 1 ms")
        axis.set_xlabel("turn number (history grows by 2 items a turn)")
        axis.set_ylabel("CPU ms per turn")
        axis.set_ylim(bottom=0)
        axis.set_title("Per-turn CPU against the number of turns (scripted, echo)")
        axis.legend(fontsize=7)
        fig.tight_layout()
        path = directory / "turn_cpu.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    resume = opts.extra.get("resume")
    if isinstance(resume, dict) and len(resume["lines"]) > 1:
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        lines = resume["lines"]
        left.plot(lines, resume["wall_s"], "o-", label="wall")
        left.plot(lines, resume["cpu_s"], "s--", label="CPU")
        left.plot([100_000, 1_000_000], [1, 8], "rx", label="targets (1 s, 8 s)")
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("rollout lines")
        left.set_ylabel("s")
        left.set_title("Resume time, fresh process")
        left.legend(fontsize=7)
        right.plot(lines, resume["peak_mib"], "o-", label="peak RSS")
        right.plot(lines, [3 * m for m in resume["mib"]], "r:", label="3× the file")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("rollout lines")
        right.set_ylabel("MiB")
        right.set_title("Resume memory, fresh process")
        right.legend(fontsize=7)
        fig.tight_layout()
        path = directory / "resume_cost.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
