"""Sessions on hosts for the block of one program (a session pool): parity with local
sessions, failover, load, bounds.

Every test runs on the one local Ray instance of ``conftest.py`` and opens its own pool. The
pool needs asyncio (Ray's futures are asyncio futures), so each test runs its own loop.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

import relay
from relay import SessionResumed
from relay._base._codec import type_tag
from relay._drive._op_script import parse_op_script
from relay._drive._runner import ScriptRunner
from relay._rollout._reader import EventMsgLine, read_rollout
from relay._rollout._resume import reconstruct
from relay.cluster import HostLostError, PooledSession, open_session_pool, run_op_script

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_async(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn, backend="asyncio")


async def eventually(probe: Callable[[], Awaitable[Any]], within_s: float = 60.0) -> Any:
    """The first true value of ``probe``, asked again until it comes (Ray gives no event)."""
    with anyio.fail_after(within_s):
        while True:  # a probe of Ray's state, which sends no event
            found = await probe()
            if found:
                return found
            await anyio.sleep(0.1)


async def new_hosts(pool: Any, known: list[str]) -> str | None:
    fresh = [host for host in await pool.hosts() if host not in known]
    return fresh[0] if fresh else None


def assert_numbered_on(events: list[relay.Event]) -> None:
    """Each event once, in order: by one from the last, but at a move (the new epoch's
    session_configured), where the numbers jump forward."""
    assert events[0].seq == 1
    for before, event in itertools.pairwise(events):
        if isinstance(event.msg, relay.SessionConfigured):
            assert event.seq > before.seq
        else:
            assert event.seq == before.seq + 1, (before, event)


def config_for(tmp_path: Path, model_script: Path | None = None) -> relay.Config:
    return relay.Config(
        model_script=str(model_script) if model_script else None,
        cwd=str(EXAMPLES),
        rollout=relay.RolloutConfig(dir=str(tmp_path / "sessions")),
    )


class Watcher:
    """Reads a pooled session's events and lets the test wait for one."""

    def __init__(self, session: PooledSession) -> None:
        self.session = session
        self.events: list[relay.Event] = []
        self._changed = anyio.Event()

    async def read(self) -> None:
        async for event in self.session.events():
            self.events.append(event)
            self._changed.set()
            self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[relay.Event], bool]) -> relay.Event:
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            await self._changed.wait()

    def types(self) -> list[str]:
        return [type_tag(type(event.msg)) for event in self.events]


def is_(cls: type, turn_id: str | None = None) -> Callable[[relay.Event], bool]:
    return lambda event: isinstance(event.msg, cls) and (turn_id is None or event.id == turn_id)


def turn(text: str, **kwargs: Any) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)], **kwargs)


# --------------------------------------------------------------------------- parity


SCRIPTS = [
    ("hello.jsonl", "hello.model.json"),
    ("interrupt.jsonl", "interrupt.model.json"),
    ("replace.jsonl", "replace.model.json"),
    ("compact.jsonl", None),
]


def test_events_through_the_pool_are_those_of_a_local_session(
    ray_address: str, tmp_path: Path
) -> None:
    local: dict[str, list[str]] = {}
    pooled: dict[str, list[str]] = {}

    async def main() -> None:
        for script, model in SCRIPTS:
            config = config_for(tmp_path, EXAMPLES / model if model else None)
            steps = parse_op_script((EXAMPLES / script).read_text(encoding="utf-8"))
            kinds = local.setdefault(script, [])
            async with relay.open_session(config) as session:
                runner = ScriptRunner(session, lambda _, msg, into=kinds: into.append(msg["type"]))
                await runner.run(steps)
        async with open_session_pool(2) as pool:
            for script, model in SCRIPTS:
                config = config_for(tmp_path, EXAMPLES / model if model else None)
                steps = parse_op_script((EXAMPLES / script).read_text(encoding="utf-8"))
                kinds = pooled.setdefault(script, [])
                async with pool.open_session(config) as session:
                    await run_op_script(
                        session,
                        steps,
                        lambda event, into=kinds: into.append(type_tag(type(event.msg))),
                    )

    run_async(main)
    for script, _ in SCRIPTS:
        assert pooled[script] == local[script], script
        assert pooled[script][-1] == "shutdown_complete"


# --------------------------------------------------------------------------- failover

NAP_SCRIPT = {
    "responses": [
        {"text": "first answer"},
        {"function_call": {"name": "sleep", "arguments": {"seconds": 3600}, "call_id": "nap"}},
    ]
}


