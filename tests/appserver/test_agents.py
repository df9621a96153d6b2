"""Sub-agents through ``relay app-server``: the real command over pipes, a model script per
session (:mod:`.agent_model`), every line checked against Codex 0.169's schema
(:mod:`.client`). A root thread's sub-agent calls are ``collabAgentToolCall`` items; each
descendant is a thread of its own, announced by ``thread/started`` with a ``subAgent``
source, its events on its thread and never on the root's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._codex import _items

from .agent_model import agent_model
from .client import AppServer, app_server
from .schema import check_variant

AGENTS = ("-c", "features.multi_agent=true")
SHELL = ("-c", "tools.shell=true")


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def start(server: AppServer, tmp_path: Path, **params: Any) -> str:
    server.initialize()
    started = server.call("thread/start", {"cwd": str(tmp_path), **params})
    server.next("thread/started")
    thread: str = started["thread"]["id"]
    return thread


def until_root_done(server: AppServer, root: str) -> list[dict[str, Any]]:
    """Every message up to the root's ``turn/completed``."""
    return server.until("turn/completed", threadId=root)


def notes(messages: list[dict[str, Any]], method: str, **params: Any) -> list[dict[str, Any]]:
    return [
        m["params"]
        for m in messages
        if m.get("method") == method and all(m["params"].get(k) == v for k, v in params.items())
    ]


def items(messages: list[dict[str, Any]], method: str, thread: str) -> list[dict[str, Any]]:
    return [params["item"] for params in notes(messages, method, threadId=thread)]


SPAWN_AND_WAIT = [
    call("spawn_agent", "c1", message="say hi"),
    call("wait", "c2", ids=["/root/1"]),
    "all done",
]


