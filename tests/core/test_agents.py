"""Sub-agents in a session: spawn, wait, input, close, resume, the cancellation tree, limits,
roles, decisions that go down the tree and usage that rolls up (docs/agents.md). The rules
alone are in tests/core/test_agent_rules.py; the tree under random interrupts, closes, failures
and crashes in tests/reliability/test_agent_tree.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

import relay
import relay.lowlevel
from relay import testing


def tree_config(tmp_path: Path | None = None, **changes: Any) -> relay.Config:
    agents = changes.pop("agents", relay.AgentsConfig(max_depth=3))
    return relay.Config(
        features=relay.Features(multi_agent=True),
        rollout=relay.RolloutConfig(enabled=tmp_path is not None, dir=str(tmp_path or "")),
        agents=agents,
        **changes,
    )


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def output_of(session: relay.Session, call_id: str) -> Any:
    (output,) = [
        item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput) and item.call_id == call_id
    ]
    try:
        return json.loads(output)
    except ValueError:
        return output


def of_agent(t: testing.TestSession, path: str | None, kind: type) -> list[Any]:
    """The messages of ``kind`` from the agent at ``path`` (None: the root's own)."""
    return [
        event.msg
        for event in t.recorder.events
        if isinstance(event.msg, kind)
        and (event.agent.path if event.agent is not None else None) == path
    ]


def root_done(event: relay.Event) -> bool:
    """Whether ``event`` is the root's own ``turn_complete`` (a child's is not)."""
    return isinstance(event.msg, relay.TurnComplete) and event.agent is None


def ended(t: testing.TestSession) -> list[relay.protocol.SubAgentEnded]:
    return [
        event.msg
        for event in t.recorder.events
        if isinstance(event.msg, relay.protocol.SubAgentEnded)
    ]


def paths_requested(model: testing.ScriptedModel) -> list[str | None]:
    return [prompt.agent_path for prompt in model.prompts]


# ------------------------------------------------------------------ spawn and wait


async def test_a_child_runs_its_task_and_the_parent_reads_its_answer_in_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="count the files"),
            call("wait", "c2", ids=["/root/1"]),
            "The child counted them.",
        ],
        "agents": {"/root/1": {"responses": [{"text": "There are 3.", "delay_ms": 500}]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        (child_id,) = t.session.agents.children
        assert output_of(t.session, "c1") == {"agent_id": child_id, "nickname": None}
        assert output_of(t.session, "c2") == {
            "status": {child_id: {"completed": "There are 3."}},
            "timed_out": False,
        }
        (spawned,) = of_agent(t, None, relay.protocol.SubAgentSpawned)
        assert (spawned.agent_id, spawned.path, spawned.depth) == (child_id, "/root/1", 1)
        assert spawned.parent_id == t.session.id and spawned.role == "default"
        assert spawned.prompt == "count the files"
        assert ended(t) == [
            relay.protocol.SubAgentEnded(
                child_id, "/root/1", relay.protocol.AgentStatus.COMPLETED, "There are 3."
            )
        ]
        # The child's own events reach the root's stream, marked with the child.
        child_turns = of_agent(t, "/root/1", relay.TurnComplete)
        assert [turn.last_agent_message for turn in child_turns] == ["There are 3."]
        # The child's request is its own: its history starts with the task it was given.
        child_request = t.model.requests[paths_requested(t.model).index("/root/1")]
        assert testing.user_texts(child_request)[-1] == "count the files"
        assert t.model.prompts[paths_requested(t.model).index("/root/1")].prompt_cache_key == (
            child_id
        )


async def test_the_calls_are_reported_as_agent_call_items_with_their_receivers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="look"),
            call("wait", "c2", ids=["/root/1"], timeout_ms=60_000),
            "ok",
        ],
        "agents": {"/root/1": {"responses": ["seen"]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
    (child_id,) = t.session.agents.children
    completed = [
        msg.item
        for msg in of_agent(t, None, relay.ItemCompleted)
        if isinstance(msg.item, relay.protocol.AgentCallItem)
    ]
    spawn, wait = completed
    assert spawn.tool is relay.protocol.AgentTool.SPAWN_AGENT and spawn.prompt == "look"
    assert spawn.sender_id == t.session.id and spawn.receiver_ids == (child_id,)
    assert spawn.status is relay.protocol.CallStatus.COMPLETED
    assert wait.receiver_ids == (child_id,)
    assert wait.states == {
        child_id: relay.protocol.AgentState(relay.protocol.AgentStatus.COMPLETED, "seen")
    }
    started = [
        msg.item
        for msg in of_agent(t, None, relay.ItemStarted)
        if isinstance(msg.item, relay.protocol.AgentCallItem)
    ]
    assert [item.status for item in started] == [None, None]


async def test_wait_times_out_with_no_status(autojump_clock: trio.testing.MockClock) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="slow"),
            call("wait", "c2", ids=["/root/1"], timeout_ms=1000),
            call("close_agent", "c3", id="/root/1"),
            "gave up",
        ],
        "agents": {"/root/1": {"responses": [{"text": "late", "delay_ms": 60_000}]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        assert output_of(t.session, "c2") == {"status": {}, "timed_out": True}
        assert output_of(t.session, "c3") == {"previous_status": "running"}
        assert [end.status.value for end in ended(t)] == ["shutdown"]


async def test_an_unknown_id_reads_not_found_and_bad_arguments_fail_the_call_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("wait", "c1", ids=["nobody"]),
            call("send_input", "c2", id="nobody", message="hi"),
            call("wait", "c3", ids=[]),
            "fine",
        ]
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        done = (await t.wait_for(testing.turn_ended)).msg
    assert isinstance(done, relay.TurnComplete) and done.last_agent_message == "fine"
    assert output_of(t.session, "c1") == {"status": {"nobody": "not_found"}, "timed_out": False}
    assert output_of(t.session, "c2") == "error: no agent has the id 'nobody'"
    assert output_of(t.session, "c3") == "error: ids must be a non-empty list of agent ids"


# ------------------------------------------------------------------ limits and roles


async def test_a_spawn_past_a_limit_fails_the_call_with_the_limit_and_the_turn_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="one"),
            call("spawn_agent", "c2", message="two"),
            "carried on",
        ],
        "agents": {
            "/root/1": {"responses": [call("spawn_agent", "g1", message="deeper"), "child done"]}
        },
    }
    config = tree_config(agents=relay.AgentsConfig(max_depth=1, max_threads=1))
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        await t.wait_for(lambda e: isinstance(e.msg, relay.protocol.SubAgentEnded))
        (child_id,) = t.session.agents.children
        child = t.session.agents.children[child_id]
        assert child.session is not None
        grandchild_call = output_of(child.session, "g1")  # type: ignore[arg-type]
    second = output_of(t.session, "c2")
    assert second.startswith("error: agents.max_threads is 1")
    assert grandchild_call.startswith("error: agents.max_depth is 1")
    assert [turn.last_agent_message for turn in of_agent(t, None, relay.TurnComplete)] == [
        "carried on"
    ]


