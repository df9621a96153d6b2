"""What every benchmark shares: figures, their summaries, the run's options and its notes.

A :class:`Figure` is one row of the table: repeated measurements of one quantity, summarised by
their median and their 10th-90th percentile spread, set against a reference measured in the
same run (a peer, or a bound such as the cost of the model alone) and, where one is set
(docs/benchmarks.md), against its target. Nothing here measures anything.
"""

from __future__ import annotations

import enum
import gc
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


class Better(enum.Enum):
    """Which way a figure improves."""

    LOWER = "lower"
    HIGHER = "higher"


@dataclass(frozen=True)
class Target:
    """A bound from docs/benchmarks.md (or the issue), in the figure's unit."""

    text: str
    """How docs/benchmarks.md words it."""
    limit: float
    """The bound itself."""
    better: Better = Better.LOWER
    """``LOWER``: met when the median is at most ``limit``; ``HIGHER``: at least."""

    def met(self, value: float) -> bool:
        """Whether ``value`` meets the bound."""
        return value <= self.limit if self.better is Better.LOWER else value >= self.limit


@dataclass
class Figure:
    """One row of the table."""

    group: str
    """The section it belongs to."""
    name: str
    """What was measured."""
    unit: str
    """The unit of ``samples`` (``ms``, ``µs``, ``KiB``, ``lines/s``, ...)."""
    samples: list[float]
    """The measurements, one per repetition (or per turn, per session...)."""
    ref_name: str | None = None
    """What the ratio is taken against."""
    ref_value: float | None = None
    """The reference, in the same unit, measured in the same run."""
    target: Target | None = None
    """The docs/benchmarks.md bound this figure is held to, if any."""
    ratio_target: Target | None = None
    """A bound on the ratio instead of the value (peer comparisons: "≥ 2×")."""
    note: str = ""
    """A short remark printed beside the row."""

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def p10(self) -> float:
        return percentile(self.samples, 10)

    @property
    def p90(self) -> float:
        return percentile(self.samples, 90)

    @property
    def ratio(self) -> float | None:
        """The median as a multiple of the reference (``median / reference``), or None."""
        if self.ref_value is None or not self.samples:
            return None
        return self.median / self.ref_value if self.ref_value > 0 else math.inf

    @property
    def met(self) -> bool | None:
        """Whether the bound is met (None: no bound)."""
        if self.ratio_target is not None:
            ratio = self.ratio
            return None if ratio is None else self.ratio_target.met(ratio)
        if self.target is not None and self.samples:
            return self.target.met(self.median)
        return None

    @property
    def target_text(self) -> str:
        bound = self.ratio_target or self.target
        return bound.text if bound is not None else ""


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation (NaN for no samples)."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """Least-squares ``y = a + b·x``; returns ``(a, b, r²)``."""
    n = len(xs)
    mean_x = sum(xs) / n
    mean_y = sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx if sxx else 0.0
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1 - ss_res / ss_tot if ss_tot else 1.0
    return intercept, slope, r2


@dataclass
class Options:
    """How big and how often: the full run or ``--quick``."""

    quick: bool = False
    repeat: int = 7
    """Repetitions of each measurement."""
    turn_counts: tuple[int, ...] = (1, 10, 100)
    history_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    accounting_sizes: tuple[int, ...] = (100, 1_000, 10_000, 100_000)
    rollout_lines: tuple[int, ...] = (10_000, 100_000)
    session_counts: tuple[int, ...] = (10, 100, 1_000)
    codex: bool = True
    codex_prefix: Path | None = None
    """The ``npm --prefix`` folder holding the pinned ``@openai/codex`` (default:
    :data:`bench.process.CODEX_PREFIX`)."""
    plots: Path | None = None
    """Where to save the PNG plots (None: no plots)."""
    notes: list[str] = field(default_factory=list)
    """Things skipped or worth knowing, printed under the table."""
    extra: dict[str, object] = field(default_factory=dict)
    """Data the plots and the report need besides the figures (series, fits)."""

    @classmethod
    def quick_run(cls) -> Options:
        """Tiny sizes, for the smoke test."""
        return cls(
            quick=True,
            repeat=2,
            turn_counts=(1, 3),
            history_sizes=(100, 200, 400),
            accounting_sizes=(100, 400),
            rollout_lines=(1_000,),
            session_counts=(3, 10),
            codex=False,
        )

    def count(self, full: int, quick: int = 2) -> int:
        """How many samples to take: ``full`` in a full run, ``quick`` with ``--quick``."""
        return quick if self.quick else full

    def note(self, text: str) -> None:
        """Record a note (printed under the table)."""
        self.notes.append(text)


@contextmanager
def no_gc() -> Iterator[None]:
    """Keep the cyclic collector out of a timed section."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def time_call(fn: Callable[[], object], repeat: int) -> list[float]:
    """Seconds per call of ``fn``, ``repeat`` times, the collector kept out."""
    out: list[float] = []
    gc.collect()
    with no_gc():
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return out


def ms(seconds: Sequence[float]) -> list[float]:
    """Seconds to milliseconds."""
    return [s * 1000 for s in seconds]
