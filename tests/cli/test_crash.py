"""Crash safety: ``relay run`` killed with SIGKILL at many points, then resumed
(docs/reliability.md).

Each run executes the same long op script (turns, tool calls with a large output, an
interrupt, manual compactions) against a model script whose replies take a few milliseconds, so
that there is a moment to kill the process at each point. Kill points are chosen by counting the
events read from the process's stdout, never by sleeping. For every rollout left behind:

- it reads without notes; so does a copy whose last line, if it was written after the last
  flush, is cut in the middle (a write cut short), apart from the note for that line;
- a session resumes from it, and its history equals the history an independent replay of the
  file (written here, on raw JSON) gives;
- every item of a turn that stdout reported as ended (``turn_complete`` / ``turn_aborted``)
  before the kill is in the file, before that turn's terminal event;
- after the resumed session appended to the file, the file still reads and gives the history the
  resumed session ended with.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import relay
from relay import testing
from relay._rollout._reader import read_rollout
from relay._rollout._resume import INTERRUPTED_OUTPUT, reconstruct
from tests.pipes import LineReader

ROUNDS = 6
SPREAD_KILLS = 20

Event = dict[str, Any]


def call(name: str, arguments: dict[str, Any], call_id: str, delay_ms: int) -> dict[str, Any]:
    return {
        "function_call": {"name": name, "arguments": arguments, "call_id": call_id},
        "delay_ms": delay_ms,
    }


def build_scripts() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The op script and the model script, built together so that replies line up."""
    ops: list[dict[str, Any]] = []
    replies: list[dict[str, Any]] = []
    ended = 0
    tool_calls = 0

    def turn(turn_id: str, text: str) -> None:
        ops.append(
            {"id": turn_id, "op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}}
        )

    def wait_end(kind: str = "turn_complete") -> None:
        nonlocal ended
        ended += 1
        ops.append({"wait_for": {"type": kind, "count": ended if kind == "turn_complete" else 1}})

    for n in range(1, ROUNDS + 1):
        turn(f"read-{n}", f"task {n}: read big.txt")
        replies.append(call("read_file", {"path": "big.txt"}, f"r{n}", 8))
        replies.append({"text": f"read it, round {n}", "delay_ms": 8})
        tool_calls += 1
        wait_end()
        turn(f"ask-{n}", f"question {n}")
        replies.append(call("sleep", {"seconds": 0.005}, f"s{n}", 4))
        replies.append({"text": f"answer {n}\n" + "detail " * 40, "delay_ms": 8})
        tool_calls += 1
        wait_end()
        if n == 2:
            # An interrupted turn: the marker and the synthetic output are part of the history.
            turn(f"stop-{n}", "wait a long time")
            replies.append(call("sleep", {"seconds": 30}, f"long{n}", 4))
            tool_calls += 1
            ops.append(
                {
                    "wait_for": {
                        "type": "item_started",
                        "count": tool_calls,
                        "match": {"item.type": "tool_call"},
                    }
                }
            )
            ops.append({"id": f"int-{n}", "op": {"type": "interrupt"}})
            ops.append({"wait_for": {"type": "turn_aborted"}})
        if n % 2 == 1:
            ops.append({"id": f"compact-{n}", "op": {"type": "compact"}})
            replies.append({"text": f"summary {n}: " + "progress " * 30, "delay_ms": 30})
            wait_end()
    return ops, {"responses": replies}


def start(workdir: Path, sessions: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relay",
            "run",
            str(workdir / "ops.jsonl"),
            "--model-script",
            str(workdir / "model.json"),
            "--rollout-dir",
            str(sessions),
        ],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def run_until(
    workdir: Path, sessions: Path, stop: Callable[[list[Event]], bool] | None
) -> tuple[list[Event], Path]:
    """Run the script; SIGKILL the process as soon as ``stop`` holds for the events read."""
    process = start(workdir, sessions)
    assert process.stdout is not None
    seen: list[Event] = []
    try:
        for line in LineReader(process.stdout, timeout=60):
            seen.append(json.loads(line))
            if stop is not None and stop(seen):
                process.kill()
                break
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
    if stop is None:
        assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    (path,) = sessions.rglob("rollout-*.jsonl")
    return seen, path


# ----------------------------------------------------------------------------- checks


def simple_replay(path: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    """An independent replay on raw JSON: response items append, compactions replace."""
    records: list[dict[str, Any]] = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            records.append(json.loads(raw))
        except ValueError:
            continue  # the line a crash cut short (or an empty last chunk)
    history: list[Any] = []
    for record in records:
        if record["type"] == "response_item":
            history.append(record["payload"])
        elif record["type"] == "compacted":
            history = list(record["payload"]["replacement_history"])
    return records, history


def with_answers(records: list[dict[str, Any]], history: list[Any]) -> list[Any]:
    """``history`` as a resume goes on with it: a call with no output is answered first,
    ``interrupted`` when its intent line says it was running, else ``aborted``."""
    intents = {r["payload"]["call_id"] for r in records if r["type"] == "intent"}
    answered = {i["call_id"] for i in history if i.get("type") == "function_call_output"}
    return history + [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": INTERRUPTED_OUTPUT if item["call_id"] in intents else "aborted",
        }
        for item in history
        if item.get("type") == "function_call" and item["call_id"] not in answered
    ]


def acknowledged(seen: list[Event]) -> dict[str, list[tuple[str, Any]]]:
    """The items of every turn whose end stdout reported, by turn id."""
    items: dict[str, list[tuple[str, Any]]] = {}
    ended: dict[str, list[tuple[str, Any]]] = {}
    for event in seen:
        msg = event["msg"]
        turn_items = items.setdefault(event["id"], [])
        if msg["type"] == "item_completed":
            item = msg["item"]
            match item["type"]:
                case "user_message":
                    turn_items.append(("user", item["content"][0]["text"]))
                case "agent_message":
                    turn_items.append(("assistant", item["id"]))
                case "tool_call":
                    turn_items.append(("output", (item["id"], item["output"])))
                case "context_compaction":
                    turn_items.append(("compacted", item["receipt"]["tokens_after"]))
        elif msg["type"] in {"turn_complete", "turn_aborted"}:
            ended[event["id"]] = turn_items
    return ended


def recorded_before_end(records: list[dict[str, Any]], turn_id: str) -> list[tuple[str, Any]]:
    """What the file holds for ``turn_id``, in the same shape as :func:`acknowledged`."""
    found: list[tuple[str, Any]] = []
    inside = False
    for record in records:
        payload = record["payload"]
        if record["type"] == "event_msg":
            if payload["type"] == "turn_started" and payload["turn_id"] == turn_id:
                inside = True
            elif payload["type"] in {"turn_complete", "turn_aborted"} and (
                inside and payload["turn_id"] == turn_id
            ):
                return found
        elif inside and record["type"] == "response_item":
            if payload["type"] == "message" and payload["role"] == "user":
                found.append(("user", payload["content"][0]["text"]))
            elif payload["type"] == "message" and payload["role"] == "assistant":
                found.append(("assistant", payload.get("id")))
            elif payload["type"] == "function_call_output":
                found.append(("output", (payload["call_id"], payload["output"])))
        elif inside and record["type"] == "compacted":
            found.append(("compacted", payload["receipt"]["tokens_after"]))
    raise AssertionError(f"the file has no terminal event for acknowledged turn {turn_id}")


def in_order_within(wanted: list[Any], found: list[Any]) -> bool:
    rest = iter(found)
    return all(any(entry == candidate for candidate in rest) for entry in wanted)


async def resume_and_check(path: Path, workdir: Path, expected: list[Any]) -> list[Any]:
    config = relay.Config(cwd=str(workdir), rollout=relay.RolloutConfig(dir=str(workdir)))
    async with (
        relay.resume_session(path, config, model=testing.ScriptedModel()) as session,
        testing.recording(session) as recorder,
    ):
        assert [relay.lowlevel.to_json(item) for item in session.history.items] == expected
        await session.submit(relay.UserTurn(items=[relay.Text("resumed")]))
        await recorder.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete))
        final = [relay.lowlevel.to_json(item) for item in session.history.items]
        await session.submit(relay.Shutdown())
    assert final[: len(expected)] == expected
    return final


