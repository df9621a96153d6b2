"""Resuming a session from its rollout (docs/rollout.md, docs/reliability.md).

:func:`reconstruct` is a pure function from parsed rollout lines to the
:class:`~relay._core._state.ResumedState` a session continues from; :func:`resume_session` reads
the file, reconstructs, and opens a session that appends to the same file.

Theory of operation. The live session writes, in order: every item it records
(``response_item``), every installed compaction (``compacted`` with the new history, then
``world_state``, then ``turn_context`` only when the compaction kept the reference context),
and at the start of each turn the initial context or its changes followed by ``turn_context``.
Replaying those lines in order therefore rebuilds what the session had:

- history: the newest ``compacted`` that carries a replacement history is the base (nothing
  before it can matter, since it replaced everything); later ``response_item`` lines are
  appended and later ``compacted`` lines replace the history. An old-style ``compacted``
  (no replacement history) is rebuilt as the local backend builds one: the real user messages
  so far within the 20,000-token budget, the ghost snapshots, then the summary message.
- reference context: the ``world`` of the latest ``turn_context``, unless a ``compacted`` came
  after it: every compaction clears it, and a compaction that kept it is always followed by
  its own ``turn_context``.
- defaults (model, cwd, effort): the latest ``turn_context``.
- window: the fields of the last ``compacted`` line.
- token usage, kept by a :class:`~relay._core._history.History` as live: a compaction resets it to
  the estimate of the new history; an item the model generated resets the estimate of items
  since the model; a response's ``token_count`` sets ``last_response_tokens``, and so does
  the one that shows the window full before a ``context_window_exceeded`` error (the live
  session counts the history as full then, so that the next turn compacts first). The
  ``token_count`` a compaction's installation emits (no item between the ``compacted`` line
  and it) does not change the live history's usage, so it does not change the restored one.
  Total usage is that of the last ``token_count``.
- token ratio (server tokens per estimated token, what the session learned of how its server
  counts): that of the last ``ids`` line, written with every turn's end, so that a session
  run one process per turn scales its estimates as one process does.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from typing import assert_never

import attrs

from .._base import _protocol as p
from .._base._config import Config, resolve_api_key
from .._base._errors import ConfigError, RolloutError
from .._base._exec_rules import ExecRules
from .._base._rollout_lines import ApprovalDecided, Compacted, TurnSettings, WorldState
from .._base._tokens import MAX_TOKEN_RATIO
from .._core._history import History, missing_outputs
from .._core._state import ResumedState
from .._core._summary import (
    build_compacted_history,
    ghost_snapshots,
    real_user_messages,
    summary_prefix,
)
from .._core._work_state import WorkEntry, WorkState
from ._filter import LINKED_RUNS, generated_number
from ._lines import (
    ApprovalLine,
    CompactedLine,
    EventMsgLine,
    IdsLine,
    IntentLine,
    OpLine,
    ResponseItemLine,
    Rollout,
    RolloutLine,
    RolloutNote,
    RulesLine,
    SessionMetaLine,
    TraceLine,
    TurnContextLine,
    WorldStateLine,
)

#: The event id of the warnings a resumed session reports about its rollout.
RESUME_EVENT_ID = "resume"


def rebuild_compacted_history(
    history: Sequence[p.ResponseItem], message: str
) -> list[p.ResponseItem]:
    """The history an old-style ``compacted`` line stands for (it has no replacement).

    Built as the local backend builds one from ``history`` (the history before the
    compaction): its real user messages within the local budget, its ghost snapshots, then
    the summary message, whose text is ``message`` (given the summary prefix if it lacks it).
    """
    prefix = summary_prefix() + "\n"
    summary = message[len(prefix) :] if message.startswith(prefix) else message
    return build_compacted_history(
        real_user_messages(history), summary, ghosts=ghost_snapshots(history)
    )


def is_model_output(item: p.ResponseItem) -> bool:
    """Whether ``item`` is of a kind only a model response records.

    The harness records user, developer and system messages, tool outputs and snapshots;
    everything else in a history came from a model.
    """
    match item:
        case p.Message(role=role):
            return role == "assistant"
        case p.FunctionCallOutput() | p.CustomToolCallOutput() | p.GhostSnapshot():
            return False
        case _:
            return True


@attrs.define
class _Replay:
    """The state being rebuilt, line by line (mutable, private to :func:`reconstruct`).

    Usage is kept by a :class:`~relay._core._history.History`, as the live session keeps it; it
    estimates only the items a count needs (those after the last model item).
    """

    history: History = attrs.field(factory=History)
    reference_world: WorldState | None = None
    # True between a ``compacted`` line and the first item after it: a ``token_count`` seen
    # then is the installation's, not a response's.
    installing: bool = False

    def replace(self, items: Iterable[p.ResponseItem]) -> None:
        self.history.replace(items)
        self.reference_world = None
        self.installing = True

    def record(self, item: p.ResponseItem) -> None:
        self.history.record(item, from_model=is_model_output(item))
        self.installing = False

    def compacted(self, compacted: Compacted) -> None:
        if compacted.replacement_history is not None:
            self.replace(compacted.replacement_history)
        else:
            self.replace(rebuild_compacted_history(self.history.items, compacted.message))


def _newest_base(lines: Sequence[RolloutLine]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if isinstance(line, CompactedLine) and line.compacted.replacement_history is not None:
            return index
    return None


def reconstruct(rollout: Rollout) -> ResumedState:
    """The state a session resumes from: a pure function of the parsed rollout.

    Raises:
        RolloutError: the rollout has no ``session_meta`` line (the session is unknown).
    """
    if rollout.meta is None:
        raise RolloutError(
            f"{rollout.name}: cannot resume: the rollout does not start with a session_meta "
            "line, so the session it belongs to is unknown"
        )
    lines = rollout.lines
    replay = _Replay()
    base = _newest_base(lines)
    start = 0
    if base is not None:
        base_line = lines[base]
        assert isinstance(base_line, CompactedLine)
        replay.compacted(base_line.compacted)
        start = base + 1
    for line in lines[start:]:
        match line:
            case ResponseItemLine(item=item):
                replay.record(item)
            case CompactedLine(compacted=compacted):
                replay.compacted(compacted)
            case TurnContextLine(context=context):
                replay.reference_world = context.world
            case EventMsgLine(msg=p.TokenCount(info=p.TokenUsageInfo() as info)):
                if replay.installing:
                    replay.installing = False
                else:
                    replay.history.response_completed(info.last_token_usage.total_tokens)
            case (
                SessionMetaLine()
                | EventMsgLine()
                | WorldStateLine()
                | IdsLine()
                | OpLine()
                | TraceLine()
                | ApprovalLine()
                | RulesLine()
                | IntentLine()
            ):
                pass
            case _:
                assert_never(line)

    defaults: TurnSettings | None = None
    model: str | None = rollout.meta.model
    provider: str | None = rollout.meta.model_provider
    submissions = items = 0
    token_ratio = 1.0
    total_usage = p.TokenUsage()
    window_number = 0
    first_window_id: str | None = None
    previous_window_id: str | None = None
    window_id: str | None = None
    op_types: dict[str, None] = {}
    spans: list[tuple[str, str]] = []
    grants: list[ApprovalDecided] = []
    rules: ExecRules | None = None
    intents: set[str] = set()
    agent_events: list[p.SubAgentSpawned | p.SubAgentEnded] = []
    for line in lines:
        match line:
            case EventMsgLine(msg=p.SubAgentSpawned() | p.SubAgentEnded() as agent_event):
                agent_events.append(agent_event)
            case ApprovalLine(decided=decided):
                if decided.decision is p.ReviewDecision.APPROVED_FOR_SESSION:
                    grants.append(decided)
            case RulesLine(rules=recorded):
                rules = recorded
            case IntentLine(intent=intent):
                intents.add(intent.call_id)
            case OpLine(started=started):
                op_types[started.op.type] = None
            case TraceLine(span=span):
                spans.append((span.trace_id, span.span_id))
            case TurnContextLine(context=context):
                defaults = context.settings
                model = context.model
            case EventMsgLine(msg=p.SessionConfigured() as configured):
                model, provider = configured.model, configured.model_provider
            case EventMsgLine(msg=p.TurnStarted(turn_id=turn_id)):
                # Files written before ``ids`` lines existed still name their turns.
                submissions = max(submissions, generated_number(turn_id, "sub"))
            case IdsLine(ids=ids):
                submissions = max(submissions, ids.submission)
                items = max(items, ids.item)
                # Each ``ids`` line carries the ratio as it stood: the last one holds.
                token_ratio = restored_ratio(ids.token_ratio)
            case EventMsgLine(msg=p.TokenCount(info=p.TokenUsageInfo() as info)):
                total_usage = info.total_token_usage
            case CompactedLine(compacted=compacted):
                # An old-style line has no window fields: count it and start an unnamed window.
                window_number = (
                    compacted.window_number
                    if compacted.window_number is not None
                    else window_number + 1
                )
                first_window_id = compacted.first_window_id or first_window_id
                previous_window_id = compacted.previous_window_id or window_id
                window_id = compacted.window_id
            case _:
                pass

    history = replay.history
    record, outputs = restore_work_record(lines)
    return ResumedState(
        session_id=rollout.meta.id,
        rollout_path=rollout.path,
        history=tuple(history.items),
        reference_world=replay.reference_world,
        defaults=defaults,
        window_number=window_number,
        first_window_id=first_window_id,
        previous_window_id=previous_window_id,
        window_id=window_id,
        last_response_tokens=history.last_response_tokens,
        token_ratio=token_ratio,
        tokens_since_model=history.tokens_since_model,
        items_since_model=len(history.items_since_model()),
        total_usage=total_usage,
        work_state=record,
        outputs=outputs,
        model=model,
        model_provider=provider,
        submissions=submissions,
        items=items,
        spans=tuple(spans[-LINKED_RUNS:]),
        op_types=tuple(op_types),
        grants=tuple(grants),
        rules=rules,
        unanswered=tuple(unanswered_calls(history.items, intents)),
        agent_events=tuple(agent_events),
    )


def restored_ratio(recorded: float | None) -> float:
    """The token ratio a resumed session starts from, given the one its last ``ids`` line
    recorded: 1.0 when none was (an estimate taken as it is), else the recorded one held to
    what calibration itself believes (from 1 to :data:`~relay._base._tokens.MAX_TOKEN_RATIO`;
    a value that is not a number, from a damaged file, counts as none)."""
    if recorded is None or not math.isfinite(recorded):
        return 1.0
    return min(MAX_TOKEN_RATIO, max(1.0, recorded))


#: The output a resume records for a call that was running when its session stopped.
INTERRUPTED_OUTPUT = (
    "interrupted: the session stopped while this call ran; its output is unknown, and it was "
    "not run again"
)


def interrupted_call(call_id: str) -> str:
    """The warning a resume gives about a call that was running when the session stopped."""
    return (
        f"the call {call_id} was running when the session stopped: it is interrupted, its "
        "output unknown, and it is not run again"
    )


def unanswered_calls(
    items: Sequence[p.ResponseItem], intents: Collection[str]
) -> list[p.ToolOutput]:
    """The outputs a resume records for the calls in ``items`` that have none: a call whose
    intent was recorded was running (``interrupted``, its output unknown); any other never
    ran (``aborted``: it waited for its decision, or for its turn to reach it)."""
    return [
        attrs.evolve(output, output=INTERRUPTED_OUTPUT) if output.call_id in intents else output
        for output in missing_outputs(items)
    ]


def restore_work_record(lines: Iterable[RolloutLine]) -> tuple[WorkState, dict[str, str]]:
    """The work-state record and the originals of the masked tool outputs, as of the last line.

    The record is the snapshot of the newest ``compacted`` line that carries one, with every
    ``work_state_noted`` event after it applied. The outputs are the originals every masking
    compaction wrote (an output is masked once: the first original of a call id stays).
    """
    record = WorkState()
    outputs: dict[str, str] = {}
    for line in lines:
        match line:
            case CompactedLine(compacted=Compacted(work_state=snapshot, masked_outputs=masked)):
                if snapshot is not None:
                    record = WorkState.from_json(snapshot)
                for call_id, output in masked.items():
                    outputs.setdefault(call_id, output)
            case EventMsgLine(msg=p.WorkStateNoted(kind=kind, text=text, key=key)):
                if kind == "pinned":
                    record.pin(text)
                elif kind == "unpinned":
                    record.unpin(text)
                else:
                    record.add(WorkEntry(kind, text, key))
            case _:
                pass
    return record, outputs


def resumed_config(
    config: Config,
    state: ResumedState,
    *,
    chosen: Collection[str] = (),
    api_key: str | None = None,
) -> Config:
    """``config`` with the model and provider the resumed session recorded.

    ``chosen`` names the keys (``model``, ``model_provider``) the caller chose on purpose;
    those are kept. A recorded provider is checked as the session would build it, so a
    rollout that cannot go on as it was recorded fails here, naming the provider, instead of
    going on with another model. ``api_key``, a key passed by value, stands for the one the
    provider's variable would hold.

    Raises:
        ConfigError: the recorded provider is not defined by ``config``, or its API key is
            missing.
    """
    model = state.model if "model" not in chosen and state.model is not None else config.model
    name = state.model_provider if "model_provider" not in chosen else None
    if name is None:
        return attrs.evolve(config, model=model)
    resumed = attrs.evolve(config, model=model, model_provider=name)
    try:
        resolve_api_key(resumed.provider(), api_key)
    except ConfigError as exc:
        raise ConfigError(
            f"the session was recorded with model_provider {name!r}, which cannot be used "
            f"now: {exc}; set it up, or choose another provider (relay resume: "
            "-c model_provider=NAME or --config FILE; resume_session: a Config)"
        ) from exc
    return resumed


def describe_note(rollout: Rollout, note: RolloutNote) -> str:
    """A note as one message: ``<file> line N: ...``."""
    return f"{rollout.name} {note}"


__all__ = [
    "RESUME_EVENT_ID",
    "describe_note",
    "is_model_output",
    "rebuild_compacted_history",
    "generated_number",
    "reconstruct",
    "restore_work_record",
    "resumed_config",
]
