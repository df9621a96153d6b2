"""Model requests: the estimate of what a server would count, the retry policy, and the
streaming of one response (docs/session.md).

Every model request that may be retried (a turn's sampling, a summarization, a remote
compaction) goes through :func:`with_retries`; every response streams through
:func:`stream_response`, which reports it, records it and counts its usage through the writer
of the work that sent it (a turn's, or a background compaction's, which writes nothing). The
task port (:mod:`._port`) and a backend's context (:mod:`._support`) share these functions."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, assert_never

import anyio
import attrs

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded, ModelError
from .._base._model import (
    CUT_AT_LIMIT,
    CompactRequest,
    Completed,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    SummaryTextDelta,
)
from .._base._tokens import (
    TokenEstimator,
    approx_tokens,
    calibrated,
    count_items,
    items_tokens,
    tokens_for_bytes,
    tools_tokens,
)
from ._budget import TokenBudget
from ._context import TurnSettings, WorldState, initial_context, read_project_doc
from ._history import History
from ._session_writer import SessionWriter
from ._summary import real_user_messages
from ._turn import Writer
from ._view import TaskView
from ._wiring import Wiring
from ._work_state import record_bound

T = TypeVar("T")

BASE_DELAY = 0.2


def backoff_delay(attempt: int, rng: random.Random) -> float:
    """Seconds before retry ``attempt`` (from 1): 200 ms × 2^(n−1) × a jitter in [0.9, 1.1)."""
    jitter: float = rng.uniform(0.9, 1.1)
    return float(BASE_DELAY * 2 ** (attempt - 1) * jitter)


def retry_delay(
    error: ModelError, attempt: int, max_retries: int, rng: random.Random
) -> float | None:
    """How long to wait before retrying after ``error``, or None to give up."""
    if not error.retryable or attempt > max_retries:
        return None
    if error.retry_after is not None:
        return max(0.0, error.retry_after)
    return backoff_delay(attempt, rng)


def reconnecting_message(attempt: int, max_retries: int) -> str:
    """The ``stream_error`` message shown before retry ``attempt``."""
    return f"Reconnecting... {attempt}/{max_retries}"


async def with_retries(
    request: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    rng: random.Random,
    before_retry: Callable[[int, ModelError], None] | None = None,
) -> T:
    """Run ``request``, retrying a retryable :class:`ModelError` up to ``max_retries`` times.

    Each retry waits :func:`retry_delay` first; ``before_retry(attempt, error)`` is told about
    it before the wait. The last error is raised when retries run out or it is not retryable.
    """
    attempt = 0
    while True:
        try:
            return await request()
        except ModelError as error:
            attempt += 1
            delay = retry_delay(error, attempt, max_retries, rng)
            if delay is None:
                raise
            if before_retry is not None:
                before_retry(attempt, error)
            await anyio.sleep(delay)


@attrs.frozen
class SampleResult:
    """What one completed model response gave."""

    output: tuple[p.ResponseItem, ...]
    """Its output items, recorded in the history."""
    usage: p.TokenUsage
    """Its usage (estimated when the server reported none)."""
    incomplete: str | None = None
    """Why the answer was cut short (``max_output_tokens``): what arrived is all there is,
    and the tool calls of a cut answer were left out."""

    @property
    def last_agent_message(self) -> str | None:
        """The text of its last assistant message."""
        texts = [
            i.text() for i in self.output if isinstance(i, p.Message) and i.role == "assistant"
        ]
        return texts[-1] if texts else None

    @property
    def tool_calls(self) -> list[p.ToolCall]:
        """The calls the model asked for, in order."""
        return [i for i in self.output if isinstance(i, p.FunctionCall | p.CustomToolCall)]


def estimate_usage(
    estimator: TokenEstimator,
    history: History,
    instructions: str,
    output: Sequence[p.ResponseItem],
) -> p.TokenUsage:
    """Usage of a response whose server reported none (docs/session.md).

    Counts only what the response added to the previous total: the items recorded since the
    last model item (everything, plus the instructions, on the first response) and the output.
    """
    added = list(history.items_since_model())
    input_tokens = history.last_response_tokens + count_items(estimator, added)
    if history.last_response_tokens == 0:
        input_tokens += estimator.count(instructions)
    output_tokens = count_items(estimator, output)
    return p.TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def _ignore(msg: p.EventMsg) -> None:
    del msg


async def stream_response(
    session: SessionWriter, writer: Writer, prompt: Prompt, *, record: bool, report: bool
) -> SampleResult:
    """Stream one response, reporting deltas and items through ``writer`` as they come.

    With ``report`` off (a summarization request), no item, delta or token events are
    emitted, but the usage still counts towards the session total.

    An answer cut short is an outcome, not a failure: what arrived is recorded (tool calls
    aside, which may be cut) and :attr:`SampleResult.incomplete` says so. When the context
    window filled up during the answer, what arrived is recorded and
    :class:`~relay.ContextWindowExceeded` is raised.
    """
    emit = writer.emit if report else _ignore
    turn_id = writer.turn_id
    wiring = session.wiring
    output: list[p.ResponseItem] = []
    open_messages: dict[str, list[str]] = {}
    open_reasoning: dict[str, dict[int, str]] = {}
    usage: p.TokenUsage | None = None
    incomplete: str | None = None
    try:
        client = wiring.compact_model if prompt.purpose == "compact" else wiring.model
        async with client.stream(prompt) as events:
            async for event in events:
                match event:
                    case OutputTextDelta(item_id=item_id, delta=delta):
                        if item_id not in open_messages:
                            open_messages[item_id] = []
                            emit(p.ItemStarted(turn_id, p.AgentMessageItem(item_id, "")))
                        open_messages[item_id].append(delta)
                        emit(p.AgentMessageDelta(turn_id, item_id, delta))
                    case SummaryTextDelta(item_id=item_id, delta=delta, summary_index=part):
                        if item_id not in open_reasoning:
                            open_reasoning[item_id] = {}
                            emit(p.ItemStarted(turn_id, p.ReasoningItem(item_id, ())))
                        so_far = open_reasoning[item_id]
                        so_far[part] = so_far.get(part, "") + delta
                        emit(p.ReasoningSummaryDelta(turn_id, item_id, delta, part))
                    case OutputItemDone(item=item):
                        output.append(item)
                        if report:
                            _report_output_item(writer, item, open_messages, open_reasoning)
                        elif isinstance(item, p.Message):
                            open_messages.pop(item.id or "", None)
                    case Completed(usage=reported, incomplete=reason):
                        usage = reported
                        incomplete = reason
                    case _:
                        assert_never(event)
    except ModelError as error:
        # Items that were started must be completed (invariant 3), with what arrived.
        for item_id, parts in open_messages.items():
            emit(p.ItemCompleted(turn_id, p.AgentMessageItem(item_id, "".join(parts))))
        _end_reasoning(emit, turn_id, open_reasoning)
        if isinstance(error, ContextWindowExceeded) and error.prompt_tokens is not None:
            writer.calibrate(error.prompt_tokens, prompt_estimate(prompt, session.state.history))
        raise
    if usage is not None and prompt.purpose == "turn":
        # Not from a summarization request: its input was trimmed to what the server could
        # take, which says little of how the server counts the history itself.
        writer.calibrate(usage.input_tokens, prompt_estimate(prompt, session.state.history))
    window = wiring.context_window(prompt.model)
    incomplete = cut_reason(incomplete, usage, prompt.max_output_tokens)
    ran_out = window_ran_out(incomplete, usage, window)
    if incomplete is not None or ran_out:
        # What arrived is the answer; a message that streamed but never completed is kept as
        # it stands, a tool call that may be cut is not.
        for item_id, parts in list(open_messages.items()):
            message = p.assistant_message("".join(parts), id=item_id)
            output.append(message)
            if report:
                _report_output_item(writer, message, open_messages, open_reasoning)
        _end_reasoning(emit, turn_id, open_reasoning)
        output = [
            item for item in output if not isinstance(item, p.FunctionCall | p.CustomToolCall)
        ]
        incomplete = incomplete or CUT_AT_LIMIT
    if usage is None:
        estimator = await wiring.estimators.get()
        usage = estimate_usage(estimator, session.state.history, prompt.instructions, output)
    if record:
        for item in output:
            writer.record(item, from_model=True)
    writer.count_response(usage, recorded=record, report=report, window=window)
    if ran_out:
        raise ContextWindowExceeded(
            f"the context window ({window} tokens) filled up during the answer: "
            f"{usage.input_tokens} tokens of prompt, {usage.output_tokens} of answer",
            prompt_tokens=usage.total_tokens,
            context_window=window,
        )
    return SampleResult(tuple(output), usage, incomplete)


def prompt_estimate(prompt: Prompt, history: History) -> int:
    """The estimate of everything a request carries: instructions, tools and input (the
    history's cached estimates when the input is the history)."""
    if prompt.wire_input is not None and len(prompt.input) == len(history):
        items = history.estimated_tokens()
    else:
        items = items_tokens(prompt.input)
    return approx_tokens(prompt.instructions) + tools_tokens(prompt.tools) + items


def cut_reason(
    reported: str | None, usage: p.TokenUsage | None, max_output_tokens: int | None
) -> str | None:
    """Why an answer was cut short: what the server said, else ``max_output_tokens`` when it
    used the whole answer limit (llama-server reports such an answer as ``completed``)."""
    if reported is not None:
        return reported
    if max_output_tokens and usage is not None and usage.output_tokens >= max_output_tokens:
        return CUT_AT_LIMIT
    return None


def window_ran_out(incomplete: str | None, usage: p.TokenUsage | None, window: int | None) -> bool:
    """Whether the context window filled up while the answer was written.

    llama-server stops there and reports the answer as cut (``length``) or even as
    ``completed``; the one sign is a total that reaches the window. A server's own total is
    never above its window, so reaching it exactly says the same on a ``completed`` answer.
    """
    if usage is None or window is None or usage.total_tokens < window:
        return False
    return incomplete is not None or usage.total_tokens == window


def _end_reasoning(
    emit: Callable[[p.EventMsg], None], turn_id: str, open_reasoning: dict[str, dict[int, str]]
) -> None:
    """End the reasoning items a cut answer left open, with the summary as it streamed."""
    for item_id, parts in open_reasoning.items():
        summary = tuple(parts[index] for index in sorted(parts))
        emit(p.ItemCompleted(turn_id, p.ReasoningItem(item_id, summary)))
    open_reasoning.clear()


def _report_output_item(
    writer: Writer,
    item: p.ResponseItem,
    open_messages: dict[str, list[str]],
    open_reasoning: dict[str, dict[int, str]],
) -> None:
    turn_id = writer.turn_id
    match item:
        case p.Message(role="assistant"):
            item_id = item.id or writer.new_item_id("msg")
            if item_id not in open_messages:
                writer.emit(p.ItemStarted(turn_id, p.AgentMessageItem(item_id, "")))
            open_messages.pop(item_id, None)
            text = item.text()
            writer.emit(p.ItemCompleted(turn_id, p.AgentMessageItem(item_id, text)))
            writer.emit(p.AgentMessage(text))
        case p.Reasoning(summary=summary):
            reasoning = p.ReasoningItem(item.id, tuple(part.text for part in summary))
            if item.id not in open_reasoning:
                writer.emit(p.ItemStarted(turn_id, reasoning))
            open_reasoning.pop(item.id, None)
            writer.emit(p.ItemCompleted(turn_id, reasoning))
        case _:
            pass


# ----------------------------------------------------------------------------- requests


def estimate_context(view: TaskView, items: Sequence[p.ResponseItem]) -> int:
    """The calibrated estimate of a request over ``items`` with ``view``'s instructions and
    tools: what a server would count."""
    estimate = approx_tokens(view.instructions) + tools_tokens(view.tools) + items_tokens(items)
    return calibrated(estimate, view.budget.ratio)


def initial_context_items(
    wiring: Wiring,
    settings: TurnSettings,
    emit: Callable[[p.EventMsg], None],
    world: WorldState | None = None,
) -> list[p.ResponseItem]:
    """The full initial context for ``settings``' world, as recorded at a window start (a
    project document that cannot be read is reported through ``emit``)."""
    cwd = settings.cwd
    config = wiring.config
    return list(
        initial_context(
            world or wiring.world(cwd),
            developer_instructions=config.developer_instructions,
            project_doc=read_project_doc(
                cwd,
                config.project_doc,
                max_bytes=config.project_doc_max_bytes,
                warn=lambda text: emit(p.WarningEvent(text)),
            ),
            context_window=(
                wiring.context_window(settings.model) if config.features.token_budget else None
            ),
        )
    )


#: Bytes of the frame of the files read placed back, and of each file's heading: bounds.
READS_FRAME_BYTES, READ_HEADING_BYTES = 256, 16


def reads_bound(history: Sequence[p.ResponseItem]) -> int:
    """Tokens (estimate units) the files ``read_file`` read in ``history`` take at most when a
    compaction places them back, with those an earlier compaction placed back (0: none)."""
    calls = {
        item.call_id: item.arguments
        for item in history
        if isinstance(item, p.FunctionCall) and item.name == "read_file"
    }
    size = sum(
        len(calls[item.call_id].encode("utf-8"))
        + READ_HEADING_BYTES
        + len(item.output.encode("utf-8"))
        for item in history
        if isinstance(item, p.FunctionCallOutput) and item.call_id in calls
    )
    size += sum(_placed_before(item) for item in history)
    return tokens_for_bytes(READS_FRAME_BYTES + size) if size else 0


#: The messages a compaction places files back in (the record's, or their own), and where the
#: files begin in it.
_PLACED_IN, _READS_OPEN = ("<work_state>", "<recent_reads>"), "<recent_reads>\n"


def _placed_before(item: p.ResponseItem) -> int:
    """Bytes of the files an earlier compaction placed back in ``item`` (0: it placed none)."""
    if not (isinstance(item, p.Message) and item.role == "user"):
        return 0
    text = item.text()
    at = text.find(_READS_OPEN) if text.startswith(_PLACED_IN) else -1
    return len(text[at:].encode("utf-8")) if at >= 0 else 0


def placed_tokens(view: TaskView, budget: TokenBudget) -> int:
    """Tokens (estimate units) that what a compaction places beside the messages it keeps takes
    at most: the work-state record and the files read, each within its budget (a share of
    ``budget``'s window) and within what it holds."""
    config = view.config
    placed = 0
    if config.features.work_state or config.compaction.save_state:
        record = record_bound(view.work_state.entries)
        placed += min(budget.share(config.work_state_token_budget), record)
    if config.recent_reads_token_budget > 0:
        # The files read are counted as estimated, as the compaction places them.
        share = attrs.evolve(budget, ratio=1.0).share(config.recent_reads_token_budget)
        placed += min(share, reads_bound(view.history))
    return placed


#: What a message cut to fit takes besides the budget it was cut to, at most (estimate units):
#: the marker where its middle was, and the rounding of its two ends.
MESSAGE_CUT_TOKENS = 10


def room_after(
    view: TaskView,
    budget: TokenBudget,
    alongside: Sequence[p.ResponseItem],
    initial: Sequence[p.ResponseItem],
) -> int | None:
    """Tokens (as a server counts them) that the messages a compaction keeps may take.

    What is left of ``budget``'s window once the rest of the new context — ``alongside`` (the
    summary or compaction item), the ``initial`` context, the instructions and tools, the
    work-state record and the files read placed back (:func:`placed_tokens`) — and room for an
    answer are taken, and no more than keeps the context under the auto-compaction limit. None
    when the window is unknown.
    """
    room = budget.answer_room()
    if budget.window is None or room is None:
        return None
    ceiling = budget.window - room
    if budget.limit is not None:
        ceiling = min(ceiling, budget.limit)
    # The record and the files read are placed after the kept messages are chosen: keep
    # their room, as large as what they hold.
    ceiling -= calibrated(placed_tokens(view, budget), budget.ratio)
    room = ceiling - estimate_context(view, [*alongside, *initial])
    # The kept messages' budget counts their text: keep the room of their frames (and of a cut
    # one's marker) too, for as many as there are and could fit. A frame is counted as
    # estimated: a server reads a message's frame as a few tokens of its template, whatever
    # its ratio to the estimate for the text.
    frame = items_tokens([p.user_message("")]) + MESSAGE_CUT_TOKENS
    kept = min(len(real_user_messages(view.history)), max(0, room) // (frame + 1))
    return room - kept * frame


async def sample(
    session: SessionWriter,
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
    wiring = session.wiring
    provider = wiring.compact_provider if prompt.purpose == "compact" else wiring.provider
    limit = provider.stream_max_retries if max_retries is None else max_retries
    if prompt.tools:
        # A change of the tools (an MCP server's new list) is reported with the request
        # that first offers it.
        for notice in wiring.tools.take_notices():
            writer.emit(p.WarningEvent(notice))

    def reconnecting(attempt: int, error: ModelError) -> None:
        detail = error.message
        if error.retry_after is not None:
            # The wait the server asked for (capped by the wire): say it, it can be long.
            detail = f"{detail}; retrying in {max(0.0, error.retry_after):g} s"
        writer.emit(p.StreamErrorEvent(reconnecting_message(attempt, limit), detail))

    result = await with_retries(
        lambda: stream_response(session, writer, prompt, record=record, report=report),
        max_retries=limit,
        rng=wiring.rng,
        before_retry=reconnecting,
    )
    if report and prompt.purpose == "turn":
        fell = wiring.prompt_cache.observe(prompt, result.usage, session.state.window_number)
        if fell is not None:
            writer.emit(p.BackgroundEvent(fell))
    return result


async def remote_compact(wiring: Wiring, request: CompactRequest) -> Any:
    """``POST /responses/compact`` with retries: transport failures, 5xx and rate limits are
    retried up to the provider's ``request_max_retries``, after the server's retry-after or the
    same jittered backoff as sampling."""
    return await with_retries(
        lambda: wiring.model.compact(request),
        max_retries=wiring.provider.request_max_retries,
        rng=wiring.rng,
    )
