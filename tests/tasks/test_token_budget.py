"""The token-budget backend: a fresh window from the current world state (docs/compaction.md)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._tokens import approx_tokens, items_tokens, tools_tokens
from relay.tasks.compaction._history import keep_recent_messages
from relay.tasks.compaction._token_budget import DEVELOPER_MESSAGE_BUDGET, client_developer_messages
from relay.testing import turn_ended
from tests.sessions import codex_compacted_history, sdk_session

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


def config(**fields: Any) -> relay.Config:
    """The token-budget backend, making Codex's compacted history."""
    fields.setdefault("rollout", NO_ROLLOUT)
    return codex_compacted_history(
        relay.Config(features=relay.Features(token_budget=True), **fields)
    )


def wire(item: relay.ResponseItem) -> dict[str, Any]:
    return relay.lowlevel.encode_response_item(item)


def developer(text: str) -> relay.Message:
    return relay.Message("developer", (relay.InputText(text),))


def turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)])


async def run(t: testing.TestSession, *ops: relay.Op) -> None:
    done = sum(turn_ended(e) for e in t.recorder.events)
    for op in ops:
        await t.submit(op)
        done += 1
        await t.wait_for(turn_ended, done)


def environment(cwd: str) -> relay.Message:
    return relay.user_message(
        "\n".join(
            [
                "<environment_context>",
                f"  <cwd>{cwd}</cwd>",
                "  <shell>bash</shell>",
                "  <current_date>2026-01-02</current_date>",
                "  <timezone>UTC</timezone>",
                "</environment_context>",
            ]
        )
    )


