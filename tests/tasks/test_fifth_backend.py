"""A compaction backend from outside relay's packages, given to a session through its tasks.

Adding a backend needs no change to ``runtime``: it implements the backend protocol and goes in
front of relay's backends in the sequence the task kinds are built with.
"""

from __future__ import annotations

import attrs
import relay
import trio
import trio.testing
from relay import tasks, testing
from relay.tasks.compaction import BACKENDS, BackendResult, CompactionRequest

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


@attrs.frozen
class KeepTail:
    """Keeps the last user message and the last answer; asks no model."""

    enabled: bool = True
    fail_with: relay.ModelError | None = None
    name: str = "keep_tail"
    error_prefix: str = "keep_tail could not compact: "

    def applies(self, config: relay.Config, provider: relay.ProviderConfig) -> bool:
        return self.enabled

    async def compact(
        self, ctx: relay.lowlevel.TaskContext, request: CompactionRequest
    ) -> BackendResult:
        if self.fail_with is not None:
            raise self.fail_with
        messages = [item for item in ctx.history if isinstance(item, relay.Message)]
        users = [
            m for m in messages if m.role == "user" and relay.compaction.is_real_user_message(m)
        ]
        answers = [m for m in messages if m.role == "assistant"]
        return BackendResult([users[-1], answers[-1]])


async def compact_after_two_turns(backend: KeepTail) -> testing.TestSession:
    script = {"responses": [{"text": "first answer"}, {"text": "second answer"}]}
    config = relay.Config(rollout=NO_ROLLOUT)
    kinds = tasks.task_kinds(backends=(backend, *BACKENDS))
    async with testing.open_test_session(script, config=config, task_kinds=kinds) as t:
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
    assert [(m.role, m.text()) for m in items if isinstance(m, relay.Message)] == [
        ("user", "two"),
        ("assistant", "second answer"),
    ]
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


async def test_a_fifth_backend_that_does_not_apply_leaves_relays_choice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    t = await compact_after_two_turns(KeepTail(enabled=False))
    (completed,) = [
        m
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert completed.item.receipt is not None
    assert completed.item.receipt.backend == "local"


async def test_a_model_error_of_a_fifth_backend_is_reported_with_its_prefix(
    autojump_clock: trio.testing.MockClock,
) -> None:
    failure = relay.ModelError("the quota is spent", relay.ErrorCode.SERVER_ERROR)
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
