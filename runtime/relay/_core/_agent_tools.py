"""Codex's sub-agent tools: ``spawn_agent``, ``send_input``, ``wait``, ``close_agent`` and
``resume_agent`` (docs/agents.md, docs/tools.md).

They take Codex's arguments and answer with Codex's outputs (JSON the model reads), so that a
model trained on Codex's tools drives relay's children the same way. Each is a thin handler
over the session's ``Agents`` (:mod:`._agents`); reading the arguments, writing the outputs and
the call's item are plain functions. A call that cannot be done (a limit, an unknown id) fails
with an output that says why; the turn goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._base import _protocol as p
from ._agent_rules import outcome, state_json, status_json, wait_bound
from ._agents import Agents
from ._tools import Tool, ToolContext, ToolError


def _agents(ctx: ToolContext) -> Agents:
    agents = ctx.agents
    if not isinstance(agents, Agents):
        raise ToolError("sub-agents are not available here")
    return agents


def _text(args: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{key} must be a non-empty string")
    return value


def _target(args: Mapping[str, Any], agents: Agents) -> str:
    """The id of the agent a call names: ``id`` (``target``, as later Codex names it, is taken
    too), an agent's id or its path (``/root/1``)."""
    key = "id" if "id" in args or "target" not in args else "target"
    found = _text(args, key)
    assert found is not None
    child = agents.child(found)
    return child.ref.id if child is not None else found


def _answer(ctx: ToolContext, body: Mapping[str, Any], touched: p.AgentCallOutcome) -> str:
    ctx.report(p.ToolResult(p.CallStatus.COMPLETED, agents=touched))
    return json.dumps(body, ensure_ascii=False)


async def _spawn(args: Mapping[str, Any], ctx: ToolContext) -> str:
    agents = _agents(ctx)
    message = _text(args, "message")
    role = _text(args, "agent_type", required=False)
    agent_id = await agents.spawn(message, role, event_id=ctx.turn_id)
    state = agents.state(agent_id)
    return _answer(
        ctx, {"agent_id": agent_id, "nickname": None}, outcome([agent_id], {agent_id: state})
    )


async def _send_input(args: Mapping[str, Any], ctx: ToolContext) -> str:
    agents = _agents(ctx)
    agent_id = _target(args, agents)
    message = _text(args, "message")
    assert message is not None
    interrupt = args.get("interrupt", False)
    if not isinstance(interrupt, bool):
        raise ToolError("interrupt must be true or false")
    submission = agents.send(agent_id, message, interrupt=interrupt, event_id=ctx.turn_id)
    touched = outcome([agent_id], {agent_id: agents.state(agent_id)})
    return _answer(ctx, {"submission_id": submission}, touched)


async def _wait(args: Mapping[str, Any], ctx: ToolContext) -> str:
    agents = _agents(ctx)
    ids = args.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        raise ToolError("ids must be a non-empty list of agent ids")
    seconds = wait_bound(args.get("timeout_ms"))
    resolved = [child.ref.id if (child := agents.child(key)) else key for key in ids]
    states, timed_out = await agents.wait(resolved, seconds)
    body = {"status": state_json(states), "timed_out": timed_out}
    return _answer(ctx, body, outcome(resolved, states))


async def _close(args: Mapping[str, Any], ctx: ToolContext) -> str:
    agents = _agents(ctx)
    agent_id = _target(args, agents)
    before = await agents.close(agent_id)
    touched = outcome([agent_id], {agent_id: agents.state(agent_id)})
    return _answer(ctx, {"previous_status": status_json(before)}, touched)


async def _resume(args: Mapping[str, Any], ctx: ToolContext) -> str:
    agents = _agents(ctx)
    agent_id = _target(args, agents)
    state = await agents.resume(agent_id)
    return _answer(ctx, {"status": status_json(state)}, outcome([agent_id], {agent_id: state}))


def _id_schema(what: str) -> dict[str, Any]:
    return {"type": "string", "description": what}


SPAWN_AGENT = Tool(
    "spawn_agent",
    "Start a sub-agent on a well-scoped task; it works beside you with your tools and rules. "
    "Returns its agent_id. Use wait to collect its answer, close_agent when it is no longer "
    "needed.",
    {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "The task, stated in full"},
            "agent_type": {
                "type": "string",
                "description": "The role to run it in (default, worker, explorer, or one the "
                "configuration defines)",
            },
        },
        "required": ["message"],
        "additionalProperties": False,
    },
    _spawn,
)

SEND_INPUT = Tool(
    "send_input",
    "Give a sub-agent more input. It is queued behind the agent's running turn, unless "
    "interrupt is true: then the running turn stops and this input is handled at once.",
    {
        "type": "object",
        "properties": {
            "id": _id_schema("The agent_id spawn_agent returned"),
            "message": {"type": "string", "description": "The input"},
            "interrupt": {"type": "boolean", "description": "Stop its running turn first"},
        },
        "required": ["id", "message"],
        "additionalProperties": False,
    },
    _send_input,
)

WAIT = Tool(
    "wait",
    "Wait until one of the given sub-agents is done with its work, or the timeout passes. "
    "Returns the status of each agent that is done (with its final message once it "
    "completed), and timed_out.",
    {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The agent_ids to wait for",
            },
            "timeout_ms": {
                "type": "number",
                "description": "The longest wait, in milliseconds (default 30000)",
            },
        },
        "required": ["ids"],
        "additionalProperties": False,
    },
    _wait,
)

CLOSE_AGENT = Tool(
    "close_agent",
    "Close a sub-agent and every agent it started; returns its status before it was closed. "
    "resume_agent opens it again.",
    {
        "type": "object",
        "properties": {"id": _id_schema("The agent_id to close")},
        "required": ["id"],
        "additionalProperties": False,
    },
    _close,
)

RESUME_AGENT = Tool(
    "resume_agent",
    "Open a closed sub-agent again, with its history, so that it can take input; returns its "
    "status.",
    {
        "type": "object",
        "properties": {"id": _id_schema("The agent_id to open again")},
        "required": ["id"],
        "additionalProperties": False,
    },
    _resume,
)

#: The sub-agent tools, by name.
AGENT_TOOLS: Mapping[str, Tool] = {
    tool.name: tool for tool in (SPAWN_AGENT, SEND_INPUT, WAIT, CLOSE_AGENT, RESUME_AGENT)
}


def agent_call_item(call: p.FunctionCall, sender_id: str) -> p.AgentCallItem:
    """The item that reports a call of a sub-agent tool as it starts."""
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        args = {}
    message = args.get("message") if isinstance(args, Mapping) else None
    return p.AgentCallItem(
        call.call_id,
        p.AgentTool(call.name),
        sender_id,
        call.arguments,
        prompt=message if isinstance(message, str) else None,
    )


def agent_call_done(item: p.AgentCallItem, output: str, result: p.ToolResult) -> p.AgentCallItem:
    """``item`` as the call ended."""
    touched = result.agents or p.AgentCallOutcome()
    return p.AgentCallItem(
        item.id,
        item.tool,
        item.sender_id,
        item.arguments,
        item.prompt,
        touched.receivers,
        touched.states,
        result.status,
        output,
        result,
    )


__all__ = [
    "AGENT_TOOLS",
    "CLOSE_AGENT",
    "RESUME_AGENT",
    "SEND_INPUT",
    "SPAWN_AGENT",
    "WAIT",
    "agent_call_done",
    "agent_call_item",
]
