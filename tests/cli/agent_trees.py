"""Rollouts of a session with a tree of sub-agents, for the tests of ``relay show`` and the
timeline page.

:func:`tree_rollout` runs a real session (scripted models, ``features.multi_agent``) whose root
spawns three children: ``/root/1`` (a ``worker``) spawns a child of its own, ``/root/1/1``, and
completes; ``/root/2`` (an ``explorer``) completes; ``/root/3``'s model refuses its request, so
it ends ``errored``. Every session writes its own rollout under the directory given. The
model script answers each agent by its path (docs/model-script.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

import relay
from relay._base import _protocol as p
from relay._base._agents_config import AgentsConfig
from relay.testing import ScriptedModel

ROOT_TASK = "Split the work."


def _spawn(call_id: str, message: str, role: str | None = None) -> dict[str, Any]:
    arguments = {"message": message} | ({"agent_type": role} if role else {})
    return {"function_call": {"name": "spawn_agent", "arguments": arguments, "call_id": call_id}}


#: The tree's model script: the root's responses, and each sub-agent's by its path.
SCRIPT: dict[str, Any] = {
    "responses": [
        _spawn("s1", "Build the parser.", "worker"),
        _spawn("s2", "Look for the old tests.", "explorer"),
        _spawn("s3", "Ask the broken server."),
        "Three agents are at work.",
    ],
    "agents": {
        "/root/1": {"responses": [_spawn("s4", "Write the lexer."), "The parser is built."]},
        "/root/1/1": {"responses": ["The lexer is written."]},
        "/root/2": {"responses": ["The old tests are in legacy/."]},
        "/root/3": {
            "responses": [{"http_error": {"status": 400, "message": "the server refused it"}}]
        },
    },
}
#: Every agent's path, with its role, how it ends and its last message.
AGENTS = {
    "/root/1": ("worker", "completed", "The parser is built."),
    "/root/1/1": ("default", "completed", "The lexer is written."),
    "/root/2": ("explorer", "completed", "The old tests are in legacy/."),
    "/root/3": ("default", "errored", None),
}


def tree_rollout(root: Path) -> Path:
    """Run the tree under ``root`` until every agent's work ended; the root's rollout."""
    root.mkdir(parents=True, exist_ok=True)
    config = relay.Config(
        cwd=str(root),
        features=relay.Features(multi_agent=True),
        agents=AgentsConfig(max_depth=2),
        rollout=relay.RolloutConfig(dir=str(root / "sessions")),
    )
    found: list[Path] = []

    async def main() -> None:
        async with relay.open_session(config, model=ScriptedModel(SCRIPT)) as session:
            assert session.rollout is not None
            found.append(session.rollout.path)
            ended: set[str] = set()
            all_ended = trio.Event()

            async def read() -> None:
                async for event in session.events():
                    if isinstance(event.msg, p.SubAgentEnded):
                        ended.add(event.msg.path)
                        if ended >= AGENTS.keys():
                            all_ended.set()
                    if isinstance(event.msg, p.ShutdownComplete) and event.agent is None:
                        return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                await session.ask(ROOT_TASK)
                await all_ended.wait()
                await session.submit(relay.Shutdown())

    trio.run(main)
    return found[0]


__all__ = ["AGENTS", "ROOT_TASK", "SCRIPT", "tree_rollout"]
