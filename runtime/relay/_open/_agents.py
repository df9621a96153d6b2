"""Opening a sub-agent: a session of its own, in its parent's nursery, with what it inherits
(docs/agents.md).

A child gets its parent's model clients, its program's and MCP servers' tools, its tasks,
compactor, hooks, clock and decision callback, and the parent's rules as they stand when it
spawns, each narrowed by the child's role (model, reasoning effort, instructions, tools, a
stricter approval policy or sandbox). It writes a rollout of its own whose first line names
its parent and its path; opened again from that rollout (``resume_agent``, a resumed tree), it
goes on with the rules it recorded, as any resumed session does.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

import attrs

from .._base import _protocol as p
from .._base._agents_config import AgentRole
from .._base._config import Config
from .._base._exec_rules import narrowed
from .._base._model import ModelClient
from .._base._tokens import TokenEstimator
from .._core._agent_rules import ChildSpec, Tree
from .._core._builtin import BUILTIN_TOOLS
from .._core._exec_gate import ApprovalCallback
from .._core._hooks import CompactHook
from .._core._port import CompactionPolicy
from .._core._tools import RECALL_TOOL, Tool, ToolRegistry
from ._tasks import TaskFactory


@attrs.frozen(eq=False)
class ChildParts:
    """What a session hands down to the children it opens."""

    config: Config
    """Its configuration (its ``[agents]`` table is the tree's)."""
    model: ModelClient
    """Its model client."""
    compact_model: ModelClient
    """Its client of compaction summaries."""
    api_key: str | None
    """The provider's key, kept out of what the children record."""
    registry: ToolRegistry
    """Its tools: the children get those that are not built in."""
    tree: Tree
    """What the tree shares."""
    clock: Callable[[], datetime]
    rng: random.Random | None
    estimator: TokenEstimator | None
    hooks: tuple[CompactHook, ...]
    tasks: Mapping[str, TaskFactory | str] | None
    compactor: Callable[[], CompactionPolicy] | None
    on_approval: ApprovalCallback | None


def child_config(
    parent: Config, spec: ChildSpec, role: AgentRole, root_instructions: str | None
) -> Config:
    """A child's configuration: its parent's, in the parent's working directory, with the
    parent's rules as they stood at the spawn, narrowed and changed by ``role`` (whose
    instructions follow the root's, not a parent role's)."""
    rules = narrowed(spec.rules, role.approval_policy, role.sandbox_mode)
    instructions = [text for text in (root_instructions, role.instructions) if text]
    tools = dict(parent.tools)
    if role.tools is not None:
        tools = {name: name in role.tools for name in BUILTIN_TOOLS}
    config = attrs.evolve(
        parent,
        model=role.model or spec.model,
        cwd=spec.cwd,
        developer_instructions="\n\n".join(instructions) or None,
        tools=tools,
        mcp_servers={},
    )
    return rules.apply(config)


def inherited_tools(parts: ChildParts, role: AgentRole) -> list[Tool]:
    """The tools a child gets besides the built-in ones: its parent's own (a program's, an
    MCP server's), those of the role's list when it has one."""
    made_here = {*BUILTIN_TOOLS, RECALL_TOOL}
    names = [name for name in parts.registry.names() if name not in made_here]
    if role.tools is not None:
        names = [name for name in names if name in role.tools]
    return [tool for name in names if (tool := parts.registry.get(name)) is not None]


def decided_for(
    callback: ApprovalCallback,
    ref: p.AgentRef,
    request: p.ExecApprovalRequest | p.ApplyPatchApprovalRequest,
) -> p.ReviewDecision | str | Awaitable[p.ReviewDecision | str]:
    """The root's callback, told which sub-agent asks."""
    return callback(attrs.evolve(request, agent=ref))


__all__ = ["ChildParts", "child_config", "decided_for", "inherited_tools"]
