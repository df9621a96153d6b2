"""Load: 200 sessions at once over one loopback mock server, with faults in 10 % of requests.

Every session talks to the same real server through its own openai SDK client: two turns (one
with a ``list_dir`` tool call), a compaction (local, remote V1, remote V2 or token budget, by
session), a third turn and ``shutdown``. The server plays one model script per session, chosen
by the model name each request carries, so that every session gets its own replies in its own
order however the requests of different sessions interleave. One reply slot in ten (chosen by
a fixed formula over the session and slot numbers) is preceded by a retryable fault: HTTP 500,
503, 429 with retry-after, a cut connection or ``response.failed``.

Every session must end with ``shutdown_complete``, keep the invariants of docs/reliability.md,
complete every turn with its answer, install exactly one compaction, report one ``stream_error``
per fault it met in a stream, and leave a rollout that reconstructs it. Afterwards the process has
the file descriptors and trio tasks it had before (counted in ``/proc/self/fd`` and in trio's
task tree).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base._tokens import ApproxEstimator
from relay._models._script import CompactReply, ModelScript, ReplyPlan, parse_model_script
from relay.testing import turn_ended
from tests.invariants import check_event_invariants
from tests.reliability._checks import check_rollout_matches, check_well_formed

pytestmark = pytest.mark.slow

SESSIONS = 200
KEY_ENV = "RELAY_LOAD_API_KEY"
API_KEY = "sk-load-canary-77aa"

#: Bound on the whole run; the test also reports how long it took.
GUARD_S = 120

BACKENDS = ("local", "remote_v1", "remote_v2", "token_budget")

FAULTS: tuple[dict[str, Any], ...] = (
    {"http_error": {"status": 500, "message": "load fault 500"}},
    {"http_error": {"status": 503, "message": "load fault 503"}},
    {"http_error": {"status": 429, "message": "load fault 429", "retry_after": 0.05}},
    {"text": "cut", "cut_after_events": 1},
    {"text": "failed", "stream_error": {"code": "server_error", "message": "load fault"}},
)
COMPACT_FAULT: dict[str, Any] = {"http_error": {"status": 500, "message": "load fault compact"}}


def faulty(session: int, slot: int) -> bool:
    """Whether reply slot ``slot`` of ``session`` is preceded by a fault (one in ten)."""
    return (session * 3 + slot) % 10 == 0


@attrs.frozen
class Plan:
    """One session's model script, and how many faults it holds."""

    script: dict[str, Any]
    stream_faults: int
    compact_faults: int
    slots: int


