"""A separate model for compaction: summaries go to ``compact_model`` (on
``compact_model_provider``), turns stay on the session's model (docs/compaction.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._config import config_from_dict

NO_ROLLOUT = relay.RolloutConfig(enabled=False)
RELAY_RUN = (sys.executable, "-m", "relay", "run")


def receipts(recorder: testing.EventRecorder) -> list[relay.CompactionReceipt]:
    return [
        m.item.receipt
        for m in recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]


async def run(
    config: relay.Config, turns: testing.ScriptedModel, summaries: testing.ScriptedModel | None
) -> testing.EventRecorder:
    async with (
        relay.open_session(config, model=turns, compact_model=summaries) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("first")]))
        await recorder.wait_for(relay.TurnComplete)
        await session.submit(relay.Compact())
        await recorder.wait_for(relay.TurnComplete, 2)
        await session.submit(relay.UserTurn(items=[relay.Text("second")]))
        await recorder.wait_for(relay.TurnComplete, 3)
    return recorder


async def test_summaries_go_to_the_compaction_model_and_turns_stay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns = testing.ScriptedModel({"responses": ["answer one", "answer two"]})
    summaries = testing.ScriptedModel({"responses": ["THE SUMMARY"]})
    config = relay.Config(model="big", compact_model="small", rollout=NO_ROLLOUT)
    recorder = await run(config, turns, summaries)
    assert [body["model"] for body in turns.requests] == ["big", "big"]
    assert [body["model"] for body in summaries.requests] == ["small"]
    assert testing.is_compaction_request(summaries.requests[0])
    assert not any(testing.is_compaction_request(body) for body in turns.requests)
    assert any("THE SUMMARY" in text for text in testing.user_texts(turns.requests[1]))
    (receipt,) = receipts(recorder)
    assert (receipt.backend, receipt.model) == ("local", "small")
    (configured,) = recorder.of_type(relay.SessionConfigured)
    assert configured.compact_model == "small"


async def test_without_a_compaction_model_the_session_model_summarises(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns = testing.ScriptedModel({"responses": ["answer one", "THE SUMMARY", "answer two"]})
    recorder = await run(relay.Config(model="big", rollout=NO_ROLLOUT), turns, None)
    assert [body["model"] for body in turns.requests] == ["big", "big", "big"]
    (receipt,) = receipts(recorder)
    assert receipt.model == "big"
    (configured,) = recorder.of_type(relay.SessionConfigured)
    data = relay.lowlevel.to_json(configured)
    assert "compact_model" not in data and "compact_model_provider" not in data


async def test_a_backend_that_asks_no_model_names_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turns = testing.ScriptedModel({"responses": ["answer one", "answer two"]})
    config = relay.Config(
        compact_model="small", features=relay.Features(token_budget=True), rollout=NO_ROLLOUT
    )
    recorder = await run(config, turns, testing.ScriptedModel({}))
    (receipt,) = receipts(recorder)
    assert (receipt.backend, receipt.model) == ("token_budget", None)
    assert "model" not in relay.lowlevel.to_json(receipt)


def test_another_provider_makes_every_compaction_local() -> None:
    from relay.tasks.compaction import select_backend

    data: dict[str, Any] = {
        "model_provider": "remote",
        "model_providers": {
            "remote": {"base_url": "http://127.0.0.1:1/v1", "remote_compaction": "v2"},
            "summaries": {"base_url": "http://127.0.0.1:2/v1", "wire_api": "chat"},
        },
        "features": {"remote_compaction_v2": True},
    }
    config = config_from_dict(data)
    assert select_backend(config, config.provider()) == "remote_v2"
    assert select_backend(config_from_dict({**data, "compact_model": "x"}), config.provider()) == (
        "remote_v2"
    )
    other = config_from_dict({**data, "compact_model_provider": "summaries"})
    assert select_backend(other, other.provider()) == "local"
    same = config_from_dict({**data, "compact_model_provider": "remote"})
    assert select_backend(same, same.provider()) == "remote_v2"


async def test_an_unknown_compaction_provider_is_a_configuration_error() -> None:
    config = relay.Config(compact_model_provider="nowhere", rollout=NO_ROLLOUT)
    with pytest.raises(relay.ConfigError, match="compact_model_provider 'nowhere'"):
        async with relay.open_session(config):
            pass


@pytest.mark.slow  # two servers and a relay process
async def test_over_http_the_summary_goes_to_the_other_server(tmp_path: Path) -> None:
    turns = {"responses": ["answer one", "answer two"]}
    summaries = {"responses": ["THE SUMMARY FROM THE SMALL MODEL"]}
    ops = [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "first"}]}},
        {"wait_for": {"type": "turn_complete"}},
        {"op": {"type": "compact"}},
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "2"}], "on_busy": "queue"}},
    ]
    script = tmp_path / "ops.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in ops))
    async with (
        testing.open_mock_server(turns) as big,
        testing.open_mock_server(summaries) as small,
    ):
        config = tmp_path / "config.toml"
        config.write_text(
            'model = "big"\nmodel_provider = "big"\n'
            'compact_model = "small"\ncompact_model_provider = "small"\n\n'
            f'[model_providers.big]\nbase_url = "{big.base_url}"\nremote_compaction = "v1"\n\n'
            f'[model_providers.small]\nbase_url = "{small.base_url}"\nwire_api = "chat"\n'
        )
        done = await trio.to_thread.run_sync(
            lambda: subprocess.run(
                [*RELAY_RUN, str(script), "--config", str(config), "-c", "rollout.enabled=false"],
                capture_output=True,
                text=True,
                env=dict(os.environ),
                timeout=120,
                check=False,
            )
        )
        assert done.returncode == 0, done.stderr + done.stdout[-3000:]
        big_requests, small_requests = list(big.requests), list(small.requests)
    assert [r["path"] for r in small_requests] == ["/v1/chat/completions"]
    assert small_requests[0]["body"]["model"] == "small"
    assert [r["path"] for r in big_requests] == ["/v1/responses", "/v1/responses"]
    assert "THE SUMMARY FROM THE SMALL MODEL" in json.dumps(big_requests[1]["body"])
    events = [json.loads(line)["msg"] for line in done.stdout.splitlines()]
    configured = events[0]
    assert (configured["compact_model"], configured["compact_model_provider"]) == (
        "small",
        "small",
    )
    (receipt,) = [
        e["item"]["receipt"]
        for e in events
        if e["type"] == "item_completed" and e["item"]["type"] == "context_compaction"
    ]
    assert (receipt["backend"], receipt["model"]) == ("local", "small")