def test_calls_are_collab_items_and_the_child_is_a_thread(tmp_path: Path) -> None:
    with (
        agent_model(
            tmp_path, {"responses": SPAWN_AND_WAIT}, {"responses": ["hi from child"]}
        ) as model,
        app_server(*model, *AGENTS, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, ephemeral=True)
        server.call("turn/start", {"threadId": root, "input": text("go")})
        seen = until_root_done(server, root)

        started = [i for i in items(seen, "item/started", root) if i["type"] != "userMessage"]
        spawn = started[0]
        assert spawn["type"] == "collabAgentToolCall"
        assert (spawn["id"], spawn["tool"], spawn["status"]) == ("c1", "spawnAgent", "inProgress")
        assert (spawn["senderThreadId"], spawn["receiverThreadIds"]) == (root, [])
        assert spawn["prompt"] == "say hi"

        completed = {i["id"]: i for i in items(seen, "item/completed", root)}
        spawned = completed["c1"]
        assert spawned["status"] == "completed"
        [child] = spawned["receiverThreadIds"]
        assert child != root
        assert spawned["model"] == "mock-model"
        assert spawned["agentsStates"][child]["status"] in ("pendingInit", "running")

        waited = completed["c2"]
        assert (waited["tool"], waited["status"], waited["receiverThreadIds"]) == (
            "wait",
            "completed",
            [child],
        )
        assert waited["agentsStates"][child] == {"status": "completed", "message": "hi from child"}

        # The child's thread: announced once, with its parent and its place in the tree.
        [announced] = [
            t["thread"] for t in notes(seen, "thread/started") if t["thread"]["id"] == child
        ]
        assert announced["source"] == {
            "subAgent": {
                "thread_spawn": {
                    "parent_thread_id": root,
                    "depth": 1,
                    "agent_path": "/root/1",
                    "agent_role": "default",
                    "agent_nickname": None,
                }
            }
        }
        assert (announced["parentThreadId"], announced["agentRole"]) == (root, "default")
        assert announced["sessionId"] == root

        # The child's turn and answer are on its thread, the root's on the root's alone.
        [child_done] = notes(seen, "turn/completed", threadId=child)
        assert child_done["turn"]["status"] == "completed"
        assert [
            i["text"] for i in items(seen, "item/completed", child) if i["type"] == "agentMessage"
        ] == ["hi from child"]
        root_answers = [i["text"] for i in completed.values() if i["type"] == "agentMessage"]
        assert root_answers == ["all done"]
        assert len(notes(seen, "turn/started", threadId=root)) == 1
        assert len(notes(seen, "turn/completed", threadId=root)) == 1
        assert seen[-1]["params"]["turn"]["status"] == "completed"
        assert seen[-1]["params"]["turn"]["items"][0]["text"] == "all done"
        assert server.close_input() == 0


def test_thread_list_tells_child_threads_by_source_kind(tmp_path: Path) -> None:
    with (
        agent_model(
            tmp_path, {"responses": SPAWN_AND_WAIT}, {"responses": ["hi from child"]}
        ) as model,
        app_server(*model, *AGENTS, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path)
        server.call("turn/start", {"threadId": root, "input": text("go")})
        seen = until_root_done(server, root)
        [child] = [
            t["thread"]["id"] for t in notes(seen, "thread/started") if t["thread"]["id"] != root
        ]

        listed = server.call("thread/list", {})["data"]
        assert [t["id"] for t in listed] == [root]
        assert listed[0]["source"] == "appServer" and listed[0]["parentThreadId"] is None

        children = server.call("thread/list", {"sourceKinds": ["subAgentThreadSpawn"]})["data"]
        assert [t["id"] for t in children] == [child]
        assert children[0]["source"]["subAgent"]["thread_spawn"]["parent_thread_id"] == root
        assert children[0]["source"]["subAgent"]["thread_spawn"]["agent_path"] == "/root/1"
        assert (children[0]["parentThreadId"], children[0]["agentRole"]) == (root, "default")
        assert children[0]["preview"] == "say hi"

        both = server.call("thread/list", {"sourceKinds": ["appServer", "subAgent"]})["data"]
        assert {t["id"] for t in both} == {root, child}
        read = server.call("thread/read", {"threadId": child})["thread"]
        assert read["parentThreadId"] == root
        assert server.close_input() == 0


def test_a_childs_approval_is_asked_on_its_thread(tmp_path: Path) -> None:
    root_script = [
        call("spawn_agent", "c1", message="make it"),
        call("wait", "c2", ids=["/root/1"]),
        "the child made it",
    ]
    child_script = [call("shell", "c9", argv=["touch", "made"]), "made"]
    with (
        agent_model(tmp_path, {"responses": root_script}, {"responses": child_script}) as model,
        app_server(*model, *AGENTS, *SHELL, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, approvalPolicy="untrusted", ephemeral=True)
        server.call("turn/start", {"threadId": root, "input": text("go")})
        request = server.wait(lambda m: m.get("method") == "item/commandExecution/requestApproval")
        child = request["params"]["threadId"]
        assert child != root and request["params"]["itemId"] == "c9"
        assert not (tmp_path / "made").exists()
        server.send({"id": request["id"], "result": {"decision": "accept"}})
        resolved = server.next("serverRequest/resolved", requestId=request["id"])
        assert resolved["threadId"] == child
        seen = until_root_done(server, root)
        assert (tmp_path / "made").exists()
        ran = [i for i in items(seen, "item/completed", child) if i["type"] == "commandExecution"]
        assert [(i["id"], i["status"], i["exitCode"]) for i in ran] == [("c9", "completed", 0)]
        assert not [
            i for i in items(seen, "item/completed", root) if i["type"] == "commandExecution"
        ]
        assert seen[-1]["params"]["turn"]["status"] == "completed"
        assert server.close_input() == 0


def test_a_declined_childs_call_is_declined_on_its_thread(tmp_path: Path) -> None:
    root_script = [
        call("spawn_agent", "c1", message="make it"),
        call("wait", "c2", ids=["/root/1"]),
        "the child could not",
    ]
    child_script = [call("shell", "c9", argv=["touch", "made"]), "not allowed"]
    with (
        agent_model(tmp_path, {"responses": root_script}, {"responses": child_script}) as model,
        app_server(*model, *AGENTS, *SHELL, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, approvalPolicy="untrusted", ephemeral=True)
        server.call("turn/start", {"threadId": root, "input": text("go")})
        request = server.wait(lambda m: m.get("method") == "item/commandExecution/requestApproval")
        child = request["params"]["threadId"]
        server.send({"id": request["id"], "result": {"decision": "decline"}})
        seen = until_root_done(server, root)
        ran = [i for i in items(seen, "item/completed", child) if i["type"] == "commandExecution"]
        assert [(i["id"], i["status"]) for i in ran] == [("c9", "declined")]
        assert not (tmp_path / "made").exists()
        assert server.close_input() == 0


def test_interrupting_the_root_turn_interrupts_the_child(tmp_path: Path) -> None:
    root_script = [
        call("spawn_agent", "c1", message="take your time"),
        call("wait", "c2", ids=["/root/1"], timeout_ms=600_000),
        "never",
    ]
    child_script = [{"text": "too late", "delay_ms": 600_000}]
    with (
        agent_model(tmp_path, {"responses": root_script}, {"responses": child_script}) as model,
        app_server(*model, *AGENTS, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, ephemeral=True)
        turn = server.call("turn/start", {"threadId": root, "input": text("go")})["turn"]
        announced = server.wait(
            lambda m: m.get("method") == "thread/started" and m["params"]["thread"]["id"] != root
        )
        child = announced["params"]["thread"]["id"]
        server.next("turn/started", threadId=child)
        waiting = server.next("item/started", threadId=root)
        while waiting["item"].get("tool") != "wait":
            waiting = server.next("item/started", threadId=root)
        assert server.call("turn/interrupt", {"threadId": root, "turnId": turn["id"]}) == {}
        child_done = server.next("turn/completed", threadId=child)
        assert child_done["turn"]["status"] == "interrupted"
        root_done = server.next("turn/completed", threadId=root)
        assert root_done["turn"]["status"] == "interrupted"
        assert root_done["turn"]["id"] == turn["id"]
        assert server.close_input() == 0


def test_interrupting_a_child_thread_interrupts_it_and_the_root_goes_on(tmp_path: Path) -> None:
    root_script = [
        call("spawn_agent", "c1", message="take your time"),
        call("wait", "c2", ids=["/root/1"], timeout_ms=600_000),
        "the child was stopped",
    ]
    child_script = [{"text": "too late", "delay_ms": 600_000}]
    with (
        agent_model(tmp_path, {"responses": root_script}, {"responses": child_script}) as model,
        app_server(*model, *AGENTS, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, ephemeral=True)
        turn = server.call("turn/start", {"threadId": root, "input": text("go")})["turn"]
        announced = server.wait(
            lambda m: m.get("method") == "thread/started" and m["params"]["thread"]["id"] != root
        )
        child = announced["params"]["thread"]["id"]
        child_turn = server.next("turn/started", threadId=child)["turn"]
        asked = {"threadId": child, "turnId": child_turn["id"]}
        assert server.call("turn/interrupt", asked) == {}
        child_done = server.next("turn/completed", threadId=child)
        assert child_done["turn"]["status"] == "interrupted"
        root_done = server.next("turn/completed", threadId=root)
        assert root_done["turn"]["id"] == turn["id"]
        assert root_done["turn"]["status"] == "completed"
        assert server.close_input() == 0


def test_interrupting_a_root_whose_turn_ended_stops_its_working_children(tmp_path: Path) -> None:
    root_script = [call("spawn_agent", "c1", message="take your time"), "spawned"]
    child_script = [{"text": "too late", "delay_ms": 600_000}]
    with (
        agent_model(tmp_path, {"responses": root_script}, {"responses": child_script}) as model,
        app_server(*model, *AGENTS, cwd=tmp_path) as server,
    ):
        root = start(server, tmp_path, ephemeral=True)
        turn = server.call("turn/start", {"threadId": root, "input": text("go")})["turn"]
        announced = server.wait(
            lambda m: m.get("method") == "thread/started" and m["params"]["thread"]["id"] != root
        )
        child = announced["params"]["thread"]["id"]
        server.next("turn/started", threadId=child)
        assert server.next("turn/completed", threadId=root)["turn"]["status"] == "completed"
        assert server.call("turn/interrupt", {"threadId": root, "turnId": turn["id"]}) == {}
        child_done = server.next("turn/completed", threadId=child)
        assert child_done["turn"]["status"] == "interrupted"
        assert server.close_input() == 0


ids = st.sampled_from(["kid-1", "kid-2", "/root/1", "/root/1/2"])
agent_calls = st.builds(
    p.AgentCallItem,
    id=st.text(min_size=1, max_size=8),
    tool=st.sampled_from(list(p.AgentTool)),
    sender_id=st.just("root"),
    arguments=st.sampled_from(['{"id": "kid-1"}', '{"ids": ["kid-1", "/root/1"]}', "", "{"]),
    prompt=st.none() | st.text(max_size=8),
    receiver_ids=st.lists(ids, max_size=3).map(tuple),
    states=st.dictionaries(
        ids, st.builds(p.AgentState, st.sampled_from(list(p.AgentStatus)), st.none() | st.text())
    ),
    status=st.none() | st.sampled_from(list(p.CallStatus)),
)


@given(agent_calls, st.booleans(), st.none() | st.just("mock-model"))
def test_every_agent_call_is_a_valid_collab_item(
    item: p.AgentCallItem, aborted: bool, model: str | None
) -> None:
    made = _items.agent_call(
        _items.by_agent_id(item, {"/root/1": "kid-9"}), model=model, aborted=aborted
    )
    check_variant("v2/ThreadItem", made)
    assert "/root/1" not in made["receiverThreadIds"]
    expected = "interrupted" if aborted else "inProgress" if item.status is None else None
    if expected is not None:
        assert made["status"] == expected
    else:
        ok = item.status is p.CallStatus.COMPLETED
        assert made["status"] == ("completed" if ok else "failed")
