"""A compaction backend from outside relay's packages, given to a session through its compactor.

Adding a backend needs no change to relay: it implements the backend protocol and goes beside
relay's backends in a compactor whose policy function chooses it.
"""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._core._summary import is_real_user_message
from relay.tasks.compaction import (
    BACKENDS,
    Compactor,
    select_backend,
)

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


@attrs.frozen
class KeepTail:
    """Keeps the last user message and the last answer; asks no model."""

    fail_with: relay.ModelError | relay.lowlevel.CompactionFailed | None = None
    name: str = "keep_tail"
    error_prefix: str = "keep_tail could not compact: "

    async def compact(
        self, ctx: relay.lowlevel.BackendContext, request: relay.lowlevel.CompactionRequest
    ) -> relay.lowlevel.BackendResult:
        if self.fail_with is not None:
            raise self.fail_with
        messages = [item for item in ctx.view.history if isinstance(item, relay.Message)]
        users = [m for m in messages if m.role == "user" and is_real_user_message(m)]
        answers = [m for m in messages if m.role == "assistant"]
        return relay.lowlevel.BackendResult([users[-1], answers[-1]])


def choosing(backend: KeepTail, *, when: bool = True) -> Compactor:
    """relay's compactor with ``backend`` beside relay's backends, chosen ``when`` asked to."""

    def select(config: relay.Config, provider: relay.ProviderConfig) -> str:
        return backend.name if when else select_backend(config, provider)

    return Compactor(backends={**BACKENDS, backend.name: backend}, select=select)


async def compact_after_two_turns(backend: KeepTail, *, when: bool = True) -> testing.TestSession:
    script = {"responses": [{"text": "first answer"}, {"text": "second answer"}]}
    config = relay.Config(
        compaction=relay.CompactionSettings(placement="codex"), rollout=NO_ROLLOUT
    )
    compactor = lambda: choosing(backend, when=when)  # noqa: E731
    async with testing.open_test_session(script, config=config, compactor=compactor) as t:
        for text in ("one", "two"):
            await t.turn(text)
            await t.wait_for(relay.TurnComplete, 1 if text == "one" else 2)
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(testing.turn_ended, 3)
    return t


async def test_a_fifth_backend_compacts_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = await compact_after_two_turns(KeepTail())
    items = t.session.history.items
    assert all(isinstance(m, relay.Message) for m in items)
    *kept, (role, record) = [(m.role, m.text()) for m in items if isinstance(m, relay.Message)]
    assert kept == [("user", "two"), ("assistant", "second answer")]
    # The shared flow places the work-state record after the backend's history, whatever the
    # backend.
    assert role == "user" and record.startswith("<work_state>")
    assert "- second answer" in record
    (completed,) = [
        m
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert completed.item.receipt is not None
    assert completed.item.receipt.backend == "keep_tail"
    assert t.recorder.types("c1") == [
        "turn_started",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "turn_complete",
    ]
    assert len(t.model.requests) == 2  # no summarization request


async def test_a_policy_that_does_not_choose_a_fifth_backend_leaves_relays_choice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = await compact_after_two_turns(KeepTail(), when=False)
    (completed,) = [
        m
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert completed.item.receipt is not None
    assert completed.item.receipt.backend == "local"


@pytest.mark.parametrize("kind", [relay.ModelError, relay.lowlevel.CompactionFailed])
async def test_a_failure_of_a_fifth_backend_is_reported_with_its_prefix_once(
    autojump_clock: trio.testing.MockClock,
    kind: type[relay.ModelError] | type[relay.lowlevel.CompactionFailed],
) -> None:
    """A backend's failures leave its ``error_prefix`` out; the compaction adds it, once, to a
    ``ModelError`` and a ``CompactionFailed`` alike (the rule of ``_base/_errors.py``)."""
    failure = kind("the quota is spent", relay.ErrorCode.SERVER_ERROR)
    t = await compact_after_two_turns(KeepTail(fail_with=failure))
    errors = [
        e.msg for e in t.recorder.events if e.id == "c1" and isinstance(e.msg, relay.ErrorEvent)
    ]
    assert errors == [
        relay.ErrorEvent(
            "keep_tail could not compact: the quota is spent", relay.ErrorCode.SERVER_ERROR
        )
    ]
    assert relay.user_message("one") in t.session.history.items  # nothing was installed
