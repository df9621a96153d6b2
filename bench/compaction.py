"""Compaction bookkeeping and token accounting, on histories of growing size.

Bookkeeping is everything the local compaction does besides asking the model for a summary
(docs/benchmarks.md): snapshot the history and count it, collect the real user messages and
ghost snapshots, keep the recent ones within the 20,000-token budget and rebuild the history
around the summary, then install it through :meth:`relay.lowlevel.CompactionContext.install` on
a live session that writes its rollout (a compactor of the bench's own, at the point a
``compact`` op reaches). It is
timed on histories of 1k, 10k and 100k items (about 100 approximate tokens each, so 10k items ≈
1M tokens) with a straight line fitted through the times, and its peak of new allocations is
taken with tracemalloc.

Token accounting is what a turn does to keep usage current: record the user message and the
model's answer, note the response's ``total_tokens``, read the usage. With estimates cached per
item it must not depend on the history's length; the uncached sum over the history, measured
in the same run, is the contrast. tiktoken is compared with the approximate count per MB.
"""

from __future__ import annotations

import json
import tempfile
import time
import tracemalloc
from pathlib import Path

import attrs
import trio

import relay
from relay import lowlevel as pure
from relay._base._tokens import approx_tokens, item_tokens, items_tokens
from relay._core._history import History
from relay._core._summary import ghost_snapshots, real_user_messages
from relay.tasks.compaction import (
    Compactor,
    place_initial_context,
)
from relay.testing import ScriptedModel

from ._core import Figure, Options, Target, linear_fit, ms, no_gc, time_call
from ._drive import TurnDriver, config, open_bench_session

GROUP = "compaction bookkeeping"
TOKENS = "token accounting"
BOOKKEEPING_TARGET = Target("≤ 50 ms at 1M tokens / 10k messages", 50.0)
FLAT_TARGET = Target("flat: ≤ 1.5× the smallest history", 1.5)

_PROSE = (
    "The session keeps its history in memory and writes every item to the rollout; "
    "when the window fills, the compaction task replaces it with a summary and the recent "
    "requests of the user. "
)


def make_history(count: int) -> list[relay.ResponseItem]:
    """``count`` items in the shape of a coding session, about 100 approximate tokens each:
    a user request, a tool call, its output, an answer, over and over."""
    items: list[relay.ResponseItem] = []
    for index in range(count):
        match index % 4:
            case 0:
                items.append(relay.user_message(f"Request {index}: {_PROSE * 2}"))
            case 1:
                items.append(
                    relay.FunctionCall(
                        "read_file", json.dumps({"path": f"src/mod_{index}.py"}), f"call-{index}"
                    )
                )
            case 2:
                body = "\n".join(f"    line_{n} = compute({n}, {index})" for n in range(17))
                items.append(relay.FunctionCallOutput(f"call-{index - 1}", body))
            case _:
                items.append(relay.assistant_message(f"Answer {index}: {_PROSE * 2}"))
    return items


class _Prefilled:
    """A live session whose history is set to a prepared one, again and again, cheaply.

    ``History.replace`` estimates every item, which for 100k items takes seconds; the
    prepared items and their estimates are computed once and put back directly.
    """

    def __init__(self, session: relay.Session, items: list[relay.ResponseItem]) -> None:
        self.session = session
        self.items = items
        self.estimates = [item_tokens(item) for item in items]

    def reset(self) -> None:
        history = self.session._services.state.history
        history._items = list(self.items)
        history._estimates = list(self.estimates)
        history.last_response_tokens = 0
        history.tokens_since_model = sum(self.estimates)


SUMMARY = "Requests so far: the build, the compaction tests and the rollout format."
#: The instructions of the ``compact`` op that runs :class:`_Bookkeeping` instead of relay's.
MEASURE = "bench: bookkeeping"


@attrs.frozen
class _Bookkeeping:
    """Times the bookkeeping of a local compaction, again and again, inside a live session, at
    the compaction point of a ``compact`` op with the bench's instructions (relay's own
    compactor otherwise)."""

    prefilled: list[_Prefilled]
    repeat: int
    phases: dict[str, list[float]]
    peaks: list[float]
    relays: Compactor = attrs.field(factory=Compactor)

    async def compact(
        self, ctx: pure.CompactionContext, request: pure.CompactionRequest
    ) -> pure.CompactionOutcome:
        if request.instructions != MEASURE or not self.prefilled:
            return await self.relays.compact(ctx, request)
        prefilled = self.prefilled[0]
        for _ in range(self.repeat):
            prefilled.reset()
            with no_gc():
                collect, rebuild, install = _bookkeeping(ctx, prefilled.session)
            self.phases["collect"].append(collect)
            self.phases["rebuild"].append(rebuild)
            self.phases["install"].append(install)
            self.phases["total"].append(collect + rebuild + install)
        prefilled.reset()
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        _bookkeeping(ctx, prefilled.session)
        self.peaks.append(tracemalloc.get_traced_memory()[1] - baseline)
        tracemalloc.stop()
        return pure.CompactionOutcome.INSTALLED


