"""The flow every compaction goes through, whatever its backend (docs/compaction.md).

:func:`run_compaction` is what every compaction point runs with the backend it was given: it
runs the pre-compact hooks, reports the compaction item, lets the backend compute the new
history, and hands it to :func:`install_result`, the tail a background result goes through as
well: the initial context and the work-state record are placed, the size checked against the
window, the history installed (one step, in the core), reported, and the post-compact hooks
run. A backend fails by raising :class:`~relay.lowlevel.CompactionFailed` or letting a
:class:`relay.ModelError` through (translated here, once); until it returns, nothing about the
session has changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import anyio
import attrs

import relay
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionContext,
    CompactionOutcome,
    CompactionRequest,
    Injection,
    Placement,
    WorkState,
    approx_tokens,
)

from ._history import carry_work_state, real_user_messages, recent_reads
from ._policy import cache_aware_head, place_initial_context
from ._save_state import save_state
from ._summary_check import CheckedResult

CUT_SUMMARY_WARNING = (
    "The summary was cut off at the answer limit: the compacted history holds what arrived and "
    "may miss the end of the work. Raise model_max_output_tokens, or compact again."
)


def still_over_window(
    tokens: int, window: int, *, installed: bool, record: WorkState | None = None
) -> str:
    """The error of a compaction that leaves the context over the window; it names the
    pinned messages when they are what fills it."""
    done = (
        "It was compacted as far as it goes"
        if installed
        else "Nothing was changed: compacting would not make it smaller"
    )
    what = (
        f"The compacted conversation, about {tokens} tokens with the instructions, tools and "
        f"initial context, still does not fit the model's context window ({window} tokens). "
        f"{done}."
    )
    pins = record.overflow_advice(window) if record is not None else None
    if pins is not None:
        return f"{what} {pins}"
    return (
        f"{what} Use a larger window (a model with one, or a server started with one), "
        "shorten the instructions or project document, or start a new session."
    )


def not_smaller(after: int, before: int) -> str:
    """The warning of a compaction whose new context would be no smaller than the old."""
    return (
        f"Nothing was changed: the compacted conversation would take about {after} tokens, "
        f"and the conversation as it stands takes about {before}. A compaction that does not "
        "make the context smaller is not installed."
    )


def hook_trigger(trigger: relay.CompactionTrigger) -> Literal["manual", "auto"]:
    """What hooks are told about a trigger: ``manual``, or ``auto`` for every automatic one."""
    return "manual" if trigger is relay.CompactionTrigger.MANUAL else "auto"


def with_record(
    backend: BackendContext, history: Sequence[relay.ResponseItem], *, refused: bool = False
) -> list[relay.ResponseItem]:
    """``history`` with the pinned user messages, (when ``features.work_state`` is on, or
    the model's summary was ``refused``) the rendered work-state record, and
    (``recent_reads_token_budget``) the files read placed in it. A record placed after a
    ``refused`` summary stands for it (:func:`carry_work_state`)."""
    view = backend.view
    # The files read are counted as estimated, whatever a server's count says of the rest.
    budget = attrs.evolve(view.budget, ratio=1.0).share(view.config.recent_reads_token_budget)
    reads = recent_reads(view.history, budget)
    return carry_work_state(
        history,
        view.work_state,
        view.budget.share(view.config.work_state_token_budget),
        include_entries=(
            view.config.features.work_state or view.config.compaction.save_state or refused
        ),
        reads=reads,
        # Codex's placement makes Codex's history: the latest message as the backend kept it.
        latest=(
            latest_user_message(view.history, view.budget.window)
            if view.config.compaction.placement == "cache_aware"
            else None
        ),
        refused=refused,
    )


#: The latest user message is put back whole when it takes at most this share of the window
#: (as a pinned message may).
LATEST_SHARE_PERCENT = 25


def latest_user_message(history: Sequence[relay.ResponseItem], window: int | None) -> str | None:
    """The text of the latest user message of ``history``, which every compaction keeps
    verbatim when it takes at most the share of the window a pinned message may (None: there
    is none, or it is larger; a backend then keeps it as far as its room goes)."""
    found = real_user_messages(history)
    if not found:
        return None
    text = found[-1].text()
    if window is not None and approx_tokens(text) * 100 > window * LATEST_SHARE_PERCENT:
        return None
    return text


def summary_check(result: BackendResult) -> tuple[str | None, bool]:
    """What a result says of its summary's check: why the model's answers were refused (the
    session's record stands for the summary), and whether a second answer was installed."""
    if isinstance(result, CheckedResult):
        return result.summary_refused, result.summary_retried
    return None, False


def context_tokens(backend: BackendContext) -> tuple[int, bool]:
    """The size of the context as it stands, and whether it rests on a server's count.

    With a response since the last compaction, it is the budget's usage (counted); else the
    calibrated estimate of a request over the history.
    """
    view = backend.view
    if view.budget.counted:
        return view.budget.usage, True
    return backend.estimate(view.history), False


async def run_compaction(
    ctx: CompactionContext, request: CompactionRequest, backend: relay.lowlevel.CompactionBackend
) -> CompactionOutcome:
    """Compact the session's history with ``backend`` now."""
    support = ctx.backend
    model = request.model or support.view.settings.model
    trigger = hook_trigger(request.trigger)
    if await ctx.run_hooks("pre_compact", trigger=trigger, model=model) is not None:
        return CompactionOutcome.STOPPED
    item_id = ctx.new_item_id("compaction")
    turn_id = support.view.turn_id
    support.emit(relay.ItemStarted(turn_id, relay.ContextCompactionItem(item_id)))
    started = anyio.current_time()
    tokens_before, counted_before = context_tokens(support)
    if support.view.config.compaction.save_state:
        await save_state(ctx)
    try:
        result = await backend.compact(support, request)
    except relay.ModelError as error:
        support.emit(relay.ErrorEvent(f"{backend.error_prefix}{error.message}", error.code))
        return CompactionOutcome.FAILED
    except relay.lowlevel.CompactionFailed as failure:
        support.emit(relay.ErrorEvent(f"{backend.error_prefix}{failure.message}", failure.code))
        return CompactionOutcome.FAILED
    refused, retried = summary_check(result)
    match result.placement:
        case Placement.IN_PLACE:
            history, clear_reference = list(result.history), False
        case Placement.FRESH_WINDOW:
            history = with_record(support, result.history, refused=refused is not None)
            clear_reference = False
        case Placement.REPLACE if (
            head := cache_aware_head(support.view.history, result.history)
            if support.view.config.compaction.placement == "cache_aware"
            else None
        ) is not None:
            # The initial context stays where it stood: the reference context is kept.
            history = with_record(support, head, refused=refused is not None)
            clear_reference = False
        case Placement.REPLACE:
            initial = (
                support.initial_context()
                if request.injection is Injection.BEFORE_LAST_USER_MESSAGE
                else []
            )
            placed = place_initial_context(result.history, initial, request.injection)
            history = with_record(support, placed, refused=refused is not None)
            clear_reference = request.injection is Injection.DO_NOT_INJECT
    receipt = relay.CompactionReceipt(
        trigger=request.trigger,
        backend=backend.name,
        tokens_before=tokens_before,
        tokens_after=support.estimate(history),
        duration_ms=round((anyio.current_time() - started) * 1000),
        cut=result.cut,
        model=result.model,
        counted_before=counted_before,
        summary_refused=refused,
        summary_retried=retried,
    )
    return await install_result(
        ctx, item_id, history, result, receipt, clear_reference=clear_reference, model=model
    )


async def install_result(
    ctx: CompactionContext,
    item_id: str,
    history: Sequence[relay.ResponseItem],
    result: BackendResult,
    receipt: relay.CompactionReceipt,
    *,
    clear_reference: bool,
    model: str,
) -> CompactionOutcome:
    """The tail of every compaction, foreground or background: install ``history`` unless it
    does not fit the window, report it, run the post-compact hooks.

    A history that leaves the context at or over the window is not a success: a smaller one
    is still installed, as far as the compaction got; a larger one is not.
    """
    support = ctx.backend
    turn_id = support.view.turn_id
    window = support.budget(model).window
    # The initial context is recorded again before the next request when it was not kept.
    needed = receipt.tokens_after + (
        support.estimate(support.initial_context()) - support.estimate([]) if clear_reference else 0
    )
    if window is not None and needed >= window:
        shrank = receipt.tokens_after < receipt.tokens_before
        if shrank:
            ctx.install(
                history, message=result.message, receipt=receipt, clear_reference=clear_reference
            )
            support.emit(
                relay.ItemCompleted(turn_id, relay.ContextCompactionItem(item_id, receipt))
            )
            support.emit(relay.ContextCompacted())
        support.emit(
            relay.ErrorEvent(
                still_over_window(needed, window, installed=shrank, record=support.view.work_state),
                relay.ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            )
        )
        return CompactionOutcome.FAILED
    # The old context's size is the larger of the server's count and relay's estimate: each
    # may leave out what the other counts (a server's template, a scripted model's tools), and
    # growth is claimed only when both say so.
    old = max(receipt.tokens_before, support.estimate(support.view.history))
    # A compaction the user asked for is installed whatever its size (docs/decisions.md).
    if needed >= old and receipt.trigger is not relay.CompactionTrigger.MANUAL:
        # Nothing changes; the loop guard tries its next step (docs/compaction.md). The item
        # ends without a receipt: nothing was installed.
        support.emit(relay.WarningEvent(not_smaller(needed, old)))
        support.emit(relay.ItemCompleted(turn_id, relay.ContextCompactionItem(item_id)))
        return CompactionOutcome.NOT_DUE
    ctx.install(
        history,
        message=result.message,
        receipt=receipt,
        clear_reference=clear_reference,
        masked_outputs=dict(result.masked_outputs),
    )
    support.emit(relay.ItemCompleted(turn_id, relay.ContextCompactionItem(item_id, receipt)))
    support.emit(relay.ContextCompacted())
    if receipt.cut:
        support.emit(relay.WarningEvent(CUT_SUMMARY_WARNING))
    for notice in result.notices:
        support.emit(relay.WarningEvent(notice))
    trigger = hook_trigger(receipt.trigger)
    if await ctx.run_hooks("post_compact", trigger=trigger, model=model) is not None:
        return CompactionOutcome.INSTALLED_THEN_STOPPED
    return CompactionOutcome.INSTALLED


__all__ = [
    "CUT_SUMMARY_WARNING",
    "context_tokens",
    "hook_trigger",
    "not_smaller",
    "install_result",
    "run_compaction",
    "still_over_window",
    "summary_check",
    "with_record",
]
