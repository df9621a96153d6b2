"""The rollout writer: file layout, modes, line shapes and the flush discipline (SPEC §8)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import trio
import trio.testing

import runtime
from runtime import testing


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_rollout_lines_modes_and_flush_before_terminal_events(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = runtime.Config(
        rollout=runtime.RolloutConfig(dir=str(tmp_path / "sessions")),
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
                (runtime.TurnComplete, "complete"),
                (runtime.TurnAborted, "aborted"),
                (runtime.ShutdownComplete, "shutdown"),
            ]:
                await t.wait_for(cls)
                seen_at_terminal[name] = read_lines(path)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await t.turn("first", id="t1")
            await t.wait_for(runtime.TurnComplete)
            await t.turn("second", id="t2")
            await t.wait_for(
                testing.tool_call_started,
                2,
            )
            await t.submit(runtime.Interrupt())
            await t.wait_for(runtime.TurnAborted)
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
    assert lines[0]["payload"]["relay_version"] == runtime.__version__
    assert all(line["timestamp"].endswith("Z") and len(line["timestamp"]) == 24 for line in lines)
    types = {line["type"] for line in lines}
    assert types == {"session_meta", "event_msg", "response_item", "turn_context", "world_state"}
    events = [line["payload"]["type"] for line in lines if line["type"] == "event_msg"]
    assert "agent_message_delta" not in events and "item_started" not in events
    items = [
        runtime.lowlevel.decode_response_item(line["payload"])
        for line in lines
        if line["type"] == "response_item"
    ]
    assert items == list(t.session.history.items)
    contexts = [line["payload"] for line in lines if line["type"] == "turn_context"]
    assert [c["model"] for c in contexts] == ["scripted", "scripted"]
    assert len(contexts[0]["instructions_hash"]) == 16