async def test_a_child_that_ended_does_not_count_against_max_threads(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="one"),
            call("wait", "c2", ids=["/root/1"]),
            call("spawn_agent", "c3", message="two"),
            "two children",
        ],
        "agents": {"/root/1": {"responses": ["a"]}, "/root/2": {"responses": ["b"]}},
    }
    config = tree_config(agents=relay.AgentsConfig(max_threads=1))
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
    assert "agent_id" in output_of(t.session, "c3")
    assert len(t.session.agents.children) == 2


async def test_a_role_narrows_the_rules_and_may_not_loosen_them(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    roles = {"lax": relay.AgentRole(sandbox_mode="danger-full-access", approval_policy="never")}
    script = {
        "responses": [
            call("spawn_agent", "c1", message="read", agent_type="explorer"),
            call("spawn_agent", "c2", message="write", agent_type="lax"),
            call("spawn_agent", "c3", message="?", agent_type="wizard"),
            "ok",
        ]
    }
    config = tree_config(
        agents=relay.AgentsConfig(max_threads=5, roles=roles),
        approval_policy="on-request",
        sandbox_mode="workspace-write",
        cwd=str(tmp_path),
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        explorer, lax = (child.session for child in t.session.agents.children.values())
        assert explorer is not None and lax is not None
        assert explorer.config.sandbox_mode == "read-only"
        assert (lax.config.sandbox_mode, lax.config.approval_policy) == (
            "workspace-write",
            "on-request",
        )
        assert explorer.config.developer_instructions  # the role's instructions
    assert output_of(t.session, "c3").startswith("error: unknown agent_type 'wizard'")


# ------------------------------------------------------------------ the cancellation tree


def streaming_tree(depth: int = 2) -> dict[str, Any]:
    """A root that spawns /root/1 and /root/2; /root/1 spawns /root/1/1; every child then
    waits a long time on the model."""
    slow = {"text": "never", "delay_ms": 600_000}
    return {
        "responses": [
            call("spawn_agent", "c1", message="left"),
            call("spawn_agent", "c2", message="right"),
            call("wait", "c3", ids=["/root/1", "/root/2"], timeout_ms=3_600_000),
            "never",
        ],
        "agents": {
            "/root/1": {
                "responses": [
                    call("spawn_agent", "g1", message="deep"),
                    call("wait", "g2", ids=["/root/1/1"], timeout_ms=3_600_000),
                    slow,
                ]
            },
            "/root/2": {"responses": [slow]},
            "/root/1/1": {"responses": [slow]},
        },
    }


async def everyone_at_work(t: testing.TestSession, count: int) -> None:
    """Wait until the tree has asked the model ``count`` times and everything waits on it
    (trio wakes this before the autojump clock moves on)."""
    await trio.testing.wait_all_tasks_blocked()
    assert len(t.model.requests) == count


async def test_an_interrupt_of_the_root_interrupts_every_descendant_and_nothing_is_asked_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session(streaming_tree(), config=tree_config()) as t:
        await t.turn("go", id="t1")
        # root: 3 requests; /root/1: 2; /root/2: 1; /root/1/1: 1.
        await everyone_at_work(t, 7)
        asked = len(t.model.requests)
        interrupted_at = trio.current_time()
        await t.submit(relay.Interrupt())
        await t.wait_for(lambda e: isinstance(e.msg, relay.TurnAborted) and e.agent is None)
        await t.wait_for(relay.protocol.SubAgentEnded, 3)
        await trio.testing.wait_all_tasks_blocked()
        # Every abort took at most the one grace of a single session (virtual time).
        assert trio.current_time() - interrupted_at <= 0.1
        assert len(t.model.requests) == asked
    statuses = {end.path: end.status.value for end in ended(t)}
    assert statuses == {
        "/root/1": "interrupted",
        "/root/2": "interrupted",
        "/root/1/1": "interrupted",
    }
    for path in ("/root/1", "/root/2", "/root/1/1"):
        (aborted,) = of_agent(t, path, relay.TurnAborted)
        assert aborted.reason is relay.AbortReason.INTERRUPTED


async def test_an_interrupt_of_an_idle_root_still_stops_its_running_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = {"text": "never", "delay_ms": 600_000}
    script = {
        "responses": [call("spawn_agent", "c1", message="work"), "spawned"],
        "agents": {"/root/1": {"responses": [slow]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        await everyone_at_work(t, 3)
        await t.submit(relay.Interrupt())
        end = (await t.wait_for(relay.protocol.SubAgentEnded)).msg
    assert end.status is relay.protocol.AgentStatus.INTERRUPTED


async def test_a_child_is_seen_only_with_its_task_so_an_interrupt_at_first_sight_stops_it() -> None:
    # A program that watches the tree and interrupts each child as soon as it sees it: the
    # interrupt must find the child's task running, not an idle session that gets its task
    # after, and asks the model on as if never told. (The real clock: the watcher never
    # blocks, so virtual time would never move.)
    children = 6  # agents.max_threads
    slow = {"responses": [call("sleep", "s1", seconds=1), "too late"]}
    script = {
        "responses": [
            *(call("spawn_agent", f"c{n}", message=f"task {n}") for n in range(children)),
            "spawned",
        ],
        "agents": {f"/root/{n}": slow for n in range(1, children + 1)},
    }
    seen: dict[str, bool] = {}
    async with testing.open_test_session(script, config=tree_config()) as t:

        async def watch() -> None:
            while len(seen) < children:
                for child in t.session.agents.descendants():
                    path = child.agents.path
                    if path not in seen:
                        seen[path] = child.statistics().running_turn is not None
                        child.submit_nowait(relay.Interrupt())
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await t.turn("go", id="t1")
            await t.wait_for(root_done)
        await t.wait_for(relay.protocol.SubAgentEnded, children)
        await trio.testing.wait_all_tasks_blocked()
        asked = paths_requested(t.model)
    assert seen == {f"/root/{n}": True for n in range(1, children + 1)}
    assert {end.status.value for end in ended(t)} == {"interrupted"}
    # No child got past its first request: the sleep's result never went back to the model.
    for n in range(1, children + 1):
        assert asked.count(f"/root/{n}") <= 1


async def test_a_close_ends_one_child_and_its_descendants_and_the_sibling_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="left"),
            call("spawn_agent", "c2", message="right"),
            call("close_agent", "c3", id="/root/1"),
            call("wait", "c4", ids=["/root/2"], timeout_ms=3_600_000),
            "right finished",
        ],
        "agents": {
            "/root/1": {
                "responses": [
                    call("spawn_agent", "g1", message="deep"),
                    {"text": "never", "delay_ms": 600_000},
                ]
            },
            "/root/1/1": {"responses": [{"text": "never", "delay_ms": 600_000}]},
            "/root/2": {"responses": [{"text": "right done", "delay_ms": 5_000}]},
        },
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
    statuses = {end.path: end.status.value for end in ended(t)}
    assert statuses["/root/2"] == "completed"
    assert statuses["/root/1"] == "shutdown"
    # The grandchild was ended with its parent (it may not have started its turn yet).
    left = t.session.agents.children[next(iter(t.session.agents.children))]
    assert left.session is None
    assert output_of(t.session, "c4")["status"] != {}
    shutdowns = [
        e.agent.path
        for e in t.recorder.events
        if isinstance(e.msg, relay.ShutdownComplete) and e.agent
    ]
    assert set(shutdowns) >= {"/root/1"}


async def test_a_failed_child_ends_with_its_error_and_the_parent_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="fail"),
            call("spawn_agent", "c2", message="work"),
            call("wait", "c3", ids=["/root/1"], timeout_ms=3_600_000),
            call("wait", "c4", ids=["/root/2"], timeout_ms=3_600_000),
            "one failed, one worked",
        ],
        "agents": {
            "/root/1": {"responses": [{"http_error": {"status": 400, "message": "bad"}}]},
            "/root/2": {"responses": [{"text": "worked", "delay_ms": 1000}]},
        },
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        done = (await t.wait_for(root_done)).msg
    assert done.last_agent_message == "one failed, one worked"
    failed = output_of(t.session, "c3")
    (state,) = failed["status"].values()
    assert "errored" in state
    (worked,) = output_of(t.session, "c4")["status"].values()
    assert worked == {"completed": "worked"}
    failed_child = next(iter(t.session.agents.children.values()))
    assert failed_child.session is None  # ended


async def test_every_child_ends_once_and_a_shutdown_ends_the_tree_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session(streaming_tree(), config=tree_config()) as t:
        await t.turn("go", id="t1")
        await everyone_at_work(t, 7)
        await t.submit(relay.Shutdown())
        await t.wait_for(lambda e: isinstance(e.msg, relay.ShutdownComplete) and e.agent is None)
    ends = [end.path for end in ended(t)]
    assert sorted(ends) == ["/root/1", "/root/1/1", "/root/2"]
    order = [
        e.agent.path if e.agent else "/root"
        for e in t.recorder.events
        if isinstance(e.msg, relay.ShutdownComplete)
    ]
    assert order[-1] == "/root" and sorted(order[:-1]) == ["/root/1", "/root/1/1", "/root/2"]
    assert order.index("/root/1/1") < order.index("/root/1")


class Lingering(relay.SessionTask):
    """A custom task that spawns a child, then does not stop at once when it is aborted (a
    shielded second of work): its session's abort waits out the grace."""

    @property
    def kind(self) -> str:
        return "lingering"

    async def run(self, ctx: relay.TaskContext) -> str:
        await ctx.agents.spawn("work", None, event_id=ctx.view.turn_id)
        with trio.CancelScope(shield=True):
            await trio.sleep(1)
        return "done"


async def test_a_shutdown_stops_the_children_at_once_while_the_root_ends_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The child asks the model every 30 ms (a call of a tool it does not have, then again);
    # the root's turn takes the whole grace to end. The child is told to shut down as the
    # shutdown begins, not once the root's turn has ended: it asks nothing after it.
    steps = [{**call("nothing", f"n{n}"), "delay_ms": 30} for n in range(40)]
    script = {"agents": {"/root/1": {"responses": steps}}}
    config = attrs.evolve(tree_config(), features=relay.Features())
    tasks: Mapping[str, Any] = {"lingering": lambda op: Lingering()}
    async with testing.open_test_session(script, config=config, tasks=tasks) as t:
        await t.submit(relay.CustomOp("lingering", {}))
        await trio.sleep(0.1)
        asked = paths_requested(t.model).count("/root/1")
        assert asked >= 3
        await t.submit(relay.Shutdown())
        await t.wait_for(lambda e: isinstance(e.msg, relay.ShutdownComplete) and e.agent is None)
    assert paths_requested(t.model).count("/root/1") == asked
    (end,) = ended(t)
    assert end.status is relay.protocol.AgentStatus.SHUTDOWN


async def test_a_shutdown_tells_the_whole_tree_in_one_step(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Every descendant is told as the shutdown begins, as an interrupt tells them: a
    # grandchild does not wait, working on, until its parent's loop gets to the shutdown.
    busy = {"responses": [call("sleep", "s1", seconds=60), "done"]}
    script = {
        "responses": [call("spawn_agent", "c1", message="work"), "spawned"],
        "agents": {
            "/root/1": {"responses": [call("spawn_agent", "g1", message="more"), "spawned"]},
            "/root/1/1": busy,
        },
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(
            lambda e: (
                isinstance(e.msg, relay.TurnStarted)
                and e.agent is not None
                and e.agent.path == "/root/1/1"
            )
        )
        await trio.testing.wait_all_tasks_blocked()
        t.session.agents.shut_all()
        told = {
            s.agents.path: s.statistics().submissions_pending
            for s in t.session.agents.descendants()
        }
        assert told == {"/root/1": 1, "/root/1/1": 1}
    # The child had finished its own turn; the grandchild was still at work when told.
    assert {end.path: end.status.value for end in ended(t)} == {
        "/root/1": "completed",
        "/root/1/1": "shutdown",
    }


# ------------------------------------------------------------------ the parent hears back


async def test_a_child_that_ends_between_turns_is_in_the_parents_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [call("spawn_agent", "c1", message="work"), "spawned", "noted"],
        "agents": {"/root/1": {"responses": [{"text": "all done", "delay_ms": 1000}]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(relay.protocol.SubAgentEnded)
        await t.turn("next", id="t2")
        await t.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete) and e.id == "t2")
    paths = paths_requested(t.model)
    root_requests = [r for r, path in zip(t.model.requests, paths, strict=True) if path is None]
    texts = testing.user_texts(root_requests[-1])
    (notice,) = [text for text in texts if "<subagent_notification>" in text]
    assert '"completed": "all done"' in notice
    assert texts[-1] == "next"


async def test_a_child_end_the_model_read_in_wait_is_not_repeated(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="work"),
            call("wait", "c2", ids=["/root/1"]),
            "read it",
            "next turn",
        ],
        "agents": {"/root/1": {"responses": ["done"]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
        await t.turn("again", id="t2")
        await t.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete) and e.id == "t2")
    texts = testing.user_texts(t.model.requests[-1])
    assert not [text for text in texts if "<subagent_notification>" in text]


# ------------------------------------------------------------------ decisions and usage


async def test_a_childs_request_for_a_decision_reaches_the_root_and_the_decision_goes_back(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="make it"),
            call("wait", "c2", ids=["/root/1"], timeout_ms=3_600_000),
            "made",
        ],
        "agents": {
            "/root/1": {"responses": [call("shell", "k1", argv=["touch", "made"]), "touched"]}
        },
    }
    config = tree_config(tools={"shell": True}, cwd=str(tmp_path), approval_policy="untrusted")
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("go", id="t1")
        asked = await t.wait_for(relay.ExecApprovalRequest)
        assert asked.agent is not None and asked.agent.path == "/root/1"
        assert not (tmp_path / "made").exists()
        await t.submit(
            relay.ExecApproval("k1", relay.ReviewDecision.APPROVED, agent_id=asked.agent.id)
        )
        await t.wait_for(root_done)
    assert (tmp_path / "made").exists()