def plan(session: int) -> Plan:
    backend = BACKENDS[session % len(BACKENDS)]
    responses: list[dict[str, Any]] = []
    compact: list[dict[str, Any]] = []
    slots = 0
    stream_faults = 0
    compact_faults = 0

    def slot(reply: dict[str, Any], *, remote_compact: bool = False) -> None:
        nonlocal slots, stream_faults, compact_faults
        if faulty(session, slots):
            if remote_compact:
                compact.append(COMPACT_FAULT)
                compact_faults += 1
            else:
                responses.append(FAULTS[(session + slots) % len(FAULTS)])
                stream_faults += 1
        slots += 1
        (compact if remote_compact else responses).append(reply)

    slot({"text": f"hello from session {session}"})
    slot({"function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "ls"}})
    slot({"text": "two files"})
    match backend:
        case "local":
            slot({"text": f"summary of session {session}"})
        case "remote_v2":
            slot({"compaction": f"ENC-{session}"})
        case "remote_v1":
            slot(
                {"output": [{"type": "compaction", "encrypted_content": f"ENC-{session}"}]},
                remote_compact=True,
            )
        case _:
            pass
    slot({"text": "still here"})
    return Plan({"responses": responses, "compact": compact}, stream_faults, compact_faults, slots)


@attrs.define
class RoutedScript:
    """The mock server's script: one model script per session, chosen by the request's model."""

    scripts: dict[str, ModelScript]

    def plan(self, body: Mapping[str, Any], *, purpose: str = "turn") -> ReplyPlan:
        return self.scripts[str(body.get("model"))].plan(body, purpose=purpose)

    def plan_compact(self, body: Mapping[str, Any]) -> CompactReply:
        return self.scripts[str(body.get("model"))].plan_compact(body)


def session_config(index: int, base_url: str, root: Path) -> relay.Config:
    backend = BACKENDS[index % len(BACKENDS)]
    remote = {"remote_v1": "v1", "remote_v2": "v2"}.get(backend, "unsupported")
    return relay.Config(
        model=f"load-{index}",
        model_provider="mock",
        model_providers={
            "mock": relay.ProviderConfig(
                name="mock",
                base_url=base_url,
                env_key=KEY_ENV,
                remote_compaction=remote,  # type: ignore[arg-type]
                stream_max_retries=2,
                request_max_retries=1,
                stream_idle_timeout_ms=60_000,
            )
        },
        features=relay.Features(
            remote_compaction_v2=backend == "remote_v2", token_budget=backend == "token_budget"
        ),
        base_instructions="Answer briefly.",
        cwd=str(root / "work"),
        rollout=relay.RolloutConfig(enabled=True, dir=str(root / "sessions")),
    )


async def drive(index: int, base_url: str, root: Path, peaks: list[tuple[int, int]]) -> None:
    """One session's ops, then every check of it; ``peaks`` gets the counts mid-run."""
    ops: list[relay.Op] = [
        relay.UserTurn(items=[relay.Text("hello")]),
        relay.UserTurn(items=[relay.Text("list the files")]),
        relay.Compact(),
        relay.UserTurn(items=[relay.Text("are you still there?")]),
    ]
    async with (
        relay.open_session(
            session_config(index, base_url, root),
            clock=testing.fixed_clock,
            rng=random.Random(index),
            estimator=ApproxEstimator(),
        ) as session,
        testing.recording(session) as recorder,
    ):
        for done, op in enumerate(ops, start=1):
            await session.submit(op)
            await recorder.wait_for(turn_ended, done)
            if done == 2:
                peaks.append((open_fds(), trio_tasks()))
        await session.submit(relay.Shutdown())
        await recorder.wait_for(relay.ShutdownComplete)
    events = recorder.events
    expected = plan(index)
    check_event_invariants(events, finished=True)
    check_well_formed(session.history.items, settled=True)
    msgs = recorder.msgs
    assert not [m for m in msgs if isinstance(m, relay.ErrorEvent)], f"session {index}"
    completes = [m for m in msgs if isinstance(m, relay.TurnComplete)]
    assert len(completes) == len(ops), f"session {index}"
    answers = [m.last_agent_message for m in completes]
    assert answers[0] == f"hello from session {index}"
    assert answers[1] == "two files"
    assert answers[3] == "still here"
    tools = [
        m
        for m in msgs
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ToolCallItem)
    ]
    assert len(tools) == 1 and "notes.txt" in (tools[0].item.output or "")
    assert sum(isinstance(m, relay.ContextCompacted) for m in msgs) == 1
    retries = [m.detail for m in msgs if isinstance(m, relay.StreamErrorEvent)]
    assert len(retries) == expected.stream_faults, f"session {index}: {retries}"
    assert session.rollout is not None
    check_rollout_matches(session, session.rollout.path)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def trio_tasks() -> int:
    """Every task in trio's task tree."""
    count = 0
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        assert task is not None
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


async def settle(baseline: tuple[int, int]) -> tuple[int, int]:
    """The counts once the process is quiet: a server notices a client's close in its own
    time, so wait until every task has been blocked for a moment (at most a few times)."""
    with trio.move_on_after(20):
        while (open_fds(), trio_tasks()) != baseline:
            await trio.testing.wait_all_tasks_blocked(0.05)
    return open_fds(), trio_tasks()


async def test_200_sessions_over_one_server_with_faults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("notes\n")
    plans = {f"load-{i}": plan(i) for i in range(SESSIONS)}
    routed = RoutedScript({name: parse_model_script(p.script) for name, p in plans.items()})
    peaks: list[tuple[int, int]] = []
    started = trio.current_time()
    before = (open_fds(), trio_tasks())
    with trio.fail_after(GUARD_S):
        # Every request is checked for the key below: keep them all.
        async with testing.open_mock_server(keep_requests=None) as server:
            server.script = routed
            assert server.base_url is not None
            serving = (open_fds(), trio_tasks())
            async with trio.open_nursery() as nursery:
                for index in range(SESSIONS):
                    nursery.start_soon(drive, index, server.base_url, tmp_path, peaks)
            peak_requests = server.request_count
            after_sessions = await settle(serving)
        after = await settle(before)
    elapsed = trio.current_time() - started

    faults = sum(p.stream_faults + p.compact_faults for p in plans.values())
    assert peak_requests == sum(
        p.slots + p.stream_faults + p.compact_faults for p in plans.values()
    )
    assert 0.08 <= faults / peak_requests <= 0.12, (faults, peak_requests)
    # A leak is growth: a descriptor the process held before may be gone by now (a file some
    # library opened once and closed), but none may be added and no task may be left.
    assert after_sessions[0] <= serving[0] and after_sessions[1] == serving[1], (
        f"leak with the server up: {serving} -> {after_sessions}"
    )
    assert after[0] <= before[0] and after[1] == before[1], f"leak: {before} -> {after}"
    for rollout in (tmp_path / "sessions").rglob("*.jsonl"):
        assert API_KEY not in rollout.read_text(encoding="utf-8")
    assert API_KEY not in repr(server.requests)
    peak = (max(fds for fds, _ in peaks), max(tasks for _, tasks in peaks))
    print(
        f"{SESSIONS} sessions, {peak_requests} requests, {faults} faults; "
        f"(fds, trio tasks): before {before}, with the server {serving}, peak {peak}, "
        f"after the sessions {after_sessions}, after {after}; {elapsed:.1f} s"
    )
