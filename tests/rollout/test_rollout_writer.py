"""The rollout writer: file layout, modes, line shapes, the flush discipline (docs/rollout.md)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._errors import RolloutLockedError
from relay._core._writer import RolloutWriter
from relay.testing import FIXED_NOW


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_rollout_lines_modes_and_flush_before_terminal_events(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = relay.Config(
        rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")),
        developer_instructions="Be brief.",
    )
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 1}, "call_id": "c1"}},
            {"text": "done"},
            {"function_call": {"name": "sleep", "arguments": {"seconds": 60}, "call_id": "c2"}},
        ]
    }
    seen_at_terminal: dict[str, list[dict[str, Any]]] = {}
    async with testing.open_test_session(script, config=config) as t:
        path = t.session.rollout.path  # type: ignore[union-attr]

        async def watch() -> None:
            for cls, name in [
                (relay.TurnComplete, "complete"),
                (relay.TurnAborted, "aborted"),
                (relay.ShutdownComplete, "shutdown"),
            ]:
                await t.wait_for(cls)
                seen_at_terminal[name] = read_lines(path)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await t.turn("first", id="t1")
            await t.wait_for(relay.TurnComplete)
            await t.turn("second", id="t2")
            await t.wait_for(
                testing.tool_call_started,
                2,
            )
            await t.submit(relay.Interrupt())
            await t.wait_for(relay.TurnAborted)
            await t.shutdown()

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert path.parent.relative_to(tmp_path / "sessions").parts == ("2026", "01", "02")
    assert path.name.startswith("rollout-2026-01-02T03-04-05-")

    # Each terminal event is on disk, with everything before it, when the reader sees it.
    for name, kind in [
        ("complete", "turn_complete"),
        ("aborted", "turn_aborted"),
        ("shutdown", "shutdown_complete"),
    ]:
        lines = seen_at_terminal[name]
        assert lines[-1]["type"] == "event_msg" and lines[-1]["payload"]["type"] == kind

    lines = read_lines(path)
    assert lines[0]["type"] == "session_meta"
    assert lines[0]["payload"]["id"] == t.session.id
    assert lines[0]["payload"]["relay_version"] == relay.__version__
    assert all(line["timestamp"].endswith("Z") and len(line["timestamp"]) == 24 for line in lines)
    types = {line["type"] for line in lines}
    assert types == {
        "session_meta",
        "event_msg",
        "response_item",
        "turn_context",
        "world_state",
        "ids",
        "rules",
        "intent",
    }
    # The generated ids are written just before an event that ends a turn, flushed with it.
    for position, line in enumerate(lines):
        if line["type"] == "ids":
            following = lines[position + 1]["payload"]["type"]
            assert following in {"turn_complete", "turn_aborted", "shutdown_complete"}
            assert set(line["payload"]) == {"submission", "item"}
    events = [line["payload"]["type"] for line in lines if line["type"] == "event_msg"]
    assert "agent_message_delta" not in events and "item_started" not in events
    items = [
        relay.lowlevel.decode_response_item(line["payload"])
        for line in lines
        if line["type"] == "response_item"
    ]
    assert items == list(t.session.history.items)
    contexts = [line["payload"] for line in lines if line["type"] == "turn_context"]
    assert [c["model"] for c in contexts] == ["scripted", "scripted"]
    assert len(contexts[0]["instructions_hash"]) == 16


# ------------------------------------------------------------------ one writer at a time


def test_a_rollout_has_one_writer_at_a_time(tmp_path: Path) -> None:
    first = RolloutWriter.create(tmp_path, "s-1", FIXED_NOW)
    first.write("session_meta", {"id": "s-1"})  # a new rollout left empty is removed on close
    try:
        with pytest.raises(RolloutLockedError, match="in use by another session"):
            RolloutWriter.append_to(first.path)
    finally:
        first.close()
    second = RolloutWriter.append_to(first.path)
    try:
        with pytest.raises(RolloutLockedError, match=str(first.path)):
            RolloutWriter.append_to(first.path)
    finally:
        second.close()


@pytest.mark.slow  # processes of its own
def test_a_second_process_resuming_a_rollout_in_use_exits_2(tmp_path: Path) -> None:
    def turn(turn_id: str) -> str:
        op = {"type": "user_turn", "items": [{"type": "text", "text": turn_id}]}
        return json.dumps({"id": turn_id, "op": op})

    # The first process completes a turn (its lines are flushed), then waits on a reply that
    # takes an hour, holding the rollout.
    (tmp_path / "model.json").write_text(
        json.dumps({"responses": [{"text": "one"}, {"text": "late", "delay_ms": 3_600_000}]})
    )
    (tmp_path / "ops.jsonl").write_text(
        f'{turn("t1")}\n{{"wait_for": {{"type": "turn_complete"}}}}\n{turn("t2")}\n'
        '{"wait_for": {"type": "turn_complete", "count": 2}}\n'
    )
    (tmp_path / "more.jsonl").write_text(
        f'{turn("t3")}\n{{"wait_for": {{"type": "turn_complete"}}}}\n'
    )
    (tmp_path / "model2.json").write_text(json.dumps({"responses": [{"text": "three"}]}))
    command = [sys.executable, "-m", "relay"]
    first = subprocess.Popen(
        [*command, "run", "ops.jsonl", "--model-script", "model.json", "--rollout-dir", "sessions"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if json.loads(line)["msg"]["type"] == "turn_complete":
                break
        (rollout,) = (tmp_path / "sessions").rglob("*.jsonl")
        size = rollout.stat().st_size
        second_argv = [
            *command,
            "resume",
            str(rollout),
            "more.jsonl",
            "--model-script",
            "model2.json",
        ]
        second = subprocess.run(
            second_argv, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 2
        assert second.stderr == (
            f"relay: rollout file {rollout} is in use by another session; resume it once that"
            " session has ended\n"
        )
        assert second.stdout == ""
        assert rollout.stat().st_size == size
    finally:
        first.kill()
        first.wait()
        assert first.stdout is not None
        first.stdout.close()
    # The lock goes with the process that held it, however it ended.
    third = subprocess.run(second_argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert third.returncode == 0, third.stderr


async def test_an_unchanged_turn_context_is_made_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import relay._core._recorder as recorder_module

    hashed = 0
    real = recorder_module.instructions_hash

    def counting(instructions: str) -> str:
        nonlocal hashed
        hashed += 1
        return real(instructions)

    monkeypatch.setattr(recorder_module, "instructions_hash", counting)
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with testing.open_test_session(None, config=config) as t:
        for n in range(5):
            await t.turn(f"turn {n}", id=f"t{n}")
            await t.wait_for(relay.TurnComplete, count=n + 1)
        await t.submit(relay.OverrideTurnContext(model="other"))
        await t.turn("on the other model", id="t5")
        await t.wait_for(relay.TurnComplete, count=6)
        rollout = t.session.rollout
        assert rollout is not None
        path = rollout.path
    contexts = [line["payload"] for line in read_lines(path) if line["type"] == "turn_context"]
    assert [c["model"] for c in contexts] == ["scripted"] * 5 + ["other"]
    assert len({c["instructions_hash"] for c in contexts}) == 1
    # Made for the first turn and again when the model changed, not for every turn.
    assert hashed == 2


async def test_turn_started_records_the_auto_compaction_limit(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The limit a turn compacts at is in its ``turn_started`` line, so that a reader of the
    rollout (``relay show --html``) can draw it: the configured limit, or 90 % of the window."""
    limits: list[Any] = []
    for fields in [
        {"model_auto_compact_token_limit": 2000},
        {"model_context_window": 10_000},
        {},
    ]:
        config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path / "s")), **fields)
        async with testing.open_test_session({"responses": ["ok"]}, config=config) as t:
            path = t.session.rollout.path  # type: ignore[union-attr]
            await t.turn("hello", id="t1")
            await t.wait_for(relay.TurnComplete)
        started = [
            line["payload"]
            for line in read_lines(path)
            if line["payload"].get("type") == "turn_started"
        ]
        limits.append(started[0]["auto_compact_token_limit"])
        assert t.recorder.of_type(relay.TurnStarted)[0].auto_compact_token_limit == limits[-1]
    assert limits == [2000, 9000, None]
