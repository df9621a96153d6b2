"""relay's events as the event stream of ``codex exec --json`` (docs/codex-compat.md).

``relay exec --json`` (``--experimental-json``, its older name) writes one JSON object per
line, the events Codex 0.169 writes, so that a program written for Codex (its TypeScript SDK,
``@openai/codex-sdk``) reads relay's. :class:`CodexExecStream` folds relay's events into them:
plain state, no I/O, one call per event. The items' shapes are :mod:`relay._codex`'s; this
module frames them and remembers what a later event needs.

Theory of operation:

- ``session_configured`` is ``thread.started``: the thread id is the session id, so that
  ``resume THREAD_ID`` finds the session again.
- ``turn_started`` is ``turn.started``; the turn's end is ``turn.completed`` with the session's
  token usage so far (as Codex reports it: the thread's total, from the last ``token_count``),
  or ``turn.failed`` with the message of the turn's first ``error``. A turn aborted (a signal
  shut the session down) is ``turn.failed`` too, so that every ``turn.started`` has its end.
- Items get Codex's ids, ``item_0``, ``item_1``, … in the order they first appear; an item's
  ``item.started`` and ``item.completed`` share its id. Agent messages and reasoning are only
  ``item.completed``, as in Codex; tool calls are ``item.started`` then ``item.completed``.
- A patch is a ``file_change``, started at ``patch_apply_begin`` and completed at
  ``patch_apply_end``; the plan is a ``todo_list``, started at the first ``plan_update``,
  updated at each later one and completed when the turn ends.
- A call of a sub-agent tool (``agent_call``) is a ``collab_tool_call``, started and completed.
  The events of the sub-agents themselves (``Event.agent`` set) write nothing: the exec stream
  is the root thread's alone, whose ``thread.started`` it opens with (a child's turn never ends
  the root's; the calls' items say what the children did), and
  ``turn.completed``'s usage is the whole tree's (``token_count``'s ``tree_total``).
- ``warning`` is an ``error`` item; ``error`` and ``stream_error`` (a retry) are the top-level
  ``error`` event. Every other event has no counterpart and writes nothing.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._base import _protocol as p
from .._codex import _calls, _items
from .._codex._calls import APPLY_PATCH, UPDATE_PLAN, McpLookup, mcp_lookup
from .._codex._exec import exec_item, todo_list, usage_of

Line = dict[str, Any]

#: The tools whose calls show as an item of their own kind, made from other events.
_OWN_KIND = frozenset({APPLY_PATCH, UPDATE_PLAN})


@attrs.define
class CodexExecStream:
    """Folds relay's events into Codex's ``exec --json`` events."""

    _mcp: McpLookup = attrs.field(default=lambda name: None)
    _next_item: int = 0
    _item_ids: dict[str, str] = attrs.field(factory=dict)
    _total: p.TokenUsage | None = None
    _turn_errors: dict[str, str | None] = attrs.field(factory=dict)
    _plan: tuple[str, tuple[p.PlanStep, ...]] | None = None
    _patches: dict[str, tuple[p.FileChange, ...]] = attrs.field(factory=dict)
    _agent_ids: dict[str, str] = attrs.field(factory=dict)

    def _new_id(self) -> str:
        item_id = f"item_{self._next_item}"
        self._next_item += 1
        return item_id

    def _started_id(self, relay_id: str) -> str:
        return self._item_ids.setdefault(relay_id, self._new_id())

    def _completed_id(self, relay_id: str) -> str:
        return self._item_ids.pop(relay_id, None) or self._new_id()

    def _item(self, kind: str, app_item: Line, item_id: str) -> list[Line]:
        made = exec_item(app_item, item_id)
        return [] if made is None else [{"type": kind, "item": made}]

    def translate(self, event: p.Event) -> list[Line]:
        """The Codex events of one relay event, in order (often none)."""
        if isinstance(event.msg, p.SubAgentSpawned):
            self._agent_ids[event.msg.path] = event.msg.agent_id
        if event.agent is not None:
            return []  # a sub-agent's: the root's own events and its tree's usage say enough
        match event.msg:
            case p.SessionConfigured(session_id=session_id, mcp_servers=servers):
                self._mcp = mcp_lookup(servers)
                return [{"type": "thread.started", "thread_id": session_id}]
            case p.TurnStarted(turn_id=turn_id):
                self._turn_errors[turn_id] = None
                return [{"type": "turn.started"}]
            case p.ItemStarted(item=p.ToolCallItem() as item) if item.name not in _OWN_KIND:
                app = _items.tool_call(item, cwd="", mcp_tool=self._mcp)
                return self._item("item.started", app, self._started_id(item.id))
            case p.ItemCompleted(item=p.ToolCallItem() as item) if item.name not in _OWN_KIND:
                app = _items.tool_call(item, cwd="", mcp_tool=self._mcp)
                return self._item("item.completed", app, self._completed_id(item.id))
            case p.ItemStarted(item=p.AgentCallItem() as item):
                app = _items.agent_call(_items.by_agent_id(item, self._agent_ids))
                return self._item("item.started", app, self._started_id(item.id))
            case p.ItemCompleted(item=p.AgentCallItem() as item):
                app = _items.agent_call(_items.by_agent_id(item, self._agent_ids))
                return self._item("item.completed", app, self._completed_id(item.id))
            case (
                p.PatchApplyBegin(call_id=call_id, changes=changes)
                | p.ApplyPatchApprovalRequest(call_id=call_id, changes=changes)
            ):
                if call_id in self._patches:
                    return []  # started when it asked for approval
                self._patches[call_id] = changes
                app = _items.file_change(call_id, changes, "in_progress")
                return self._item("item.started", app, self._started_id(call_id))
            case p.PatchApplyEnd(call_id=call_id, changes=changes, success=success):
                self._patches.pop(call_id, None)
                app = _items.file_change(call_id, changes, "completed" if success else "failed")
                return self._item("item.completed", app, self._completed_id(call_id))
            case p.ItemCompleted(item=p.ToolCallItem(name=_calls.APPLY_PATCH, id=call_id)):
                # A patch that asked and was declined: its item ends failed, as in Codex.
                if call_id not in self._patches:
                    return []
                app = _items.file_change(call_id, self._patches.pop(call_id), "failed")
                return self._item("item.completed", app, self._completed_id(call_id))
            case p.PlanUpdate(plan=plan):
                kind = "item.started" if self._plan is None else "item.updated"
                item_id = self._new_id() if self._plan is None else self._plan[0]
                self._plan = (item_id, plan)
                return [{"type": kind, "item": todo_list(item_id, plan)}]
            case p.ItemCompleted(item=p.AgentMessageItem(id=item_id, text=text)):
                app = _items.agent_message(item_id, text)
                return self._item("item.completed", app, self._new_id())
            case p.ItemCompleted(item=p.ReasoningItem() as item):
                if not "\n".join(item.summary).strip():
                    return []  # an empty summary is no item, and takes no id
                return self._item("item.completed", _items.reasoning(item), self._new_id())
            case p.WarningEvent(message=message):
                line = {"id": self._new_id(), "type": "error", "message": message}
                return [{"type": "item.completed", "item": line}]
            case p.ErrorEvent(message=message):
                if event.id in self._turn_errors and self._turn_errors[event.id] is None:
                    self._turn_errors[event.id] = message
                return [{"type": "error", "message": message}]
            case p.StreamErrorEvent(message=message, detail=detail):
                return [{"type": "error", "message": f"{message} ({detail})"}]
            case p.TokenCount(info=info, tree_total=tree):
                if tree is not None:
                    self._total = tree
                elif info is not None:
                    self._total = info.total_token_usage
                return []
            case p.TurnComplete(turn_id=turn_id):
                made = self._plan_done()
                error = self._turn_errors.pop(turn_id, None)
                if error is not None:
                    return [*made, {"type": "turn.failed", "error": {"message": error}}]
                return [*made, {"type": "turn.completed", "usage": usage_of(self._total)}]
            case p.TurnAborted(turn_id=turn_id, reason=reason):
                made = self._plan_done()
                error = self._turn_errors.pop(turn_id, None)
                message = error or f"the turn was aborted ({reason.value})"
                return [*made, {"type": "turn.failed", "error": {"message": message}}]
            case _:
                return []

    def _plan_done(self) -> list[Line]:
        """The plan's ``todo_list``, completed as its turn ends (none when no plan was set)."""
        if self._plan is None:
            return []
        item_id, plan = self._plan
        self._plan = None
        return [{"type": "item.completed", "item": todo_list(item_id, plan)}]


__all__ = ["CodexExecStream"]
