"""The regular turn's steps, composed from the task port's primitives (docs/tasks.md).

Theory of operation. :class:`TurnSteps` holds one turn's progress, so the port does not. Its
compaction points are explicit calls:

- :meth:`TurnSteps.begin`: the pre-turn point (a compaction when one is due, or a model
  downshift), then the initial context (or what changed since the reference context), then the
  user's input. The input is recorded even when that compaction fails or is stopped; the turn
  then ends (:class:`~relay.lowlevel.StopTurn`).
- :meth:`TurnSteps.step`: before a follow-up request (one after an earlier step), the mid-turn
  point: a compaction when usage reached the limit, masking when it reached
  ``mask_trigger_tokens``. Steered input is then recorded, except right after a compaction at
  the limit that followed tool calls: the next request answers the tool outputs first. The
  request is the history with the session's tools; the answer is recorded and reported, and a
  final answer is noted in the work-state record.
- :meth:`TurnSteps.run`: the whole regular turn; after the final answer, the post-turn point.

A turn that asks for structured output (``output_schema``) asks for it in every request it
sends, and reads its final answer (the answer without tool calls that ends it) as JSON that
must fit the schema: an answer that does not is :func:`~relay.lowlevel.read_output`'s
``invalid_output`` error, and the turn ends without its post-turn point. The check runs in a
worker thread, in bounded work, so that the loop goes on serving other sessions and signals
meanwhile. An answer that calls tools is not read: the schema is for the answer the turn
ends with.

Every input the turn records, the first and each steered one, goes through ``prepare`` first:
a task that must change what the user sent (redaction, say) changes it there, and nothing
reaches the history or the model without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

import relay
from relay.lowlevel import (
    CompactionOutcome,
    CompactionRequest,
    Injection,
    SampleResult,
    StopTurn,
    WorkEntry,
    read_output,
)

from ._guard import LoopGuard, loop_message, loop_warning, step_limit_message
from .compaction._policy import limit_reached
from .compaction._summary_check import copied_prompt, written_tool_call

#: The name of the tool a model calls to ask for a fresh window (``features.token_budget``).
NEW_CONTEXT_WINDOW = "new_context_window"

#: The longest answer the record keeps whole, in characters; a longer one keeps its end, where
#: an answer states what it concluded.
ANSWER_CHARS = 600

Prepare = Callable[[Sequence[relay.InputItem]], Sequence[relay.InputItem]]
"""What every input of the turn goes through before it is recorded."""


def _as_given(items: Sequence[relay.InputItem]) -> Sequence[relay.InputItem]:
    return items


#: An answer of at least this many words whose word triples are mostly repeats is a model
#: running in a loop until its answer limit, not an answer.
REPEATED_WORDS = 24


#: The share of an answer's words that, found in runs of the user's messages, make it an
#: echo of them rather than an answer.
ECHO_SHARE = 0.9

#: How much of the latest messages in the user's role (characters, newest kept) an answer is
#: compared with.
ECHO_SCAN = 50_000


def repeats_itself(words: Sequence[str]) -> bool:
    """Whether ``words`` go round in a loop: fewer than a quarter of their triples differ."""
    if len(words) < REPEATED_WORDS:
        return False
    triples = list(zip(words, words[1:], words[2:], strict=False))
    return len(set(triples)) * 4 < len(triples)


def latest_asked(history: Sequence[relay.ResponseItem]) -> str:
    """The latest :data:`ECHO_SCAN` characters of the messages in the user's role, oldest
    first: read from the end, so a long history costs no more than its tail."""
    texts: list[str] = []
    size = 0
    for item in reversed(history):
        if isinstance(item, relay.Message) and item.role == "user":
            texts.append(item.text())
            size += len(texts[-1]) + 1
            if size >= ECHO_SCAN:
                break
    return "\n".join(reversed(texts))[-ECHO_SCAN:]


def latest_answer(text: str, asked: str = "") -> WorkEntry | None:
    """The model's latest answer to the user (one entry, replaced by the next): what it last
    concluded or decided, in its own words. A tool call written as text, words that go round
    in a loop, or the user's own words back (``asked``: the messages in the user's role, which
    a compaction places again anyway) are no answer: None, and the record keeps the answer
    before."""
    words = text.split()
    flat = " ".join(words)
    if not flat or repeats_itself(words) or written_tool_call(text):
        return None
    if asked and copied_prompt(text, asked, share=ECHO_SHARE):
        return None
    if len(flat) > ANSWER_CHARS:
        flat = "…" + flat[-(ANSWER_CHARS - 1) :]
    return WorkEntry("answer", flat, key="latest")


def cut_answer_warning(limit: int | None) -> str:
    """The warning of an answer cut at the answer limit (``limit``, when relay sent one)."""
    where = f"the answer limit ({limit} tokens)" if limit else "the model server's answer limit"
    return (
        f"The answer was cut off at {where}. What arrived is kept and the turn ends here; "
        "ask for a shorter answer, or raise model_max_output_tokens."
    )


@attrs.define
class TurnSteps:
    """A regular turn's steps over a task's port, with the turn's progress.

    Example, a task that redacts what the user sends, the first input and steered input
    alike, and is otherwise a regular turn::

        @attrs.frozen
        class Redacting(relay.SessionTask):
            items: Sequence[relay.InputItem]

            kind = "user_turn"
            steerable = True

            async def run(self, ctx: relay.TaskContext) -> str | None:
                return await relay.tasks.TurnSteps(ctx, prepare=redact).run(self.items)
    """

    ctx: relay.TaskContext
    """The task's port."""
    prepare: Prepare = _as_given
    """What every input goes through before it is recorded (default: nothing changes)."""
    output_schema: Mapping[str, Any] | None = None
    """The JSON Schema every request asks its answer to fit, and the final answer must fit
    (None: the turn asks for text)."""
    guard: LoopGuard = attrs.field(
        default=attrs.Factory(
            lambda self: LoopGuard(
                self.ctx.view.config.max_steps_per_turn,
                self.ctx.view.config.max_identical_tool_calls,
            ),
            takes_self=True,
        )
    )
    """The bound on the turn's steps and the watch for identical tool calls."""
    context_recorded: bool = False
    """Whether the initial context (or what changed) is recorded."""
    stepped: bool = False
    """Whether a model request was sent."""
    called_tools: bool = False
    """Whether the last answer called tools."""
    compacted: bool = False
    """Whether a compaction point was reached since the last step."""

    async def compact(self, request: CompactionRequest) -> CompactionOutcome:
        """Reach a compaction point (:meth:`relay.TaskContext.compact`)."""
        outcome = await self.ctx.compact(request)
        self.compacted = True
        return outcome

    def record_context(self) -> None:
        """Record the initial context, or what changed since the reference context (once)."""
        if not self.context_recorded:
            self.context_recorded = True
            self.ctx.record_context()

    async def begin(self, items: Sequence[relay.InputItem]) -> None:
        """Start the turn: the pre-turn compaction point, the initial context, the input."""
        stop: StopTurn | None = None
        try:
            await self.compact(CompactionRequest(relay.CompactionTrigger.PRE_TURN))
        except StopTurn as stopped:
            stop = stopped
        self.record_context()
        await self.ctx.record_input(self.prepare(items))
        if stop is not None:
            raise stop

    async def step(self) -> SampleResult:
        """One model request of the turn, with the mid-turn compaction point before it and
        the steered input (see the module's theory)."""
        ctx = self.ctx
        self._check_limits()
        take_input = True
        if self.stepped and not self.compacted:
            over = limit_reached(ctx.view)
            outcome = await self.compact(
                CompactionRequest(
                    relay.CompactionTrigger.MID_TURN, Injection.BEFORE_LAST_USER_MESSAGE
                )
            )
            if over and outcome is not CompactionOutcome.DEFERRED:
                take_input = not self.called_tools
        if not self.context_recorded:
            await self.compact(CompactionRequest(relay.CompactionTrigger.PRE_TURN))
            self.record_context()
        if take_input:
            for items in ctx.take_input():
                await ctx.record_input(self.prepare(items))
        self.stepped = True
        self.compacted = False
        result = await ctx.sample(ctx.view.prompt(output_schema=self.output_schema))
        self.called_tools = bool(result.tool_calls)
        if not result.tool_calls and result.last_agent_message:
            answer = latest_answer(result.last_agent_message, latest_asked(ctx.view.history))
            if answer is not None:
                ctx.note(answer)
        return result

    async def run_tool(self, call: relay.ToolCall) -> str:
        """Run a tool call of the model (:meth:`relay.TaskContext.run_tool`), watching for a
        run of identical calls."""
        output = await self.ctx.run_tool(call)
        arguments = call.arguments if isinstance(call, relay.FunctionCall) else call.input
        if self.guard.note_call(call.name, arguments, output) == "warn":
            self.ctx.emit(relay.WarningEvent(loop_warning(call.name, self.guard.run)))
        return output

    async def run(self, items: Sequence[relay.InputItem]) -> relay.TurnResult | None:
        """The whole regular turn: record ``items``, then sample and run tools until the model
        is done; the post-turn compaction point after the final answer. Returns the
        structured output when the turn asks for one (see the module's theory).

        Raises:
            relay.ModelError: a request failed, or (``invalid_output``) the final answer is
                not the structured output asked for.
        """
        ctx = self.ctx
        await self.begin(items)
        token_budget = ctx.view.config.features.token_budget
        while True:
            result = await self.step()
            if result.incomplete is not None:
                ctx.emit(relay.WarningEvent(cut_answer_warning(ctx.view.budget.max_output_tokens)))
                return await self.final(result)
            calls = result.tool_calls
            for call in calls:
                await self.run_tool(call)
            if token_budget and any(call.name == NEW_CONTEXT_WINDOW for call in calls):
                trigger = relay.CompactionTrigger.MODEL_REQUESTED
                await self.compact(CompactionRequest(trigger, Injection.BEFORE_LAST_USER_MESSAGE))
                continue
            if not calls and not ctx.view.steered:
                final = await self.final(result)
                await self.compact(CompactionRequest(relay.CompactionTrigger.POST_TURN))
                return final

    async def final(self, result: SampleResult) -> relay.TurnResult | None:
        """The turn's result from its final answer: its structured output, read and checked
        in a worker thread (:func:`~relay.lowlevel.read_output`), when the turn asks for one;
        None otherwise (the turn's last message is its result).

        Raises:
            relay.ModelError: ``invalid_output``, the answer does not fit.
        """
        if self.output_schema is None:
            return None
        message = result.last_agent_message
        return relay.TurnResult(message, await read_output(message, self.output_schema))

    def _check_limits(self) -> None:
        """End the turn before a step it may not take."""
        guard = self.guard
        if guard.looping and guard.last is not None:
            message = loop_message(guard.last[0], guard.run)
            self.ctx.emit(relay.ErrorEvent(message, relay.ErrorCode.TOOL_LOOP))
            raise StopTurn()
        if not guard.step_allowed():
            message = step_limit_message(guard.max_steps)
            self.ctx.emit(relay.ErrorEvent(message, relay.ErrorCode.STEP_LIMIT))
            raise StopTurn()


def keep_steered(ctx: relay.TaskContext, prepare: Prepare = _as_given) -> None:
    """Record steered input the turn never picked up, as it stands (an aborted turn keeps
    it in the history)."""
    for items in ctx.take_input():
        ctx.record(relay.user_message_of(prepare(items)))


__all__ = [
    "ANSWER_CHARS",
    "ECHO_SCAN",
    "ECHO_SHARE",
    "NEW_CONTEXT_WINDOW",
    "Prepare",
    "TurnSteps",
    "cut_answer_warning",
    "keep_steered",
    "latest_answer",
    "latest_asked",
]
