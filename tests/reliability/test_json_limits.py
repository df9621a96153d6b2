"""JSON that Python's parser rejects though it looks like JSON: nesting deeper than the
recursion limit, integers of more than 4,300 digits, ``NaN``, a number that overflows a float
(which Python would read as infinity, and relay could not write back). Wherever relay reads
JSON, each is the ordinary error of that place: a rollout line skipped with a warning, an
op-script line named with exit 2, a malformed server event (a retried stream error), a tool
error.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import relay
from relay import testing
from relay._base._tokens import ApproxEstimator
from relay._rollout._reader import read_rollout
from tests.invariants import check_event_invariants
from tests.reliability._raw_server import RawAnswer, open_raw_server, sse

GUARD_S = 60

#: Each hostile value, as the text of a JSON value.
HOSTILE = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "huge integer": "1" * 5_000,
    "NaN": "NaN",
    "overflowing number": "1e999",
}


def relay_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
        timeout=GUARD_S,
        check=False,
    )


def ops_file(path: Path, count: int) -> None:
    lines = []
    for number in range(1, count + 1):
        op = {"op": {"type": "user_turn", "items": [{"type": "text", "text": f"turn {number}"}]}}
        lines += [
            json.dumps(op),
            json.dumps({"wait_for": {"type": "turn_complete", "count": number}}),
        ]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def rollout(tmp_path: Path) -> Path:
    """A real two-turn rollout."""
    (tmp_path / "model.json").write_text(
        json.dumps({"responses": [{"text": "A."}, {"text": "B."}]})
    )
    ops_file(tmp_path / "ops.jsonl", 2)
    result = relay_cli(
        "run",
        "ops.jsonl",
        "--model-script",
        "model.json",
        "--rollout-dir",
        "sessions",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (path,) = (tmp_path / "sessions").rglob("rollout-*.jsonl")
    return path


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_rollout_line_python_cannot_read_is_skipped_with_a_warning(
    rollout: Path, tmp_path: Path, kind: str
) -> None:
    lines = rollout.read_text().splitlines()
    bad = '{"timestamp":"t","type":"event_msg","payload":{"type":"warning","message":'
    lines.insert(2, bad + HOSTILE[kind] + "}}")
    rollout.write_text("\n".join(lines) + "\n")
    parsed = read_rollout(rollout, for_resume=True)
    assert [note.line for note in parsed.notes] == [3]
    assert "JSON that cannot be read" in parsed.notes[0].message
    show = relay_cli("show", str(rollout), cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "line 3" in show.stderr and "Traceback" not in show.stderr
    assert "B." in show.stdout
    (tmp_path / "model2.json").write_text(json.dumps({"responses": [{"text": "C."}]}))
    ops_file(tmp_path / "more.jsonl", 1)
    resume = relay_cli(
        "resume", str(rollout), "more.jsonl", "--model-script", "model2.json", cwd=tmp_path
    )
    assert resume.returncode == 0, resume.stderr
    assert "line 3" in resume.stderr and "Traceback" not in resume.stderr


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_an_op_script_line_python_cannot_read_exits_2_naming_it(tmp_path: Path, kind: str) -> None:
    ops_file(tmp_path / "ops.jsonl", 1)
    with (tmp_path / "ops.jsonl").open("a") as out:
        out.write('{"op": {"type": "interrupt"}, "id": ' + HOSTILE[kind] + "}\n")
    result = relay_cli("run", "ops.jsonl", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("relay: ops.jsonl line 3: JSON that cannot be read")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_a_server_event_python_cannot_read_is_a_retried_stream_error(
    tmp_path: Path, kind: str
) -> None:
    event = '{"type":"response.output_text.delta","delta":"x","extra":' + HOSTILE[kind] + "}"
    raw = {1: RawAnswer((sse(event),))}
    recorder = testing.EventRecorder()
    with trio.fail_after(GUARD_S):
        async with open_raw_server({"responses": [{"text": "Answered."}]}, raw) as server:
            config = relay.Config(
                model="gpt-test",
                model_provider="hostile",
                model_providers={
                    "hostile": relay.ProviderConfig(
                        name="hostile", base_url=server.base_url, stream_max_retries=1
                    )
                },
                cwd=str(tmp_path),
                rollout=relay.RolloutConfig(enabled=False),
            )
            async with (
                relay.open_session(
                    config,
                    clock=testing.fixed_clock,
                    rng=random.Random(0),
                    estimator=ApproxEstimator(),
                ) as session,
                testing.recording(session) as recorder,
            ):
                await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
                await recorder.wait_for(relay.TurnComplete)
                await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)
    events = recorder.events
    check_event_invariants(events, finished=True)
    details = [e.msg.detail for e in events if isinstance(e.msg, relay.StreamErrorEvent)]
    assert len(details) == 1 and details[0].startswith("malformed event from the model server")
    assert not [e for e in events if isinstance(e.msg, relay.ErrorEvent)]
    assert [e.msg.message for e in events if isinstance(e.msg, relay.AgentMessage)] == ["Answered."]


@pytest.mark.parametrize("kind", list(HOSTILE))
async def test_tool_arguments_python_cannot_read_are_a_tool_error(
    tmp_path: Path, kind: str
) -> None:
    arguments = '{"path": ' + HOSTILE[kind] + "}"
    call = {"name": "list_dir", "arguments": arguments, "call_id": "c1"}
    script = tmp_path / "model.json"
    script.write_text(json.dumps({"responses": [{"function_call": call}, {"text": "Done."}]}))
    config = relay.Config(
        model_script=str(script),
        cwd=str(tmp_path),
        rollout=relay.RolloutConfig(enabled=False),
    )
    recorder = testing.EventRecorder()
    with trio.fail_after(GUARD_S):
        async with (
            relay.open_session(config, clock=testing.fixed_clock) as session,
            testing.recording(session) as recorder,
        ):
            await session.submit(relay.UserTurn(items=[relay.Text("list")]))
            await recorder.wait_for(relay.TurnComplete)
            await session.submit(relay.Shutdown())
            await recorder.wait_for(relay.ShutdownComplete)
    events = recorder.events
    check_event_invariants(events, finished=True)
    assert not [e for e in events if isinstance(e.msg, relay.ErrorEvent)]
    (output,) = [
        e.msg.item.output
        for e in events
        if isinstance(e.msg, relay.ItemCompleted) and isinstance(e.msg.item, relay.ToolCallItem)
    ]
    assert output is not None and output.startswith("invalid arguments for list_dir: ")