def _bookkeeping(ctx: pure.CompactionContext, session: relay.Session) -> tuple[float, float, float]:
    """One local compaction's bookkeeping; seconds spent collecting, rebuilding, installing."""
    start = time.perf_counter()
    history = list(ctx.backend.view.history)
    tokens_before = session._services.state.history.estimated_tokens()
    users = real_user_messages(history)
    ghosts = ghost_snapshots(history)
    collected = time.perf_counter()
    new = pure.build_compacted_history(users, SUMMARY, ghosts=ghosts)
    new = place_initial_context(new, [], pure.Injection.DO_NOT_INJECT)
    receipt = relay.CompactionReceipt(
        trigger=relay.CompactionTrigger.MANUAL,
        backend="local",
        tokens_before=tokens_before,
        tokens_after=items_tokens(new),
        duration_ms=0,
    )
    rebuilt = time.perf_counter()
    ctx.install(new, message=pure.summary_text(SUMMARY), receipt=receipt, clear_reference=True)
    installed = time.perf_counter()
    return collected - start, rebuilt - collected, installed - rebuilt


async def _measure_size(
    opts: Options, count: int, rollout_dir: Path
) -> tuple[dict[str, list[float]], float, int, list[float]]:
    items = make_history(count)
    cfg = config(enabled=True, dir=str(rollout_dir))
    model = ScriptedModel({"responses": [{"text": SUMMARY, "total_tokens": 900}] * 64})
    phases: dict[str, list[float]] = {"collect": [], "rebuild": [], "install": [], "total": []}
    peaks: list[float] = []
    end_to_end: list[float] = []
    prefilled: list[_Prefilled] = []
    measured = _Bookkeeping(prefilled, opts.repeat, phases, peaks)

    async with open_bench_session(model, cfg=cfg, compactor=lambda: measured) as session:
        driver = TurnDriver(session)
        prefilled.append(_Prefilled(session, items))
        turn_id = await session.submit(relay.Compact(instructions=MEASURE))
        await driver.wait_for(relay.TurnComplete, turn_id)
        peak = peaks[0]
        tokens = sum(prefilled[0].estimates)
        # The whole compact op, summary request included, where it stays quick.
        if count <= 10_000:
            for _ in range(max(1, opts.repeat // 2)):
                prefilled[0].reset()
                end_to_end.append(await driver.compact())
    return phases, peak / 2**20, tokens, end_to_end


def _compaction_figures(opts: Options) -> list[Figure]:
    figures: list[Figure] = []
    series: dict[str, list[float]] = {"items": [], "tokens": [], "ms": [], "peak_mib": []}
    with tempfile.TemporaryDirectory(prefix="relay-bench-") as tmp:
        results = []
        for count in opts.history_sizes:
            results.append((count, trio.run(_measure_size, opts, count, Path(tmp))))
    smallest = None
    for count, (phases, peak, tokens, end_to_end) in results:
        label = f"{count:,} items ({tokens / 1e6:.2f}M tokens)"
        total = Figure(
            GROUP,
            f"{label}: collect + budget + rebuild + install",
            "ms",
            ms(phases["total"]),
            target=BOOKKEEPING_TARGET if count == 10_000 else None,
            note=(
                f"collect {ms(phases['collect'])[0]:.1f}, rebuild {ms(phases['rebuild'])[0]:.1f},"
                f" install {ms(phases['install'])[0]:.1f} ms; peak {peak:.1f} MiB"
            ),
        )
        if smallest is None:
            smallest = (count, total.median)
        else:
            total.ref_name = f"{smallest[0]:,} items × {count // smallest[0]}"
            total.ref_value = smallest[1] * count / smallest[0]
        figures.append(total)
        figures.append(Figure(GROUP, f"{label}: peak new allocations (tracemalloc)", "MiB", [peak]))
        if end_to_end:
            figures.append(
                Figure(
                    GROUP,
                    f"{label}: whole compact op (scripted summary request)",
                    "ms",
                    ms(end_to_end),
                    ref_name="bookkeeping",
                    ref_value=total.median,
                )
            )
        series["items"].append(count)
        series["tokens"].append(tokens)
        series["ms"].append(total.median)
        series["peak_mib"].append(peak)
    intercept, slope, r2 = linear_fit(series["items"], series["ms"])
    mem_intercept, mem_slope, mem_r2 = linear_fit(series["items"], series["peak_mib"])
    opts.extra["compaction"] = {
        **series,
        "fit": (intercept, slope, r2),
        "mem_fit": (mem_intercept, mem_slope, mem_r2),
    }
    opts.note(
        f"Compaction bookkeeping fit: time ≈ {intercept:.2f} ms + {slope * 1000:.3f} ms per 1k "
        f"items (r² = {r2:.4f}); peak memory ≈ {mem_slope * 1000:.2f} MiB per 1k items "
        f"(r² = {mem_r2:.4f})."
    )
    return figures


def _accounting_turn(history: History, index: int) -> None:
    history.record(relay.user_message(f"Request {index}: {_PROSE}"))
    history.record(relay.assistant_message(f"Answer {index}: {_PROSE}"), from_model=True)
    history.response_completed(1000 + index)
    _ = history.usage_tokens


def _accounting_figures(opts: Options) -> list[Figure]:
    largest = max(opts.accounting_sizes)
    items = make_history(largest)
    start = time.perf_counter()
    estimates = [item_tokens(item) for item in items]
    per_item_us = (time.perf_counter() - start) / largest * 1e6
    figures: list[Figure] = []
    base: float | None = None
    turns = 200 if not opts.quick else 50
    for size in opts.accounting_sizes:
        history = History()
        history._items = items[:size]
        history._estimates = estimates[:size]
        samples = []
        with no_gc():
            for index in range(turns):
                begin = time.perf_counter()
                _accounting_turn(history, index)
                samples.append((time.perf_counter() - begin) * 1e6)
        cached = Figure(TOKENS, f"per turn at {size:,} items (cached estimates)", "µs", samples)
        if base is None:
            base = cached.median
        else:
            cached.ref_name = f"{min(opts.accounting_sizes):,} items"
            cached.ref_value = base
            cached.ratio_target = FLAT_TARGET
        figures.append(cached)
        view = items[:size]
        uncached = [s * 1e6 for s in time_call(lambda view=view: items_tokens(view), 3)]
        figures.append(
            Figure(
                TOKENS,
                f"contrast: re-estimating all {size:,} items",
                "µs",
                uncached,
                ref_name="cached turn",
                ref_value=cached.median,
            )
        )
        history = History()
        history._items = items[:size]
        history._estimates = estimates[:size]
        figures.append(
            Figure(
                TOKENS,
                f"no-usage path: history.estimated_tokens() at {size:,} items",
                "µs",
                [s * 1e6 for s in time_call(history.estimated_tokens, 5)],
                ref_name="cached turn",
                ref_value=cached.median,
            )
        )
    figures.append(Figure(TOKENS, "estimating one new item (JSON bytes / 4)", "µs", [per_item_us]))
    figures.extend(_tiktoken_figures(opts))
    return figures


def _sample_text(size: int) -> str:
    code = "def handler(event, ctx):\n    return {'ok': True, 'id': event['id'] * 2}\n"
    unit = _PROSE + code + "Ünïcödé — 漢字 テスト\n"
    return (unit * (size // len(unit.encode("utf-8")) + 1))[:size]


def _tiktoken_figures(opts: Options) -> list[Figure]:
    size = 2**20 if not opts.quick else 2**16
    text = _sample_text(size)
    mb = len(text.encode("utf-8")) / 2**20
    approx = [s / mb * 1000 for s in time_call(lambda: approx_tokens(text), 7)]
    approx_fig = Figure(TOKENS, "approx estimator: ms per MB", "ms/MB", approx)
    try:
        from relay._base._tiktoken import TiktokenEstimator, get_encoding
    except ImportError as exc:
        opts.note(f"tiktoken estimator unavailable ({exc}); its cost was not measured.")
        return [approx_fig]
    start = time.perf_counter()
    try:
        get_encoding("o200k_base")
    except Exception as exc:  # a missing optional dependency shows up as any error here
        opts.note(f"tiktoken's o200k_base did not load ({exc!r}); its cost was not measured.")
        return [approx_fig]
    load_ms = (time.perf_counter() - start) * 1000
    estimator = TiktokenEstimator("o200k_base")
    counted = estimator.count(text)
    repeat = 3 if not opts.quick else 1
    exact = [s / mb * 1000 for s in time_call(lambda: estimator.count(text), repeat)]
    opts.note(
        f"On the sample text tiktoken counts {counted:,} tokens where the approximation "
        f"says {approx_tokens(text):,}."
    )
    return [
        approx_fig,
        Figure(
            TOKENS,
            "tiktoken o200k_base: ms per MB",
            "ms/MB",
            exact,
            ref_name="approx",
            ref_value=approx_fig.median,
        ),
        Figure(TOKENS, "tiktoken o200k_base: first load (verified ranks)", "ms", [load_ms]),
    ]


def run(opts: Options) -> list[Figure]:
    """Compaction bookkeeping and token accounting."""
    return [*_compaction_figures(opts), *_accounting_figures(opts)]
