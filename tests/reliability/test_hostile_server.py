"""Hostile model servers, over a real loopback socket: bounded lines, events and bodies, a capped
retry-after, answers that are not event streams, foreign error shapes on the Chat wire.

Each server answers the first request (or the first compaction request) with the hostile bytes,
then from a model script; the session must report the hostile answer clearly, hold no more than
the configured bounds, and answer the next request.
"""

from __future__ import annotations

import gzip
import json
import random
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

import relay
from relay import testing
from relay._base._tokens import ApproxEstimator
from relay._models._mock_transport import SSE_HEADERS
from tests.invariants import check_event_invariants
from tests.reliability._raw_server import RawAnswer, open_raw_server, sse

GUARD_S = 30
MIB = 1024 * 1024


def turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)])


async def run_turns(
    raw: Mapping[int, RawAnswer],
    tmp_path: Path,
    *ops: relay.Op,
    script: Any = None,
    **provider: Any,
) -> list[relay.Event]:
    """Run ``ops`` (each waits for its turn's end) against a raw server; the events."""
    script = script or {"responses": [{"text": "Answered."}] * 3}
    recorder = testing.EventRecorder()
    with trio.fail_after(GUARD_S):
        async with open_raw_server(script, raw) as server:
            config = relay.Config(
                model="gpt-test",
                model_provider="hostile",
                model_providers={
                    "hostile": relay.ProviderConfig(
                        name="hostile",
                        base_url=server.base_url,
                        stream_max_retries=1,
                        request_max_retries=0,
                        stream_idle_timeout_ms=5_000,
                        **provider,
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
                for count, op in enumerate(ops, start=1):
                    await session.submit(op)
                    await recorder.wait_for(
                        lambda e: isinstance(e.msg, relay.TurnComplete | relay.TurnAborted), count
                    )
                await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)
    check_event_invariants(recorder.events, finished=True)
    return recorder.events


def stream_errors(events: list[relay.Event]) -> list[str]:
    return [e.msg.detail or "" for e in events if isinstance(e.msg, relay.StreamErrorEvent)]


def errors(events: list[relay.Event]) -> list[tuple[str, str]]:
    return [(e.msg.code, e.msg.message) for e in events if isinstance(e.msg, relay.ErrorEvent)]


def answers(events: list[relay.Event]) -> list[str]:
    return [e.msg.message for e in events if isinstance(e.msg, relay.AgentMessage)]


# ---------------------------------------------------------------------------- bounds


async def test_a_line_that_never_ends_is_a_stream_error_at_the_bound(tmp_path: Path) -> None:
    # 8 MiB of one `data:` line, in 64 KiB chunks; the bound is 1 MiB.
    endless = RawAnswer((b"data: ", *([b"x" * 65536] * 128)))
    events = await run_turns({1: endless}, tmp_path, turn("hi"), stream_max_line_bytes=MIB)
    assert stream_errors(events) == [
        "the model server sent a line longer than 1048576 bytes (stream_max_line_bytes)"
    ]
    assert answers(events) == ["Answered."]


async def test_an_event_of_many_lines_is_a_stream_error_at_the_bound(tmp_path: Path) -> None:
    lines = (b"data: " + b"y" * 1000 + b"\n") * 4000  # 4 MB in one event, no line over 1 KB
    huge = RawAnswer(tuple(lines[i : i + 65536] for i in range(0, len(lines), 65536)))
    events = await run_turns({1: huge}, tmp_path, turn("hi"), stream_max_event_bytes=MIB)
    assert stream_errors(events) == [
        "the model server sent an event larger than 1048576 bytes (stream_max_event_bytes)"
    ]
    assert answers(events) == ["Answered."]


async def test_a_gzip_bomb_is_a_stream_error_at_the_decompressed_bound(tmp_path: Path) -> None:
    # 64 MiB of keep-alive comments compress to about 64 KiB.
    bomb = gzip.compress(b": keep-alive\n" * (64 * MIB // 13), compresslevel=9)
    assert len(bomb) < MIB
    headers = (*SSE_HEADERS, ("content-encoding", "gzip"))
    answer = RawAnswer(tuple(bomb[i : i + 16384] for i in range(0, len(bomb), 16384)), 200, headers)
    events = await run_turns({1: answer}, tmp_path, turn("hi"), max_response_bytes=4 * MIB)
    assert stream_errors(events) == [
        "the model server's answer is larger than 4194304 bytes once decompressed "
        "(max_response_bytes)"
    ]
    assert answers(events) == ["Answered."]


async def test_a_compaction_answer_past_the_bound_is_an_error(tmp_path: Path) -> None:
    big = json.dumps({"output": [{"type": "compaction", "encrypted_content": "z" * (3 * MIB)}]})
    answer = RawAnswer((big.encode(),), 200, (("content-type", "application/json"),))
    events = await run_turns(
        {2: answer},
        tmp_path,
        turn("hi"),
        relay.Compact(),
        turn("again"),
        remote_compaction="v1",
        max_response_bytes=MIB,
    )
    ((code, message),) = errors(events)
    assert code == "stream"
    assert "larger than 1048576 bytes once decompressed" in message
    assert answers(events) == ["Answered.", "Answered."]


# ---------------------------------------------------------------------------- retry-after


async def test_a_long_retry_after_is_capped_and_the_wait_is_said(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"http_error": {"status": 429, "message": "Slow down.", "retry_after": 3600}},
            {"text": "Answered."},
        ]
    }
    start = trio.current_time()
    events = await run_turns({}, tmp_path, turn("hi"), script=script, max_retry_after_ms=300)
    assert trio.current_time() - start < GUARD_S
    assert stream_errors(events) == [
        "Slow down. (the server asked to wait 3600 s, more than the provider's "
        "max_retry_after_ms of 0.3 s); retrying in 0.3 s"
    ]
    assert answers(events) == ["Answered."]


async def test_a_retry_after_within_the_cap_is_honoured_and_said(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"http_error": {"status": 429, "message": "Slow down.", "retry_after": 0.2}},
            {"text": "Answered."},
        ]
    }
    events = await run_turns({}, tmp_path, turn("hi"), script=script)
    assert stream_errors(events) == ["Slow down.; retrying in 0.2 s"]


