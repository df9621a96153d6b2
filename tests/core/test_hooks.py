"""Compaction hooks (docs/compaction.md): commands and callables, their outcomes, what they stop.

A hook command's timeout runs on the wall clock (its guard keeps it), and relay holds an
``autojump_clock`` while it waits on the command, so hook commands run under either clock.
Callable hooks run in virtual time.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._core._hooks import CompactHook, HookInput, HookStop, run_hook_command
from relay._core._summary import is_summary
from relay.testing import turn_ended
from tests.escapees import TAKE_LOCK, alive, escape_argv, wait_gone

NO_ROLLOUT = relay.RolloutConfig(enabled=False)
CANARY = "sk-canary-4f1d0c9e-never-leaks"

INFO = HookInput(
    session_id="s-1",
    turn_id="t-1",
    cwd=os.getcwd(),
    rollout_path=None,
    model="scripted",
    trigger="manual",
    event="pre_compact",
)


def python(code: str, *args: str, timeout_ms: int = 10_000) -> relay.HookCommand:
    """A hook command that runs ``code`` with this interpreter."""
    return relay.HookCommand([sys.executable, "-c", code, *args], timeout_ms=timeout_ms)


STOP = python('import json; print(json.dumps({"decision": "stop", "reason": "not now"}))')
GO_ON = python("import sys; sys.stdin.read()")
HANG = "import time; time.sleep(60)"


async def run(t: testing.TestSession, *ops: relay.Op) -> None:
    done = sum(turn_ended(e) for e in t.recorder.events)
    for op in ops:
        await t.submit(op)
        done += 1
        await t.wait_for(turn_ended, done)


def hooks_config(**fields: Any) -> relay.Config:
    return relay.Config(hooks=relay.Hooks(**fields), rollout=NO_ROLLOUT)


def types(msgs: list[relay.EventMsg]) -> list[str]:
    return [relay.lowlevel.to_json(m)["type"] for m in msgs]


def turn_msgs(t: testing.TestSession, turn_id: str) -> list[relay.EventMsg]:
    return [e.msg for e in t.recorder.events if e.id == turn_id]


# ----------------------------------------------------------------------------- commands


async def test_a_command_that_exits_zero_lets_the_compaction_go_on() -> None:
    assert (await run_hook_command(GO_ON, INFO)).outcome == "continue"
    printed = python("print('compaction is fine by me')")
    assert (await run_hook_command(printed, INFO)).outcome == "continue"
    other = python('print(\'{"decision": "allow"}\')')
    assert (await run_hook_command(other, INFO)).outcome == "continue"


async def test_a_command_stops_with_a_json_decision() -> None:
    result = await run_hook_command(STOP, INFO)
    assert (result.outcome, result.reason) == ("stop", "not now")


@pytest.mark.parametrize(
    "printed",
    [
        "'[' * 60000",
        '\'{"decision": "stop", "reason": NaN}\'',
        "'{\"decision\": \"stop\", \"n\": ' + '9' * 5000 + '}'",
    ],
    ids=["nested too deeply", "NaN", "a 5,000-digit integer"],
)
async def test_what_python_cannot_read_as_json_lets_the_compaction_go_on(printed: str) -> None:
    # Not a decision relay can read, so not a stop; and never an exception out of the hook.
    result = await run_hook_command(python(f"import sys; sys.stdout.write({printed})"), INFO)
    assert (result.outcome, result.problem) == ("continue", "")


async def test_a_command_reads_the_input_as_json(tmp_path: Path) -> None:
    sink = tmp_path / "input.json"
    hook = python("import sys; open(sys.argv[1], 'w').write(sys.stdin.read())", str(sink))
    assert (await run_hook_command(hook, INFO)).outcome == "continue"
    assert json.loads(sink.read_text()) == {
        "session_id": "s-1",
        "turn_id": "t-1",
        "cwd": os.getcwd(),
        "rollout_path": None,
        "model": "scripted",
        "trigger": "manual",
        "event": "pre_compact",
    }


async def test_a_command_runs_without_a_shell_in_the_turns_directory(tmp_path: Path) -> None:
    sink = tmp_path / "argv.json"
    hook = python(
        "import json, os, sys; json.dump([os.getcwd(), sys.argv[2]], open(sys.argv[1], 'w'))",
        str(sink),
        "$HOME; echo hi",
    )
    info = HookInput(**{**INFO.to_json(), "cwd": str(tmp_path)})
    assert (await run_hook_command(hook, info)).outcome == "continue"
    assert json.loads(sink.read_text()) == [str(tmp_path), "$HOME; echo hi"]


async def test_a_crashing_command_fails() -> None:
    crash = python("import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    result = await run_hook_command(crash, INFO)
    assert (result.outcome, result.problem) == ("failed", "exited with status 3 (boom)")
    # A stop printed by a command that then fails is not a decision.
    failing_stop = python('print(\'{"decision": "stop"}\'); raise SystemExit(1)')
    assert (await run_hook_command(failing_stop, INFO)).outcome == "failed"


async def test_a_command_under_a_virtual_clock_has_its_whole_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = python("import sys, time; sys.stdin.read(); time.sleep(0.1)", timeout_ms=10_000)
    hanging = python(HANG, timeout_ms=200)
    assert (await run_hook_command(slow, INFO)).outcome == "continue"
    assert (await run_hook_command(hanging, INFO)).problem == "did not finish within 200 ms"


async def test_a_command_that_cannot_start_fails(tmp_path: Path) -> None:
    missing = relay.HookCommand([str(tmp_path / "no-such-hook")])
    result = await run_hook_command(missing, INFO)
    assert result.outcome == "failed"
    assert result.problem.startswith("could not start")


async def test_a_hanging_command_is_killed_with_its_process_group(tmp_path: Path) -> None:
    report = tmp_path / "child"
    # The command and its child share a lock, taken before the child starts: it goes when
    # both have ended.
    spawner = python(
        TAKE_LOCK + "import subprocess, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {HANG!r}], pass_fds=[lock])\n"
        "open(sys.argv[1], 'w').write('started')\n"
        "time.sleep(60)\n",
        str(report),
        timeout_ms=1000,
    )
    started = trio.current_time()
    result = await run_hook_command(spawner, INFO)
    elapsed = trio.current_time() - started
    assert (result.outcome, result.problem) == ("timeout", "did not finish within 1000 ms")
    assert 1.0 <= elapsed < 10
    assert report.read_text() == "started"  # the child had started, holding the lock
    await wait_gone(report)


async def test_a_stop_is_decided_on_exit_though_a_child_still_holds_stdout(
    tmp_path: Path,
) -> None:
    report = tmp_path / "child"
    stops_and_leaves_a_child = python(
        TAKE_LOCK + "import json, subprocess\n"
        f"subprocess.Popen([sys.executable, '-c', {HANG!r}], pass_fds=[lock])\n"
        "open(sys.argv[1], 'w').write('started')\n"
        "print(json.dumps({'decision': 'stop', 'reason': 'busy'}), flush=True)\n",
        str(report),
        timeout_ms=5000,
    )
    result = await run_hook_command(stops_and_leaves_a_child, INFO)
    assert (result.outcome, result.reason) == ("stop", "busy")
    assert report.read_text() == "started"
    await wait_gone(report)


async def test_a_detached_child_of_a_hook_that_exited_does_not_survive(tmp_path: Path) -> None:
    report = tmp_path / "child"
    detaches = python(
        TAKE_LOCK + "import subprocess\n"
        f"subprocess.Popen([sys.executable, '-c', {HANG!r}], stdin=subprocess.DEVNULL,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=[lock])\n"
        "open(sys.argv[1], 'w').write('started')\n",
        str(report),
    )
    assert (await run_hook_command(detaches, INFO)).outcome == "continue"
    assert report.read_text() == "started"
    await wait_gone(report)


# ----------------------------------------------------------------------------- in a session


async def test_a_pre_compact_stop_aborts_the_task_and_changes_nothing() -> None:
    async with testing.open_test_session(config=hooks_config(pre_compact=[STOP])) as t:
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        before = list(t.session.history.items)
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
        assert list(t.session.history.items) == before
        assert t.session.snapshot().window_number == 0
    msgs = turn_msgs(t, "c1")
    assert types(msgs) == [
        "turn_started",
        "hook_started",
        "hook_completed",
        "background_event",
        "turn_aborted",
    ]
    started, completed, note, aborted = msgs[1:]
    assert isinstance(started, relay.HookStarted) and started.event == "pre_compact"
    assert isinstance(completed, relay.HookCompleted)
    assert (completed.hook, completed.event, completed.outcome) == (
        started.hook,
        "pre_compact",
        "stop",
    )
    assert completed.duration_ms >= 0
    assert started.hook == shlex.join(STOP.command)
    assert isinstance(note, relay.BackgroundEvent) and note.message.endswith(": not now")
    assert aborted == relay.TurnAborted("c1", relay.AbortReason.HOOK_STOPPED, aborted.duration_ms)
    assert len(t.model.requests) == 1


async def test_a_post_compact_stop_keeps_the_compaction_installed() -> None:
    cfg = hooks_config(pre_compact=[GO_ON], post_compact=[STOP])
    async with testing.open_test_session(config=cfg) as t:
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
        history = list(t.session.history.items)
        assert t.session.snapshot().window_number == 1
    assert is_summary(history[-1])
    msgs = turn_msgs(t, "c1")
    assert types(msgs) == [
        "turn_started",
        "hook_started",
        "hook_completed",
        "item_started",
        "token_count",
        "item_completed",
        "context_compacted",
        "warning",
        "hook_started",
        "hook_completed",
        "background_event",
        "turn_aborted",
    ]
    outcomes = [(m.event, m.outcome) for m in msgs if isinstance(m, relay.HookCompleted)]
    assert outcomes == [("pre_compact", "continue"), ("post_compact", "stop")]
    assert msgs[-1].reason is relay.AbortReason.HOOK_STOPPED  # type: ignore[union-attr]


async def test_a_hanging_hook_is_cut_at_its_timeout_with_a_warning() -> None:
    cfg = hooks_config(pre_compact=[python(HANG, timeout_ms=500)])
    async with testing.open_test_session(config=cfg) as t:
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        with trio.fail_after(20):
            await t.wait_for(turn_ended, 2)
    msgs = turn_msgs(t, "c1")
    assert types(msgs)[:5] == [
        "turn_started",
        "hook_started",
        "hook_completed",
        "warning",
        "item_started",
    ]
    assert types(msgs)[-1] == "turn_complete"
    completed, warning = msgs[2], msgs[3]
    assert isinstance(completed, relay.HookCompleted) and completed.outcome == "timeout"
    assert 500 <= completed.duration_ms < 10_000
    assert isinstance(warning, relay.WarningEvent)
    assert "did not finish within 500 ms" in warning.message
    assert t.session.snapshot().window_number == 1


async def test_interrupting_a_running_hook_kills_it(tmp_path: Path) -> None:
    # The hook takes its lock, then says so through a FIFO, which the test reads without
    # polling.
    ready = tmp_path / "ready"
    os.mkfifo(ready)
    hook = python(TAKE_LOCK + f"open(sys.argv[1], 'w').write('held\\n'); {HANG}", str(ready))
    async with (
        trio.lowlevel.FdStream(os.open(ready, os.O_RDWR | os.O_NONBLOCK)) as said,
        testing.open_test_session(config=hooks_config(pre_compact=[hook])) as t,
    ):
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        with trio.fail_after(10):
            assert await said.receive_some() == b"held\n"
        assert alive(ready)
        await t.submit(relay.Interrupt())
        await t.wait_for(turn_ended, 2)
        await wait_gone(ready, 5)
    msgs = turn_msgs(t, "c1")
    assert types(msgs) == ["turn_started", "hook_started", "turn_aborted"]
    assert msgs[-1].reason is relay.AbortReason.INTERRUPTED  # type: ignore[union-attr]
    assert t.session.snapshot().window_number == 0


async def test_a_crashing_hook_warns_and_the_compaction_goes_on() -> None:
    cfg = hooks_config(pre_compact=[python("raise SystemExit(2)"), STOP])
    async with testing.open_test_session(config=cfg) as t:
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
    msgs = turn_msgs(t, "c1")
    outcomes = [m.outcome for m in msgs if isinstance(m, relay.HookCompleted)]
    assert outcomes == ["failed", "stop"]
    (warning,) = [m for m in msgs if isinstance(m, relay.WarningEvent)]
    assert "exited with status 2" in warning.message


# ----------------------------------------------------------------------------- callables


async def test_callable_hooks_run_after_commands_and_a_stop_skips_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[HookInput] = []

    async def veto(info: HookInput) -> HookStop | None:
        seen.append(info)
        return HookStop("busy")

    async def never(info: HookInput) -> HookStop | None:
        raise AssertionError("a hook after a stop must not run")

    async with testing.open_test_session() as t:
        t.session.register_hook(CompactHook("pre_compact", veto))
        t.session.register_hook(CompactHook("pre_compact", never, name="never"))
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
    msgs = turn_msgs(t, "c1")
    assert types(msgs) == [
        "turn_started",
        "hook_started",
        "hook_completed",
        "background_event",
        "turn_aborted",
    ]
    assert msgs[1] == relay.HookStarted(veto.__qualname__, "pre_compact")
    assert [(i.turn_id, i.trigger, i.event) for i in seen] == [("c1", "manual", "pre_compact")]


async def test_a_hanging_callable_is_cancelled_at_exactly_its_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def hang(info: HookInput) -> HookStop | None:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def crash(info: HookInput) -> HookStop | None:
        raise ValueError("bad hook")

    async with testing.open_test_session() as t:
        t.session.register_hook(CompactHook("post_compact", hang, timeout_ms=2500))
        t.session.register_hook(CompactHook("post_compact", crash, name="crash"))
        await run(t, relay.UserTurn(items=[relay.Text("hi")]))
        await t.submit(relay.Compact(), id="c1")
        await t.wait_for(turn_ended, 2)
    msgs = turn_msgs(t, "c1")
    completed = [m for m in msgs if isinstance(m, relay.HookCompleted)]
    assert [(m.hook, m.outcome, m.duration_ms) for m in completed] == [
        (hang.__qualname__, "timeout", 2500),
        ("crash", "failed", 0),
    ]
    warnings = [m.message for m in msgs if isinstance(m, relay.WarningEvent)]
    assert warnings[1:] == [
        f"post_compact hook {hang.__qualname__!r} did not finish within 2500 ms; "
        "going on without it",
        "post_compact hook 'crash' raised ValueError: bad hook; going on without it",
    ]
    assert types(msgs)[-1] == "turn_complete"


async def test_an_auto_compaction_stopped_by_a_hook_ends_the_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[str] = []

    async def veto(info: HookInput) -> HookStop | None:
        seen.append(info.trigger)
        return HookStop("no auto compaction here")

    script = {"responses": [{"function_call": {"name": "sleep", "arguments": {"seconds": 0}}}]}
    cfg = relay.Config(model_auto_compact_token_limit=1, rollout=NO_ROLLOUT)
    async with testing.open_test_session(script, config=cfg) as t:
        t.session.register_hook(CompactHook("pre_compact", veto))
        await t.submit(relay.UserTurn(items=[relay.Text("hi")]), id="t1")
        await t.wait_for(turn_ended)
    assert seen == ["auto"]
    assert len(t.model.requests) == 1
    msgs = turn_msgs(t, "t1")
    assert not [
        m
        for m in msgs
        if isinstance(m, relay.ItemStarted) and isinstance(m.item, relay.ContextCompactionItem)
    ]
    assert isinstance(msgs[-1], relay.TurnAborted)
    assert msgs[-1].reason is relay.AbortReason.HOOK_STOPPED


# ----------------------------------------------------------------------------- secrets


async def test_hook_input_never_carries_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_CANARY_KEY", CANARY)
    sink = tmp_path / "inputs.jsonl"
    record = python("import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')", str(sink))
    script = {"responses": [{"text": "a1"}, {"text": "summary"}]}
    async with testing.open_mock_server(script) as server:
        cfg = relay.Config(
            model="gpt-test",
            model_provider="canary",
            model_providers={
                "canary": relay.ProviderConfig(
                    name="canary", base_url=server.base_url, env_key="RELAY_CANARY_KEY"
                )
            },
            hooks=relay.Hooks(pre_compact=[record], post_compact=[record]),
            rollout=relay.RolloutConfig(enabled=True, dir=str(tmp_path / "sessions")),
            cwd=str(tmp_path),
        )
        async with relay.open_session(cfg, clock=testing.fixed_clock) as session:
            recorder = testing.EventRecorder()
            async with anyio.create_task_group() as tg:
                tg.start_soon(recorder.consume, session)
                await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
                await recorder.wait_for(turn_ended)
                await session.submit(relay.Compact(), id="c1")
                await recorder.wait_for(turn_ended, 2)
                await session.submit(relay.Shutdown())
            rollout_path = session.rollout.path  # type: ignore[union-attr]
    raw = sink.read_text()
    assert CANARY not in raw
    inputs = [json.loads(line) for line in raw.splitlines()]
    assert inputs == [
        {
            "session_id": session.id,
            "turn_id": "c1",
            "cwd": str(tmp_path),
            "rollout_path": str(rollout_path),
            "model": "gpt-test",
            "trigger": "manual",
            "event": event,
        }
        for event in ("pre_compact", "post_compact")
    ]
    # The model server did get the key; nothing the session wrote or reported holds it.
    rollout = rollout_path.read_text()
    assert CANARY not in rollout
    assert CANARY not in json.dumps(recorder.json())
    recorded = [
        json.loads(line)["payload"]
        for line in rollout.splitlines()
        if json.loads(line)["type"] == "event_msg"
    ]
    assert [(r["event"], r["outcome"]) for r in recorded if r["type"] == "hook_completed"] == [
        ("pre_compact", "continue"),
        ("post_compact", "continue"),
    ]


async def test_what_hook_commands_print_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook that knows the key (from a file of its own, say) and prints it: its warning and its
    stop reason reach events and the rollout redacted."""
    monkeypatch.setenv("RELAY_CANARY_KEY", CANARY)
    key_file = tmp_path / "key.txt"
    key_file.write_text(CANARY)
    fails = python(
        "import pathlib, sys; key = pathlib.Path(sys.argv[1]).read_text()\n"
        "sys.stderr.write(f'denied for {key}\\n'); sys.exit(3)",
        str(key_file),
    )
    stops = python(
        "import json, pathlib, sys; key = pathlib.Path(sys.argv[1]).read_text()\n"
        "print(json.dumps({'decision': 'stop', 'reason': f'key {key} expired'}))",
        str(key_file),
    )

    script = {"responses": [{"text": "a1"}]}
    async with testing.open_mock_server(script) as server:
        cfg = relay.Config(
            model="gpt-test",
            model_provider="canary",
            model_providers={
                "canary": relay.ProviderConfig(
                    name="canary", base_url=server.base_url, env_key="RELAY_CANARY_KEY"
                )
            },
            hooks=relay.Hooks(pre_compact=[fails, stops]),
            rollout=relay.RolloutConfig(enabled=True, dir=str(tmp_path / "sessions")),
            cwd=str(tmp_path),
        )
        async with relay.open_session(cfg, clock=testing.fixed_clock) as session:
            recorder = testing.EventRecorder()
            async with anyio.create_task_group() as tg:
                tg.start_soon(recorder.consume, session)
                await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
                await recorder.wait_for(turn_ended)
                await session.submit(relay.Compact(), id="c1")
                await recorder.wait_for(turn_ended, 2)
                await session.submit(relay.Shutdown())
            rollout_path = session.rollout.path  # type: ignore[union-attr]
    events = json.dumps(recorder.json())
    # Both hooks ran and were reported: the failure, then the stop.
    assert "denied for [redacted]" in events and "key [redacted] expired" in events
    assert CANARY not in events
    assert CANARY not in rollout_path.read_text()