def test_a_host_killed_mid_turn_moves_its_sessions_and_keeps_what_was_acknowledged(
    ray_address: str, tmp_path: Path
) -> None:
    model = tmp_path / "nap.model.json"
    model.write_text(json.dumps(NAP_SCRIPT), encoding="utf-8")
    config = config_for(tmp_path, model)
    before_kill: dict[str, int] = {}
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with (
            open_session_pool(3, config, host_cpus=0.5) as pool,
            AsyncExitStack() as stack,
        ):
            sessions = [await stack.enter_async_context(pool.open_session()) for _ in range(6)]
            hosts = [session.host for session in sessions]
            first_hosts = await pool.hosts()
            # Least loaded placement: the hosts take turns.
            assert hosts == first_hosts * 2 and len(set(hosts)) == 3
            watchers = [Watcher(session) for session in sessions]
            async with anyio.create_task_group() as tg:
                for watcher in watchers:
                    tg.start_soon(watcher.read)
                for n, (session, watcher) in enumerate(zip(sessions, watchers, strict=True)):
                    await session.submit(turn(f"question {n}"), id=f"a{n}")
                    await watcher.wait_for(is_(relay.TurnComplete, f"a{n}"))
                    await session.submit(turn(f"nap {n}"), id=f"b{n}")
                    await watcher.wait_for(
                        lambda e: (
                            isinstance(e.msg, relay.ItemStarted)
                            and isinstance(e.msg.item, relay.ToolCallItem)
                        )
                    )
                    await session.submit(turn(f"later {n}", on_busy="queue"), id=f"q{n}")
                victim = hosts[0]
                for session, watcher in zip(sessions, watchers, strict=True):
                    before_kill[session.id] = len(watcher.events)
                await pool.kill_host(victim)
                moved = [n for n, host in enumerate(hosts) if host == victim]
                for n in moved:
                    await watchers[n].wait_for(is_(SessionResumed))
                outcome["loads"] = await pool.loads()
                # The lost host is replaced (its node has room), and the replacement takes
                # the next session.
                added = await eventually(lambda: new_hosts(pool, first_hosts))
                async with pool.open_session() as extra:
                    assert extra.host == added
                for n in moved:
                    # The moved session accepts ops again; its turn ids never repeat.
                    follow_up = await sessions[n].submit(turn(f"again {n}"))
                    assert follow_up not in {f"a{n}", f"b{n}", f"q{n}"}
                    await watchers[n].wait_for(is_(relay.TurnComplete, follow_up))
                    await sessions[n].shutdown()
                outcome["moved"] = moved
                outcome["victim"] = victim
                outcome["new_hosts"] = {n: sessions[n].host for n in moved}
                for n in range(6):
                    if n not in moved:
                        await sessions[n].submit(relay.Interrupt())
                        await watchers[n].wait_for(is_(relay.TurnAborted, f"b{n}"))
                        await sessions[n].shutdown()
            outcome["watchers"] = watchers

    run_async(main)
    watchers: list[Watcher] = outcome["watchers"]
    assert outcome["moved"] == [0, 3]
    # The moved sessions spread over the live hosts by load.
    survivors = sorted(h for h in outcome["loads"] if outcome["loads"][h])
    assert {h: outcome["loads"][h] for h in survivors} == {survivors[0]: 3, survivors[1]: 3}
    assert sorted(outcome["new_hosts"].values()) == survivors
    for n, watcher in enumerate(watchers):
        session = watcher.session
        events = watcher.events
        # One stream across hosts: numbered on, in order, each event once; a move skips
        # the numbers the lost host may have given out.
        assert_numbered_on(events)
        after = events[before_kill[session.id] :]
        if n not in outcome["moved"]:
            assert not any(isinstance(e.msg, SessionResumed) for e in events)
            aborted = [e.msg for e in after if isinstance(e.msg, relay.TurnAborted)]
            assert [(m.turn_id, m.reason) for m in aborted] == [
                (f"b{n}", relay.AbortReason.INTERRUPTED)
            ]
            assert isinstance(after[-1].msg, relay.ShutdownComplete)
            continue
        reported = [
            e for e in after if not isinstance(e.msg, relay.WarningEvent | relay.SessionConfigured)
        ][:2]
        assert reported[0].msg == relay.TurnAborted(
            f"b{n}", relay.AbortReason.HOST_LOST, reported[0].msg.duration_ms
        )
        assert reported[1].msg == SessionResumed(
            lost_host=outcome["victim"],
            host=outcome["new_hosts"][n],
            aborted_turn=f"b{n}",
            unhandled=(f"q{n}",),
            downtime_ms=reported[1].msg.downtime_ms,
        )
        # Nothing is redone behind the caller's back.
        started = [e.msg.turn_id for e in events if isinstance(e.msg, relay.TurnStarted)]
        assert started.count(f"b{n}") == 1 and f"q{n}" not in started

        # Everything the caller saw end before the loss is in the rollout.
        assert session.rollout_path is not None
        rollout = read_rollout(session.rollout_path)
        ended = [
            line.msg
            for line in rollout.lines
            if isinstance(line, EventMsgLine)
            and isinstance(line.msg, relay.TurnComplete | relay.TurnAborted)
        ]
        seen_ended = [
            e.msg
            for e in events[: before_kill[session.id]]
            if isinstance(e.msg, relay.TurnComplete)
        ]
        assert seen_ended and all(msg in ended for msg in seen_ended)
        assert reported[0].msg in ended
        history = reconstruct(read_rollout(session.rollout_path, for_resume=True)).history
        texts = [item.text() for item in history if isinstance(item, relay.Message)]
        assert f"question {n}" in texts and "first answer" in texts
        assert f"again {n}" in texts


