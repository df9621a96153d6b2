"""Auto-compaction scenarios with the remote backends selected (docs/compaction.md)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from tests.sessions import codex_compacted_history

NO_ROLLOUT = relay.RolloutConfig(enabled=False)


def config(backend: str, **fields: Any) -> relay.Config:
    """The remote ``backend``, making Codex's compacted history."""
    provider = relay.ProviderConfig(name="scripted", remote_compaction=backend)  # type: ignore[arg-type]
    return codex_compacted_history(
        relay.Config(
            model_providers={"scripted": provider},
            features=relay.Features(remote_compaction_v2=backend == "v2"),
            rollout=NO_ROLLOUT,
            **fields,
        )
    )


def compaction_reply(backend: str) -> list[dict[str, Any]]:
    """What the scripted model answers to the compaction request of ``backend``."""
    return [{"compaction": "ENC"}] if backend == "v2" else []


def kinds(body: dict[str, Any]) -> list[str]:
    out = []
    for item in body["input"]:
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(f"{item['role']}:{text.splitlines()[0]}")
        else:
            out.append(item["type"])
    return out


@pytest.mark.parametrize("backend", ["v1", "v2"])
async def test_pre_turn_auto_compaction_with_a_remote_backend(
    autojump_clock: trio.testing.MockClock, backend: str
) -> None:
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 70_000},
            {"text": "a2", "total_tokens": 330_000},
            *compaction_reply(backend),
            {"text": "a3"},
        ]
    }
    cfg = config(backend, model_auto_compact_token_limit=200_000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("one", "two", "three")
    follow_up = t.model.requests[-1]
    assert kinds(follow_up) == [
        "user:one",
        "user:two",
        "compaction",
        "user:<environment_context>",
        "user:three",
    ]
    assert len(t.model.compact_requests) == (1 if backend == "v1" else 0)
    receipt = next(
        m.item.receipt
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ContextCompactionItem)
    )
    assert receipt is not None
    assert (receipt.trigger, receipt.backend) == (
        relay.CompactionTrigger.PRE_TURN,
        f"remote_{backend}",
    )


@pytest.mark.parametrize("backend", ["v1", "v2"])
async def test_mid_turn_auto_compaction_with_a_remote_backend(
    autojump_clock: trio.testing.MockClock, backend: str
) -> None:
    call = {
        "function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"},
        "total_tokens": 5000,
    }
    script = {"responses": [call, *compaction_reply(backend), {"text": "done"}]}
    cfg = config(backend, model_auto_compact_token_limit=1000)
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("do it")
    follow_up = t.model.requests[-1]
    # The initial context goes before the last real user message; the compaction item is last.
    assert kinds(follow_up) == ["user:<environment_context>", "user:do it", "compaction"]
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "done"
    if backend == "v2":
        trigger_request = t.model.requests[1]
        assert trigger_request["input"][-1] == {"type": "compaction_trigger"}
        assert [i["type"] for i in trigger_request["input"]][-3:-1] == [
            "function_call",
            "function_call_output",
        ]