def check_rollout(path: Path, workdir: Path, seen: list[Event]) -> bool:
    """Every check of the module docstring; returns whether the last line was truncated."""
    rollout = read_rollout(path)
    assert all(note.truncated for note in rollout.notes), rollout.notes
    records, history = simple_replay(path)
    assert [relay.lowlevel.to_json(item) for item in reconstruct(rollout).history] == history
    for turn_id, items in acknowledged(seen).items():
        # The file may hold more (an interrupt's marker and synthetic outputs are not items).
        assert in_order_within(items, recorded_before_end(records, turn_id)), turn_id
    final = trio.run(resume_and_check, path, workdir, with_answers(records, history))
    after = read_rollout(path)
    # The line a crash cut short is now followed by the resumed session's lines.
    assert all(
        note.truncated or note.message.startswith("incomplete line") for note in after.notes
    ), after.notes
    assert [relay.lowlevel.to_json(item) for item in reconstruct(after).history] == final
    return bool(rollout.notes)


TERMINAL = {"turn_complete", "turn_aborted", "shutdown_complete"}


def cut_unflushed_tail(path: Path, copy: Path) -> bool:
    """Copy ``path`` with its last line cut in the middle, if that line came after the last
    flush (``session_meta`` and terminal events are flushed with their line: never cut short).

    The buffered writer hands whole lines to the system, so a SIGKILL leaves whole lines; a
    write cut short (a full disk, a power loss) does not. This makes that case too.
    """
    data = path.read_bytes()
    *_, last, end = data.split(b"\n")
    record = json.loads(last)
    flushed = record["type"] == "session_meta" or (
        record["type"] == "event_msg" and record["payload"]["type"] in TERMINAL
    )
    if end or flushed:
        return False
    copy.write_bytes(data[: len(data) - 1 - len(last) // 2])
    return True


def is_compaction(event: Event, kind: str) -> bool:
    msg = event["msg"]
    return msg["type"] == kind and msg["item"]["type"] == "context_compaction"


def nth(n: int, test: Callable[[Event], bool]) -> Callable[[list[Event]], bool]:
    """Stop right after the ``n``-th event that passes ``test``."""

    def stop(seen: list[Event]) -> bool:
        return test(seen[-1]) and sum(1 for event in seen if test(event)) == n

    return stop


@pytest.mark.slow
def test_killed_runs_resume_with_everything_acknowledged(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "ηθ", "✓"]
    (workdir / "big.txt").write_text(
        "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(800))
    )
    ops, model = build_scripts()
    (workdir / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    (workdir / "model.json").write_text(json.dumps(model))

    full, full_path = run_until(workdir, tmp_path / "full", None)
    assert full[-1]["msg"]["type"] == "shutdown_complete"
    check_rollout(full_path, workdir, full)
    total = len(full)

    stops: dict[str, Callable[[list[Event]], bool]] = {}
    for k in range(SPREAD_KILLS):
        count = 2 + (total - 4) * k // (SPREAD_KILLS - 1)
        stops[f"after {count} events"] = lambda seen, count=count: len(seen) >= count
    for n in (1, 2, 3):
        stops[f"in compaction {n}"] = nth(n, lambda e: is_compaction(e, "item_started"))
    stops["right after compaction 1 installed"] = nth(
        1, lambda e: is_compaction(e, "item_completed")
    )
    stops["right after the first large tool output"] = lambda seen: (
        seen[-1]["msg"]["type"] == "item_completed"
        and seen[-1]["msg"]["item"].get("name") == "read_file"
    )

    cut = 0
    for index, (name, stop) in enumerate(stops.items()):
        seen, path = run_until(workdir, tmp_path / f"killed-{index}", stop)
        assert seen[-1]["msg"]["type"] != "shutdown_complete", name
        copy = tmp_path / f"cut-{index}.jsonl"
        if cut_unflushed_tail(path, copy):
            assert check_rollout(copy, workdir, seen), name
            cut += 1
        assert not check_rollout(path, workdir, seen), name
    assert len(stops) >= SPREAD_KILLS + 5
    # At least the kill right after the first large tool output left an unflushed tail.
    assert cut >= 1