async def test_a_raising_callable_hook_is_reported_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_CANARY_KEY", CANARY)

    async def raises(info: HookInput) -> HookStop | None:
        raise RuntimeError(f"cannot use {CANARY}")

    script = {"responses": [{"text": "a1"}, {"text": "summary"}]}
    async with testing.open_mock_server(script) as server:
        cfg = relay.Config(
            model="gpt-test",
            model_provider="canary",
            model_providers={
                "canary": relay.ProviderConfig(
                    name="canary", base_url=server.base_url, env_key="RELAY_CANARY_KEY"
                )
            },
            rollout=NO_ROLLOUT,
            cwd=str(tmp_path),
        )
        hook = CompactHook("pre_compact", raises, name="raises")
        async with relay.open_session(cfg, clock=testing.fixed_clock, hooks=[hook]) as session:
            recorder = testing.EventRecorder()
            async with anyio.create_task_group() as tg:
                tg.start_soon(recorder.consume, session)
                await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
                await recorder.wait_for(turn_ended)
                await session.submit(relay.Compact(), id="c1")
                await recorder.wait_for(turn_ended, 2)
                await session.submit(relay.Shutdown())
    events = json.dumps(recorder.json())
    assert "cannot use [redacted]" in events
    assert CANARY not in events


@pytest.mark.parametrize("flags", [(), ("hold",)])
async def test_a_grandchild_of_a_hook_that_left_the_session_does_not_survive(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    report = tmp_path / "escapee.pid"
    hook = relay.HookCommand(escape_argv(str(report), *flags))
    result = await run_hook_command(hook, INFO)
    assert report.read_text().strip().isdigit()  # the grandchild had left, holding the lock
    await wait_gone(report)
    # Decided when the hook exited, though the grandchild held its output open (``hold``).
    assert result.outcome == "continue"


async def test_a_grandchild_of_a_hook_that_left_the_session_goes_at_the_timeout(
    tmp_path: Path,
) -> None:
    report = tmp_path / "escapee.pid"
    hook = relay.HookCommand(escape_argv(str(report), "wait"), timeout_ms=500)
    result = await run_hook_command(hook, INFO)
    assert report.read_text().strip().isdigit()  # the grandchild had left, holding the lock
    await wait_gone(report)
    assert result.outcome == "timeout"