# --------------------------------------------------------------------------- load

TWO_TURNS = """\
{"op": {"type": "user_turn", "items": [{"type": "text", "text": "one"}]}}
{"wait_for": {"type": "turn_complete"}}
{"op": {"type": "user_turn", "items": [{"type": "text", "text": "two"}]}}
{"wait_for": {"type": "turn_complete", "count": 2}}
"""


def test_two_hosts_run_two_hundred_scripted_sessions(ray_address: str, tmp_path: Path) -> None:
    steps = parse_op_script(TWO_TURNS)
    streams: list[list[str]] = []
    placed: list[str] = []
    rollouts: list[str | None] = []

    async def main() -> None:
        async with open_session_pool(2, config_for(tmp_path)) as pool:

            async def one() -> None:
                kinds: list[str] = []
                streams.append(kinds)
                async with pool.open_session() as session:
                    placed.append(session.host)
                    rollouts.append(session.rollout_path)
                    await run_op_script(
                        session, steps, lambda event: kinds.append(type_tag(type(event.msg)))
                    )

            async with anyio.create_task_group() as tg:
                for _ in range(200):
                    tg.start_soon(one)

    run_async(main)
    assert len(streams) == 200
    for kinds in streams:
        assert kinds.count("turn_complete") == 2 and kinds[-1] == "shutdown_complete"
    assert len(set(placed)) == 2
    assert len(set(rollouts)) == 200
    for path in rollouts:
        assert path is not None
        last = json.loads(Path(path).read_text(encoding="utf-8").splitlines()[-1])
        assert last["payload"]["type"] == "shutdown_complete"


def test_a_session_pool_needs_a_host(ray_address: str) -> None:
    async def main() -> None:
        with pytest.raises(relay.ConfigError, match="at least one host"):
            async with open_session_pool(0):
                pass

    run_async(main)


def test_an_op_submitted_as_its_host_dies_is_refused_or_reported_never_dropped(
    ray_address: str, tmp_path: Path
) -> None:
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with open_session_pool(2, config_for(tmp_path)) as pool:
            async with pool.open_session() as session:
                watcher = Watcher(session)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watcher.read)
                    await pool.kill_host(session.host)
                    try:
                        await session.submit(turn("are you there?"), id="late")
                    except HostLostError:
                        outcome["refused"] = True
                    resumed = await watcher.wait_for(is_(SessionResumed))
                    outcome["resumed"] = resumed.msg
                    await session.shutdown()
            outcome["events"] = watcher.events

    run_async(main)
    resumed = outcome["resumed"]
    if outcome.get("refused"):
        assert (resumed.aborted_turn, resumed.unhandled) == (None, ())
    else:
        # Accepted by the dying host: reported as lost, whether or not it had started.
        assert (resumed.aborted_turn, resumed.unhandled) in {("late", ()), (None, ("late",))}
    started = [e.id for e in outcome["events"] if isinstance(e.msg, relay.TurnStarted)]
    assert started.count("late") <= 1


def test_a_host_forgets_a_caller_that_went_silent_and_keeps_the_live_one(
    ray_address: str, tmp_path: Path
) -> None:
    """Ray does not end a stream whose caller died: the host forgets a caller it has not heard
    from for three leases, with what waited for it; a live caller renews its place."""
    outcome: dict[str, Any] = {}

    async def main() -> None:
        # Two seconds: short, for a quick test, and long enough that a loaded machine does not
        # lose the host to a late renewal before the session opens.
        async with open_session_pool(1, config_for(tmp_path), lease_s=2.0) as pool:
            async with pool.open_session() as session:
                watcher = Watcher(session)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watcher.read)
                    host = pool.client.host_handle(session.host)
                    # A caller that follows the session, starts its stream, and dies: it never
                    # reads and never renews.
                    await host.follow.remote("dead-caller", session.id, session.epoch, None)
                    dead_stream = host.stream.remote("dead-caller")
                    turn_id = await session.submit(turn("one"))
                    await watcher.wait_for(is_(relay.TurnComplete, turn_id))
                    outcome["before"] = await host.callers.remote()
                    outcome["after"] = await eventually(
                        lambda: _fewer_than(host, outcome["before"]), within_s=30
                    )
                    # The live caller kept its place: its events still come.
                    turn_id = await session.submit(turn("two"))
                    await watcher.wait_for(is_(relay.TurnComplete, turn_id))
                    outcome["live"] = await host.callers.remote()
                    del dead_stream
                    await session.shutdown()
            outcome["events"] = watcher.events

    run_async(main)
    assert outcome["before"] == 2
    assert outcome["after"] == 1
    assert outcome["live"] == 1
    assert_numbered_on(outcome["events"])


async def _fewer_than(host: Any, count: int) -> int | None:
    now: int = await host.callers.remote()
    return now if now < count else None
