"""Checks of a session's history and rollout, shared by the reliability tests.

These complement :func:`tests.invariants.check_event_invariants` (docs/reliability.md
and 5) with what the event stream cannot show: the shape of the history, the shape of every
installed compaction, and the rollout reconstructing the live session (invariants 4 and 6).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import relay
from relay._base._rollout_lines import Compacted
from relay._core._history import is_contextual
from relay._core._summary import is_summary
from relay._rollout._lines import CompactedLine, Rollout
from relay._rollout._reader import read_rollout
from relay._rollout._resume import reconstruct
from relay.tasks.compaction import Backend
from relay.tasks.compaction._history import WORK_STATE_MARKER

CALLS = (relay.FunctionCall, relay.CustomToolCall)
OUTPUTS = (relay.FunctionCallOutput, relay.CustomToolCallOutput)


def check_well_formed(items: Sequence[relay.ResponseItem], *, settled: bool) -> None:
    """Every call has exactly one output, after it; no output lacks an earlier call.

    ``settled``: no task runs, so every call must be answered. While a turn runs, only the
    calls of its last response may still wait for their output.
    """
    calls: dict[str, int] = {}
    answered: set[str] = set()
    last_input = -1
    for index, item in enumerate(items):
        if isinstance(item, CALLS):
            assert item.call_id not in calls, f"call id {item.call_id} used twice: {items}"
            calls[item.call_id] = index
        elif isinstance(item, OUTPUTS):
            assert item.call_id in calls, f"output {item.call_id} without an earlier call"
            assert item.call_id not in answered, f"call {item.call_id} answered twice"
            answered.add(item.call_id)
        elif not (isinstance(item, relay.Message) and item.role == "assistant"):
            last_input = index
    waiting = set(calls) - answered
    if settled:
        assert not waiting, f"calls without an output in a settled history: {sorted(waiting)}"
    else:
        early = [call_id for call_id in waiting if calls[call_id] < last_input]
        assert not early, f"calls left without an output before later input: {early}"


def expected_backend(config: relay.Config) -> Backend:
    """The backend docs/compaction.md selects, written out apart from the runtime's function."""
    provider = config.provider()
    if config.features.token_budget:
        return Backend.TOKEN_BUDGET
    if provider.remote_compaction == "v2" and config.features.remote_compaction_v2:
        return Backend.REMOTE_V2
    if provider.remote_compaction in ("v1", "v2"):
        return Backend.REMOTE_V1
    return Backend.LOCAL


def check_compacted_part(
    items: Sequence[relay.ResponseItem],
    backend: str,
    said: Collection[str] = (),
    *,
    refused: bool = False,
) -> None:
    """The history a compaction installed ends as its backend promises (docs/compaction.md).

    When the model's summary was ``refused``, the work-state record, where one was placed,
    stands last in its place, and no summary is installed beside it.

    ``said`` holds the texts the user sent: a fresh window may hold one of them, verbatim (the
    latest user message, which every compaction keeps).
    """
    if backend == Backend.TOKEN_BUDGET:
        # A fresh window: the initial context and developer messages, and at most the latest
        # user message.
        kept = []
        for item in items:
            assert isinstance(item, relay.Message), f"token budget window holds {item!r}"
            if item.role == "user" and item.text() in said:
                kept.append(item.text())
                continue
            assert item.role == "developer" or is_contextual(item), f"not context: {item!r}"
        assert len(kept) <= 1, f"a fresh window holds more than the latest message: {kept}"
        return
    last = items[-1] if items else None
    if backend == Backend.LOCAL and refused and not any(is_summary(i) for i in items):
        assert isinstance(last, relay.Message) and last.text().startswith(WORK_STATE_MARKER), (
            f"a refused summary, and no record last: {last!r}"
        )
    elif backend == Backend.LOCAL:
        assert last is not None and is_summary(last), f"summary not last: {last!r}"
    elif backend == Backend.REMOTE_V2 or any(isinstance(item, relay.Compaction) for item in items):
        # V1 installs what the server answered, filtered: an answer without a compaction
        # item (even an empty one) is valid, and then nothing has to be last.
        assert isinstance(last, relay.Compaction), f"the compaction item is not last: {last!r}"
    for item in items:
        assert not isinstance(item, (*CALLS, *OUTPUTS)), f"a tool item survived: {item!r}"


def compacted_lines(rollout: Rollout) -> list[Compacted]:
    """The payloads of the ``compacted`` lines of a rollout, in order."""
    return [line.compacted for line in rollout.lines if isinstance(line, CompactedLine)]


def check_rollout_matches(session: relay.Session, path: Path) -> Rollout:
    """The rollout reads without notes and reconstructs exactly the live session (docs/rollout.md).

    Returns the parsed rollout for further checks.
    """
    rollout = read_rollout(path)
    assert not rollout.notes, [str(note) for note in rollout.notes]
    state = reconstruct(rollout)
    assert list(state.history) == list(session.history.items), "rollout history differs"
    assert state.window_number == session.snapshot().window_number
    assert state.window_id in (None, session.snapshot().window_id)
    assert state.reference_world == session.snapshot().reference_world
    restored = state.last_response_tokens + state.tokens_since_model
    assert restored == session.history.usage_tokens, (
        f"usage restored as {restored}, live {session.history.usage_tokens}"
    )
    resumed = reconstruct(read_rollout(path, for_resume=True))
    assert resumed == state, "reading for resume gives another state"
    return rollout