def test_the_default_cap_is_a_minute() -> None:
    assert relay.ProviderConfig(name="p").max_retry_after_ms == 60_000


# ---------------------------------------------------------------------------- not a stream


async def test_an_html_page_with_status_200_says_what_arrived(tmp_path: Path) -> None:
    page = b"<html><head><title>Sign in</title></head><body>Portal</body></html>"
    answer = RawAnswer((page,), 200, (("content-type", "text/html; charset=utf-8"),))
    events = await run_turns({1: answer}, tmp_path, turn("hi"))
    assert stream_errors(events) == [
        "the model server answered with text/html instead of an event stream (HTTP 200): "
        "<html><head><title>Sign in</title></head><body>Portal</body></html>"
    ]
    assert answers(events) == ["Answered."]


async def test_the_chat_wire_keeps_the_message_of_a_responses_style_error(
    tmp_path: Path,
) -> None:
    failed = {"type": "response.failed", "response": {"error": {"message": "Backend is down."}}}
    raw = {
        1: RawAnswer((sse(json.dumps({"message": "Overloaded, sorry."}), event="error"),)),
        2: RawAnswer((sse(json.dumps(failed)),)),
    }
    events = await run_turns(
        raw, tmp_path, turn("hi"), wire_api="chat", script={"responses": [{"text": "Answered."}]}
    )
    assert stream_errors(events) == ["Overloaded, sorry."]
    assert errors(events) == [("stream", "Backend is down.")]


# ---------------------------------------------------------------------------- a closed stdout


async def test_relay_run_whose_stdout_closes_shuts_down_and_exits_141(tmp_path: Path) -> None:
    """`relay run … | head -1`: the reader goes away while the second turn waits for the
    server; the session shuts down there (the third turn never starts) and relay exits with
    SIGPIPE's status."""
    script = {"responses": [{"text": "First."}, {"text": "Second."}, {"text": "Third."}]}
    ops = []
    for count, text in enumerate(["one", "two", "three"], start=1):
        ops.append({"op": {"type": "user_turn", "items": [{"type": "text", "text": text}]}})
        ops.append({"wait_for": {"type": "turn_complete", "count": count}})
    (tmp_path / "ops.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    with trio.fail_after(GUARD_S):
        async with open_raw_server(script, {}) as server:
            server.gates[2] = trio.Event()
            (tmp_path / "relay.toml").write_text(
                'model = "gpt-test"\nmodel_provider = "mock"\n[model_providers.mock]\n'
                f'base_url = "{server.base_url}"\n'
            )
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "relay", "run", "ops.jsonl", "--config", "relay.toml",
                 "--rollout-dir", "sessions"],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            assert process.stdout is not None and process.stderr is not None
            seen = b""
            while b'"type":"turn_complete"' not in seen:
                seen += await process.stdout.receive_some(65536)
            await process.stdout.aclose()  # the reader is gone
            server.gates[2].set()
            stderr = b""
            while chunk := await process.stderr.receive_some(65536):
                stderr += chunk
            status = await process.wait()
    assert status == 128 + signal.SIGPIPE, stderr
    assert b"standard output was closed; the session was shut down" in stderr
    assert b"Traceback" not in stderr
    (rollout,) = (tmp_path / "sessions").rglob("*.jsonl")
    events = [
        line["payload"]
        for line in map(json.loads, rollout.read_text().splitlines())
        if line["type"] == "event_msg"
    ]
    # The second turn's answer is one short reply: the first write after the gate opens fails,
    # and the shutdown that follows may find that turn still running (aborted) or just done.
    # Either way the third turn never starts and the session ends there.
    turns = [e["type"] for e in events if e["type"].startswith("turn_")]
    assert turns[:3] == ["turn_started", "turn_complete", "turn_started"]
    assert turns[3:] in (["turn_aborted"], ["turn_complete"])
    if turns[3] == "turn_aborted":
        assert events[-2].get("reason") == "shutdown"
    assert events[-1]["type"] == "shutdown_complete"
