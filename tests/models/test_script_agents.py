"""A model script for a tree of agents (docs/model-script.md, "A tree of agents"): the
``agents`` key holds a script for each sub-agent by its path, and the in-process scripted
model and the loopback mock server answer each request from the script of the agent that
sent it.

The loopback tests use the real clock (sockets do not run in virtual time) and wait for what
they can observe, never for a duration.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._base import _protocol as p
from relay._base._errors import ScriptError
from relay._base._model import Completed, ModelEvent, OutputItemDone, Prompt
from relay._models._responses import AGENT_HEADER, PURPOSE_HEADER
from relay._models._script import parse_model_script
from relay._testing._mock_server import open_mock_server
from relay._wire import open_http_client

#: Guards every wait on the other side of a socket; never reached when things work.
GUARD_S = 20

SCRIPT: dict[str, Any] = {
    "responses": ["from the root"],
    "agents": {
        "/root/1": {"responses": ["from the first child"]},
        "/root/1/2": {"responses": ["from a grandchild"]},
    },
}


def prompt(agent_path: str | None, text: str = "hello") -> Prompt:
    return Prompt(
        model="gpt-test",
        instructions="Be brief.",
        input=(p.user_message(text),),
        prompt_cache_key="session-1",
        agent_path=agent_path,
    )


def texts(events: list[ModelEvent]) -> list[str]:
    return [
        event.item.text()
        for event in events
        if isinstance(event, OutputItemDone) and isinstance(event.item, p.Message)
    ]


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}}


# ------------------------------------------------------------------ parsing


def test_the_agents_key_holds_a_script_for_each_path() -> None:
    script = parse_model_script(SCRIPT)
    assert set(script.agents) == {"/root/1", "/root/1/2"}
    child = script.agents["/root/1"]
    assert [r.output for r in child.responses] == [(p.assistant_message("from the first child"),)]
    assert script.for_agent("/root/1") is child
    assert script.for_agent("/root/1/2") is script.agents["/root/1/2"]


def test_the_root_plays_the_script_itself() -> None:
    script = parse_model_script(SCRIPT)
    assert script.for_agent(None) is script
    assert script.for_agent("/root") is script


def test_a_path_without_a_script_plays_the_fallback_and_keeps_its_place() -> None:
    script = parse_model_script(SCRIPT)
    other = script.for_agent("/root/7")
    assert other.responses == [] and other.fallback == "echo"
    # Made once: its requests go on from where they were.
    assert script.for_agent("/root/7") is other
    said = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert other.plan({"input": [said]}).events  # the fallback answers


def test_an_error_in_an_agent_s_script_names_its_path() -> None:
    data = {"agents": {"/root/1": {"responses": [{"bogus": 1}]}}}
    with pytest.raises(ScriptError) as caught:
        parse_model_script(data)
    assert str(caught.value) == (
        "model script: agents[/root/1]: responses[0]: unknown reply keys: bogus"
    )
    with pytest.raises(ScriptError, match=r"^model script: agents\[/root/2\]: fallback: "):
        parse_model_script({"agents": {"/root/2": {"fallback": "silence"}}})


@pytest.mark.parametrize(
    "agents",
    [
        {"root/1": {}},
        {"/root": {}},
        {"/other/1": {}},
        {"/rooted/1": {}},
        ["/root/1"],
        "/root/1",
    ],
)
def test_agents_must_be_scripts_by_paths_under_the_root(agents: Any) -> None:
    with pytest.raises(ScriptError, match=r"^model script: agents: expected an object of scripts"):
        parse_model_script({"agents": agents})


def test_a_script_without_agents_has_none() -> None:
    assert parse_model_script({"responses": []}).agents == {}


# ------------------------------------------------------------------ the scripted model


async def test_the_scripted_model_answers_each_agent_from_its_own_script() -> None:
    model = testing.ScriptedModel(SCRIPT)
    answers = {}
    # Out of order on purpose: each path takes its own script's next reply.
    for path in ("/root/1/2", None, "/root/1", "/root/5"):
        async with model.stream(prompt(path, f"to {path}")) as events:
            answers[path] = texts([event async for event in events])
    assert answers == {
        "/root/1/2": ["from a grandchild"],
        None: ["from the root"],
        "/root/1": ["from the first child"],
        "/root/5": ["echo: to /root/5"],  # no script: the fallback echoes
    }
    assert [prompt.agent_path for prompt in model.prompts] == [
        "/root/1/2",
        None,
        "/root/1",
        "/root/5",
    ]


# ------------------------------------------------------------------ the loopback server


async def collect(client: Any, prompt: Prompt) -> list[ModelEvent]:
    async with client.stream(prompt) as events:
        return [event async for event in events]


async def test_the_mock_server_routes_a_request_by_its_agent_header() -> None:
    with trio.fail_after(GUARD_S):
        async with open_mock_server(SCRIPT) as server:
            assert server.base_url is not None
            provider = relay.ProviderConfig(name="mock", base_url=server.base_url)
            async with open_http_client(provider, api_key="k") as client:
                child = await collect(client, prompt("/root/1"))
                root = await collect(client, prompt(None))
                grandchild = await collect(client, prompt("/root/1/2"))
                stranger = await collect(client, prompt("/root/3", "echo me"))
    assert texts(child) == ["from the first child"]
    assert texts(root) == ["from the root"]
    assert texts(grandchild) == ["from a grandchild"]
    assert texts(stranger) == ["echo: echo me"]
    assert all(isinstance(events[-1], Completed) for events in (child, root, grandchild))
    headers = [entry["headers"] for entry in server.requests]
    assert [h.get(AGENT_HEADER) for h in headers] == ["/root/1", None, "/root/1/2", "/root/3"]
    assert all(h[PURPOSE_HEADER] == "turn" for h in headers)


# ------------------------------------------------------------------ a tree from one script


def tree_config() -> relay.Config:
    return relay.Config(
        features=relay.Features(multi_agent=True),
        rollout=relay.RolloutConfig(enabled=False),
    )


TREE: dict[str, Any] = {
    "responses": [
        call("spawn_agent", "c1", message="count the files"),
        call("wait", "c2", ids=["/root/1"]),
        "The child says 3.",
    ],
    "agents": {"/root/1": {"responses": ["There are 3."]}},
}


def output_of(session: relay.Session, call_id: str) -> Any:
    (output,) = [
        item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput) and item.call_id == call_id
    ]
    return json.loads(output)


async def test_one_script_plays_a_root_that_spawns_a_child_and_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with testing.open_test_session(TREE, config=tree_config()) as t:
        await t.turn("go", id="t1")
        done = await t.wait_for(lambda e: isinstance(e.msg, relay.TurnComplete) and e.agent is None)
        (child_id,) = t.session.agents.children
        assert output_of(t.session, "c2") == {
            "status": {child_id: {"completed": "There are 3."}},
            "timed_out": False,
        }
    assert isinstance(done.msg, relay.TurnComplete)
    assert done.msg.last_agent_message == "The child says 3."
    assert [prompt.agent_path for prompt in t.model.prompts] == [None, None, "/root/1", None]


async def test_one_script_on_the_loopback_server_plays_the_tree_over_http() -> None:
    with trio.fail_after(GUARD_S):
        async with open_mock_server(TREE) as server:
            assert server.base_url is not None
            provider = relay.ProviderConfig(name="mock", base_url=server.base_url)
            async with (
                open_http_client(provider, api_key="k") as client,
                testing.open_test_session(model=client, config=tree_config()) as t,  # type: ignore[arg-type]
            ):
                await t.turn("go", id="t1")
                done = await t.wait_for(
                    lambda e: isinstance(e.msg, relay.TurnComplete) and e.agent is None
                )
    assert isinstance(done.msg, relay.TurnComplete)
    assert done.msg.last_agent_message == "The child says 3."
    agents = [entry["headers"].get(AGENT_HEADER) for entry in server.requests]
    assert agents == [None, None, "/root/1", None]
    child_request = server.requests[2]["body"]
    assert testing.user_texts(child_request)[-1] == "count the files"