async def test_the_root_callback_decides_for_a_child_and_is_told_which_one(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    seen: list[relay.ExecApprovalRequest | relay.protocol.ApplyPatchApprovalRequest] = []

    def decide(
        request: relay.ExecApprovalRequest | relay.protocol.ApplyPatchApprovalRequest,
    ) -> str:
        seen.append(request)
        return "denied"

    script = {
        "responses": [
            call("spawn_agent", "c1", message="make it"),
            call("wait", "c2", ids=["/root/1"], timeout_ms=3_600_000),
            "refused",
        ],
        "agents": {
            "/root/1": {"responses": [call("shell", "k1", argv=["touch", "made"]), "could not"]}
        },
    }
    config = tree_config(tools={"shell": True}, cwd=str(tmp_path), approval_policy="untrusted")
    async with testing.open_test_session(script, config=config, on_approval=decide) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
    (request,) = seen
    assert request.agent is not None and request.agent.path == "/root/1"
    assert not (tmp_path / "made").exists()


async def test_the_roots_token_count_includes_its_childrens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {
        "responses": [
            call("spawn_agent", "c1", message="work"),
            call("wait", "c2", ids=["/root/1"]),
            "done",
        ],
        "agents": {"/root/1": {"responses": [{"text": "ok", "total_tokens": 1000}]}},
    }
    async with testing.open_test_session(script, config=tree_config()) as t:
        await t.turn("go", id="t1")
        await t.wait_for(root_done)
    (child_count,) = [c for c in of_agent(t, "/root/1", relay.TokenCount) if c.info]
    child_total = child_count.info.total_token_usage.total_tokens
    root_counts = [c for c in of_agent(t, None, relay.TokenCount) if c.tree_total is not None]
    last = root_counts[-1]
    own = last.info.total_token_usage.total_tokens
    assert last.tree_total.total_tokens == own + child_total


# ------------------------------------------------------------------ the port and resume


@attrs.frozen
class Fanout(relay.SessionTask):
    """A custom task that spawns children through the port and waits for them."""

    count: int

    @property
    def kind(self) -> str:
        return "fanout"

    async def run(self, ctx: relay.TaskContext) -> str:
        ids = [
            await ctx.agents.spawn(f"part {n}", None, event_id=ctx.view.turn_id)
            for n in range(self.count)
        ]
        done: dict[str, Any] = {}
        while len(done) < len(ids):
            states, _ = await ctx.agents.wait([i for i in ids if i not in done], 3600)
            done.update(states)
        return ", ".join(sorted(state.message or "" for state in done.values()))


async def test_a_custom_task_spawns_children_through_the_port(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = {"agents": {f"/root/{n}": {"responses": [f"answer {n}"]} for n in (1, 2, 3)}}
    config = attrs.evolve(tree_config(), features=relay.Features())  # no tools offered
    tasks: Mapping[str, Any] = {"fanout": lambda op: Fanout(int(op.fields["count"]))}
    async with testing.open_test_session(script, config=config, tasks=tasks) as t:
        await t.submit(relay.CustomOp("fanout", {"count": 3}))
        done = (await t.wait_for(root_done)).msg
    assert done.last_agent_message == "answer 1, answer 2, answer 3"
    assert "spawn_agent" not in t.session.tools.names()


def crash_image(sessions: Path, image: Path) -> None:
    """What a crash now would leave: every rollout file of the tree as it is on disk."""
    image.mkdir()
    for path in sessions.rglob("*.jsonl"):
        shutil.copyfile(path, image / path.name)


async def test_resuming_a_crashed_root_opens_its_children_again_and_a_running_one_reads_interrupted(
    tmp_path: Path,
) -> None:
    slow = {"text": "never", "delay_ms": 600_000}
    script = {
        "responses": [
            call("spawn_agent", "c1", message="quick"),
            call("spawn_agent", "c2", message="slow"),
            call("wait", "c3", ids=["/root/1"], timeout_ms=3_600_000),
            "one done",
        ],
        "agents": {"/root/1": {"responses": ["quick answer"]}, "/root/2": {"responses": [slow]}},
    }
    model = testing.ScriptedModel(script)
    sessions = tmp_path / "sessions"
    async with (
        relay.open_session(tree_config(sessions), model=model) as session,
        testing.recording(session) as rec,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("go")]))
        await rec.wait_for(root_done)
        assert session.rollout is not None
        root_file = session.rollout.path.name
        crash_image(sessions, tmp_path / "image")
    resumed_model = testing.ScriptedModel({"responses": ["after"]})
    image = tmp_path / "image" / root_file
    async with (
        relay.resume_session(image, tree_config(tmp_path / "image"), model=resumed_model) as again,
        testing.recording(again) as rec,
    ):
        children = again.agents.children
        states = {child.ref.path: child.state.status.value for child in children.values()}
        assert states == {"/root/1": "completed", "/root/2": "interrupted"}
        assert all(child.session is not None for child in children.values())
        assert all(
            str(child.rollout_path).startswith(str(tmp_path / "image"))
            for child in children.values()
        )
        await again.submit(relay.UserTurn(items=[relay.Text("and now?")]))
        await rec.wait_for(root_done)
    ends = [e.msg for e in rec.events if isinstance(e.msg, relay.protocol.SubAgentEnded)]
    assert next((end.path, end.status.value) for end in ends) == ("/root/2", "interrupted")
    # The running child's turn was not asked again: only the root spoke after the resume.
    assert [prompt.agent_path for prompt in resumed_model.prompts] == [None]
    # Its end reaches the root's model once, at the next turn.
    texts = testing.user_texts(resumed_model.requests[0])
    assert sum('"path": "/root/2"' in text for text in texts) == 1
