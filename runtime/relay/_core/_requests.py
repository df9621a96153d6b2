"""Model requests as a task or a compaction makes them: the prompt, the estimate of what a
server would count, the room a compacted context leaves, and sampling with retries.

The task port (:mod:`._port`), the compaction support of a turn (:mod:`._support`) and a
background compaction's context (:mod:`._background`) are siblings; they share these
functions rather than inheriting from each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded, ModelError
from .._base._model import CompactRequest, Prompt
from .._base._tokens import approx_tokens, calibrated, items_tokens, tools_tokens
from ._budget import TokenBudget
from ._context import TurnSettings, WorldState, initial_context, read_project_doc
from ._history import normalize_for_prompt
from ._sampling import (
    SampleResult,
    reconnecting_message,
    stream_response,
    with_retries,
)
from ._services import Services
from ._turn import Writer
from ._work_state import work_state_budget


def build_prompt(
    services: Services,
    settings: TurnSettings,
    input: Iterable[p.ResponseItem] | None,
    *,
    tools: bool = True,
    model: str | None = None,
    purpose: str = "turn",
) -> Prompt:
    """A request for ``settings``' model over ``input`` (default: the normalised history)."""
    history = services.state.history
    wire: Sequence[dict[str, Any]] | None = None
    items: Sequence[p.ResponseItem]
    if input is None and history.regular:
        # Views of the history as it is now: no copy, whatever its length.
        items, wire = history.frozen(), history.frozen_wire()
    else:
        items = tuple(normalize_for_prompt(history.items if input is None else input))
    return Prompt(
        model=model or settings.model,
        instructions=services.instructions,
        input=items,
        wire_input=wire,
        tools=services.tools.specs() if tools else (),
        parallel_tool_calls=False,
        prompt_cache_key=services.id,
        effort=settings.effort,
        max_output_tokens=services.config.max_output_tokens(services.provider),
        purpose="compact" if purpose == "compact" else "turn",
    )


def estimate_context(services: Services, items: Sequence[p.ResponseItem]) -> int:
    """The calibrated estimate of a request over ``items``: what a server would count."""
    estimate = (
        approx_tokens(services.instructions)
        + tools_tokens(services.tools.specs())
        + items_tokens(items)
    )
    return calibrated(estimate, services.state.token_ratio)


def initial_context_items(
    services: Services,
    settings: TurnSettings,
    emit: Callable[[p.EventMsg], None],
    world: WorldState | None = None,
) -> list[p.ResponseItem]:
    """The full initial context for ``settings``' world, as recorded at a window start (a
    project document that cannot be read is reported through ``emit``)."""
    cwd = settings.cwd
    config = services.config
    return list(
        initial_context(
            world or services.world(cwd),
            developer_instructions=config.developer_instructions,
            project_doc=read_project_doc(
                cwd, config.project_doc, warn=lambda text: emit(p.WarningEvent(text))
            ),
            context_window=(
                services.context_window(settings.model) if config.features.token_budget else None
            ),
        )
    )


def work_state_tokens(services: Services, model: str) -> int:
    """The token budget of the rendered work-state record (estimate units):
    ``work_state_token_budget``, at most a tenth of the window of ``model``."""
    return work_state_budget(
        services.config.work_state_token_budget,
        services.context_window(model),
        services.state.token_ratio,
    )


def room_after(
    services: Services,
    budget: TokenBudget,
    alongside: Sequence[p.ResponseItem],
    initial: Sequence[p.ResponseItem],
) -> int | None:
    """Tokens (as a server counts them) that the messages a compaction keeps may take.

    What is left of ``budget``'s window once the rest of the new context — ``alongside`` (the
    summary or compaction item), the ``initial`` context, the instructions and tools, the
    work-state record when it is on — and room for an answer are taken, and no more than keeps
    the context under the auto-compaction limit. None when the window is unknown.
    """
    room = budget.answer_room()
    if budget.window is None or room is None:
        return None
    ceiling = budget.window - room
    if budget.limit is not None:
        ceiling = min(ceiling, budget.limit)
    if services.config.features.work_state:
        # The record is placed after the kept messages are chosen: keep its room.
        ceiling -= calibrated(work_state_tokens(services, budget.model), budget.ratio)
    return ceiling - estimate_context(services, [*alongside, *initial])


async def sample(
    services: Services,
    writer: Writer,
    prompt: Prompt,
    *,
    record: bool,
    report: bool,
    max_retries: int | None = None,
) -> SampleResult:
    """Stream one response, retrying retryable failures with ``stream_error`` events.

    Raises the last :class:`~relay.ModelError` when retries run out or it is not retryable.
    """
    limit = services.provider.stream_max_retries if max_retries is None else max_retries

    def reconnecting(attempt: int, error: ModelError) -> None:
        detail = error.message
        if error.retry_after is not None:
            # The wait the server asked for (capped by the wire): say it, it can be long.
            detail = f"{detail}; retrying in {max(0.0, error.retry_after):g} s"
        writer.emit(p.StreamErrorEvent(reconnecting_message(attempt, limit), detail))

    return await with_retries(
        lambda: stream_response(services, writer, prompt, record=record, report=report),
        max_retries=limit,
        rng=services.rng,
        before_retry=reconnecting,
    )


async def remote_compact(services: Services, request: CompactRequest) -> Any:
    """``POST /responses/compact`` with retries: transport failures, 5xx and rate limits are
    retried up to the provider's ``request_max_retries``, after the server's retry-after or the
    same jittered backoff as sampling."""
    return await with_retries(
        lambda: services.model.compact(request),
        max_retries=services.provider.request_max_retries,
        rng=services.rng,
    )


def window_full(
    services: Services,
    writer: Writer,
    model: str,
    error: ContextWindowExceeded | None = None,
) -> None:
    """Count the history as filling the context window of ``model`` and emit a
    ``token_count`` that shows it: the next turn then compacts before it sends anything."""
    if writer.detached:
        return
    window = services.context_window(model)
    state = services.state
    counted = (error.prompt_tokens if error is not None else None) or 0
    full = window or max(state.history.usage_tokens, counted)
    # The server's count, when it is more than the window, is the better figure to compact
    # from; what is shown is the window, full.
    state.history.response_completed(max(full, counted))
    writer.emit(state.token_count(p.TokenUsage(total_tokens=full), window))


__all__ = [
    "build_prompt",
    "estimate_context",
    "initial_context_items",
    "remote_compact",
    "room_after",
    "sample",
    "window_full",
    "work_state_tokens",
]