async def test_no_request_reaches_the_model_and_the_window_advances(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    cfg = config(cwd=str(tmp_path), developer_instructions="Be brief.")
    async with testing.open_test_session(config=cfg) as t:
        await run(t, turn("first"))
        window_id = t.session.snapshot().window_id
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
        assert len(t.model.requests) == 1
        assert t.model.compact_requests == []
        assert t.session.snapshot().window_number == 1
        assert t.session.snapshot().previous_window_id == window_id
        assert t.session.snapshot().window_id != window_id
        fresh = [developer("Be brief."), environment(str(tmp_path))]
        assert list(t.session.history.items) == fresh
        await run(t, turn("second"))
    assert t.recorder.types("c1") == [
        "turn_started",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "turn_complete",
    ]
    (completed,) = [
        m
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    receipt = completed.item.receipt
    assert receipt.backend == "token_budget"
    # A request over the new history: instructions and tools count too.
    assert receipt.tokens_after == (
        items_tokens(fresh)
        + approx_tokens(t.session.instructions)
        + tools_tokens(t.session.tools.specs())
    )
    # The next turn starts with the fresh initial context, recorded once, then its input.
    assert t.model.requests[1]["input"] == [
        *(wire(i) for i in fresh),
        wire(relay.user_message("second")),
    ]


async def test_the_world_state_is_taken_now(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "AGENTS.md").write_text("Use tabs.")
    async with testing.open_test_session(config=config(cwd=str(tmp_path))) as t:
        await run(t, turn("first"))
        await t.submit(relay.OverrideTurnContext(cwd=str(other)))
        await run(t, relay.Compact(), turn("second"))
    second = t.model.requests[1]["input"]
    assert [item["content"][0]["text"].split("\n")[0] for item in second] == [
        f'<project_instructions path="{other / "AGENTS.md"}">',
        "<environment_context>",
        "second",
    ]
    assert second[1] == wire(environment(str(other)))


@attrs.frozen
class DeveloperRule(relay.SessionTask):
    text: str

    @property
    def kind(self) -> str:
        return "rule"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        ctx.record(developer(self.text))
        return None


async def test_developer_messages_the_client_added_are_kept(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    cfg = config(cwd=str(tmp_path), developer_instructions="Be brief.")
    # The client adds its rules as developer messages, through a task of its own.
    rules = {"user_input": lambda op: DeveloperRule(op.items[0].text)}
    async with testing.open_test_session(config=cfg, tasks=rules) as t:
        await run(t, turn("first"))
        await run(t, relay.UserInput(items=[relay.Text("Client rule one.")]))
        await run(t, turn("second"))
        await run(t, relay.UserInput(items=[relay.Text("Client rule two.")]))
        await run(t, relay.Compact())
        assert list(t.session.history.items) == [
            developer("Be brief."),
            environment(str(tmp_path)),
            developer("Client rule one."),
            developer("Client rule two."),
        ]


def test_client_developer_messages_within_the_budget() -> None:
    initial = [developer("Be brief."), relay.user_message("<environment_context>")]
    history = [
        developer("Be brief."),
        relay.user_message("hi"),
        developer("old " * 10),
        relay.assistant_message("a"),
        developer("new"),
    ]
    added = client_developer_messages(history, initial)
    assert added == [developer("old " * 10), developer("new")]
    kept = keep_recent_messages(added, 5)
    assert kept[-1] == developer("new")
    assert "tokens truncated" in kept[0].text()
    assert DEVELOPER_MESSAGE_BUDGET == 64_000


async def test_rollout_records_what_resume_needs(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    rollout = relay.RolloutConfig(enabled=True, dir=str(tmp_path / "sessions"))
    cfg = config(cwd=str(tmp_path), rollout=rollout)
    async with testing.open_test_session(config=cfg) as t:
        await run(t, turn("first"), relay.Compact())
        path = t.session.rollout.path  # type: ignore[union-attr]
        live = list(t.session.history.items)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    types = [line["type"] for line in lines]
    at = types.index("compacted")
    assert types[at : at + 3] == ["compacted", "world_state", "turn_context"]
    compacted = lines[at]["payload"]
    assert compacted["message"] == ""
    assert compacted["replacement_history"] == [wire(item) for item in live]
    assert compacted["window_number"] == 1
    assert compacted["receipt"]["backend"] == "token_budget"
    # A resumed session continues from exactly this window and records no context again.
    model = testing.ScriptedModel()
    async with relay.resume_session(
        path, cfg, model=model, clock=testing.fixed_clock, rng=random.Random(0)
    ) as session:
        assert list(session.history.items) == live
        assert session.snapshot().window_number == 1
        recorder = testing.EventRecorder()
        async with anyio.create_task_group() as tg:
            tg.start_soon(recorder.consume, session)
            await session.submit(turn("after resume"))
            await recorder.wait_for(relay.TurnComplete)
            await session.submit(relay.Shutdown())
    assert model.requests[0]["input"] == [
        *(wire(item) for item in live),
        wire(relay.user_message("after resume")),
    ]


async def test_mid_turn_token_budget_keeps_the_fresh_context_once(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 0}}, "total_tokens": 500},
            {"text": "done", "total_tokens": 10},
        ]
    }
    cfg = config(cwd=str(tmp_path), model_auto_compact_token_limit=100)
    async with testing.open_test_session(script, config=cfg) as t:
        await run(t, turn("go"))
    assert len(t.model.requests) == 2
    assert t.model.requests[1]["input"] == [wire(environment(str(tmp_path)))]
    receipts = [
        m.item.receipt
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert [(r.trigger, r.backend) for r in receipts] == [
        (relay.CompactionTrigger.MID_TURN, "token_budget")
    ]


async def test_through_the_sdk_nothing_is_sent_until_the_next_turn(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    cfg = config(cwd=str(tmp_path))
    async with sdk_session({"responses": [{"text": "a1"}, {"text": "a2"}]}, cfg) as (t, transport):
        await run(t, turn("first"))
        sent = len(transport.requests)
        await run(t, relay.Compact())
        assert len(transport.requests) == sent == 1
        await run(t, turn("second"))
    assert [e["path"] for e in transport.requests] == ["/v1/responses", "/v1/responses"]
    assert transport.requests[1]["body"]["input"] == [
        wire(environment(str(tmp_path))),
        wire(relay.user_message("second")),
    ]


async def test_over_the_loopback_server(tmp_path: Path) -> None:
    async with testing.open_mock_server({"responses": [{"text": "a1"}, {"text": "a2"}]}) as server:
        cfg = config(
            cwd=str(tmp_path),
            model_provider="mock",
            model_providers={"mock": relay.ProviderConfig(name="mock", base_url=server.base_url)},
        )
        async with relay.open_session(cfg, clock=testing.fixed_clock) as session:
            recorder = testing.EventRecorder()
            async with anyio.create_task_group() as tg:
                tg.start_soon(recorder.consume, session)
                for index, op in enumerate([turn("first"), relay.Compact(), turn("second")]):
                    await session.submit(op)
                    await recorder.wait_for(turn_ended, index + 1)
                await session.submit(relay.Shutdown())
    assert [e["path"] for e in server.requests] == ["/v1/responses", "/v1/responses"]
    assert server.requests[1]["body"]["input"] == [
        wire(environment(str(tmp_path))),
        wire(relay.user_message("second")),
    ]
    assert not [m for m in recorder.msgs if isinstance(m, relay.WarningEvent | relay.ErrorEvent)]


@pytest.mark.parametrize("remote", ["unsupported", "v1", "v2"])
async def test_token_budget_wins_whatever_the_provider_offers(
    autojump_clock: trio.testing.MockClock, remote: str
) -> None:
    cfg = attrs.evolve(
        config(),
        features=relay.Features(token_budget=True, remote_compaction_v2=True),
        model_providers={
            "scripted": relay.ProviderConfig(name="scripted", remote_compaction=remote)
        },  # type: ignore[arg-type]
    )
    async with testing.open_test_session(config=cfg) as t:
        await run(t, turn("first"), relay.Compact())
        assert len(t.model.requests) == 1 and t.model.compact_requests == []
