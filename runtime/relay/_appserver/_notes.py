"""A thread's relay events as the app-server's notifications (docs/codex-compat.md).

Theory of operation. One :class:`Translator` per thread sees every event of its session, in
order, and returns the notifications each one makes (often none: ``session_configured``,
the legacy mirrors, hooks, the work-state record). It keeps what a later notification needs
and no event carries: when each turn and each tool call started, a turn's error and its last
answer, the working directory, the calls whose approval the client declined. It is plain:
the time is given to it with each event.

- ``turn_started`` is ``turn/started``; ``turn_complete`` is ``turn/completed`` with status
  ``completed``, or ``failed`` with the error when an ``error`` came in the turn;
  ``turn_aborted`` is ``turn/completed`` with status ``interrupted``;
- ``item_started`` / ``item_completed`` are ``item/started`` / ``item/completed``
  (:mod:`relay._codex._items`), ``agent_message_delta`` is ``item/agentMessage/delta``,
  ``reasoning_summary_delta`` is ``item/reasoning/summaryTextDelta`` and
  ``exec_command_output_delta`` is ``item/commandExecution/outputDelta``;
- a patch is a ``fileChange`` item: started at ``patch_apply_begin`` (or when it asks for
  approval, ``item/fileChange/requestApproval``), completed at ``patch_apply_end``, or when
  its call ends without one (declined); a call that was no patch or did not apply has none, as
  in Codex; ``turn_diff`` is ``turn/diff/updated``;
- a sub-agent tool's call (``agent_call``) is a ``collabAgentToolCall`` item, with the model a
  spawned agent runs (from the ``sub_agent_spawned`` seen before the call ends);
- ``plan_update`` is ``turn/plan/updated`` (the ``update_plan`` call has no item);
- ``token_count`` is ``thread/tokenUsage/updated``;
- ``error`` is ``error`` (``willRetry`` false), ``stream_error`` is ``error`` with
  ``willRetry`` true, and ``warning`` is ``warning``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._errors import ErrorCode
from .._codex import _calls, _items
from .._codex._calls import approval_command
from ._rpc import Message, RequestId, notification, request


def turn_json(
    turn_id: str,
    status: str,
    *,
    items: list[Message] | None = None,
    error: Message | None = None,
    started_at: int | None = None,
    completed_at: int | None = None,
    duration_ms: int | None = None,
) -> Message:
    """A ``Turn``: ``items`` None when the turn's items are not listed (``notLoaded``)."""
    return {
        "id": turn_id,
        "items": items or [],
        "itemsView": "notLoaded" if items is None else "summary",
        "status": status,
        "error": error,
        "startedAt": started_at,
        "completedAt": completed_at,
        "durationMs": duration_ms,
    }


#: The ``codexErrorInfo`` of relay's error codes that have a counterpart (any other: ``other``).
ERROR_INFO: dict[ErrorCode, Any] = {
    ErrorCode.CONTEXT_WINDOW_EXCEEDED: "contextWindowExceeded",
    ErrorCode.QUOTA_EXCEEDED: "usageLimitExceeded",
    ErrorCode.USAGE_LIMIT: "usageLimitExceeded",
    ErrorCode.UNAUTHORIZED: "unauthorized",
    ErrorCode.BAD_REQUEST: "badRequest",
    ErrorCode.SERVER_ERROR: "internalServerError",
    ErrorCode.STREAM: {"responseStreamDisconnected": {"httpStatusCode": None}},
}


def usage_json(usage: p.TokenUsage) -> Message:
    """A ``TokenUsageBreakdown``."""
    return {
        "totalTokens": usage.total_tokens,
        "inputTokens": usage.input_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "outputTokens": usage.output_tokens,
        "reasoningOutputTokens": usage.reasoning_output_tokens,
    }


@attrs.define
class _Turn:
    """What the translator knows of a turn that has started and not ended."""

    started_at: int
    """Unix seconds."""
    error: Message | None = None
    """The ``TurnError`` of the turn's last ``error`` event."""
    answer: Message | None = None
    """The turn's last ``agentMessage``."""
    calls: dict[str, tuple[p.ToolCallItem, int]] = attrs.field(factory=dict)
    """Tool calls in progress, with their start in milliseconds."""
    agent_calls: dict[str, p.AgentCallItem] = attrs.field(factory=dict)
    """Sub-agent calls in progress."""
    patches: dict[str, tuple[p.FileChange, ...] | None] = attrs.field(factory=dict)
    """The patches whose ``fileChange`` item has started, with their changes, by call id;
    None once the item has completed."""


@attrs.define
class Translator:
    """One thread's notifications, made from its session's events."""

    thread_id: str
    """The thread: the session's id."""
    cwd: str
    """The working directory commands run in (``session_configured``'s, then the turns')."""
    mcp_tool: Callable[[str], tuple[str, str] | None] = lambda name: None
    """The server and the name of an MCP server's tool, by the name the model calls it (None:
    no MCP server's); the session's tools say."""
    turns: dict[str, _Turn] = attrs.field(factory=dict)
    """The turns that have started and not ended, by id."""
    declined: set[str] = attrs.field(factory=set)
    """Calls the client declined to run (their items end ``declined``)."""
    asked: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    """The approval requests waiting for the client, by request id: their turn and call."""
    patch_calls: set[str] = attrs.field(factory=set)
    """The calls whose approval request was a patch's (answered with ``patch_approval``)."""
    agent_id: str | None = None
    """The sub-agent whose events these are, in its root's stream (None: the root's own):
    a decision on one of its calls names it."""
    spawned_models: dict[str, str] = attrs.field(factory=dict)
    """The model of each agent this thread spawned, by id."""
    _asked_count: int = attrs.field(default=0, init=False)
    _parts: set[tuple[str, int]] = attrs.field(factory=set, init=False)

    @property
    def running(self) -> str | None:
        """The turn running, if one is."""
        return next(reversed(self.turns), None)

    def translate(self, event: p.Event, now_ms: int) -> list[Message]:
        """The notifications ``event`` makes, at ``now_ms`` (Unix milliseconds)."""
        msg = event.msg
        thread = self.thread_id
        match msg:
            case p.SessionConfigured(cwd=cwd):
                self.cwd = cwd
            case p.TurnStarted(turn_id=turn_id, started_at=started_at):
                turn = _Turn(int(started_at))
                self.turns[turn_id] = turn
                started = turn_json(turn_id, "inProgress", started_at=turn.started_at)
                return [notification("turn/started", {"threadId": thread, "turn": started})]
            case p.TurnComplete(turn_id=turn_id, duration_ms=duration_ms):
                return self._ended(turn_id, duration_ms, now_ms, aborted=False)
            case p.TurnAborted(turn_id=turn_id, duration_ms=duration_ms):
                return self._ended(turn_id, duration_ms, now_ms, aborted=True)
            case p.ItemStarted(item=p.ToolCallItem(name=_calls.APPLY_PATCH | _calls.UPDATE_PLAN)):
                return []  # shown by the patch's events, or the plan's
            case p.ItemCompleted(turn_id=turn_id, item=p.ToolCallItem(name=_calls.APPLY_PATCH)):
                assert isinstance(msg.item, p.ToolCallItem)
                return self._patch_call_ended(turn_id, msg.item, now_ms)
            case p.ItemCompleted(item=p.ToolCallItem(name=_calls.UPDATE_PLAN)):
                return []
            case p.ItemStarted(turn_id=turn_id, item=item):
                made = self._item(turn_id, item, now_ms, started=True)
                params = {
                    "item": made,
                    "threadId": thread,
                    "turnId": turn_id,
                    "startedAtMs": now_ms,
                }
                return [notification("item/started", params)]
            case p.ItemCompleted(turn_id=turn_id, item=item):
                made = self._item(turn_id, item, now_ms, started=False)
                params = {
                    "item": made,
                    "threadId": thread,
                    "turnId": turn_id,
                    "completedAtMs": now_ms,
                }
                return [notification("item/completed", params)]
            case p.AgentMessageDelta(turn_id=turn_id, item_id=item_id, delta=delta):
                params = {"threadId": thread, "turnId": turn_id, "itemId": item_id, "delta": delta}
                return [notification("item/agentMessage/delta", params)]
            case p.ReasoningSummaryDelta(turn_id=turn_id, item_id=item_id, delta=delta):
                part = {
                    "threadId": thread,
                    "turnId": turn_id,
                    "itemId": item_id,
                    "summaryIndex": msg.summary_index,
                }
                added: list[Message] = []
                if (item_id, msg.summary_index) not in self._parts:
                    # A part's first piece: Codex says the part was added first.
                    self._parts.add((item_id, msg.summary_index))
                    added.append(notification("item/reasoning/summaryPartAdded", part))
                delta_params = {**part, "delta": delta}
                return [*added, notification("item/reasoning/summaryTextDelta", delta_params)]
            case p.ExecCommandOutputDelta(turn_id=turn_id, call_id=call_id, chunk=chunk):
                params = {"threadId": thread, "turnId": turn_id, "itemId": call_id, "delta": chunk}
                return [notification("item/commandExecution/outputDelta", params)]
            case p.PlanUpdate(turn_id=turn_id, plan=plan, explanation=explanation):
                params = {
                    "threadId": thread,
                    "turnId": turn_id,
                    "explanation": explanation,
                    "plan": _items.plan_steps(plan),
                }
                return [notification("turn/plan/updated", params)]
            case p.TurnDiff(turn_id=turn_id, unified_diff=diff):
                params = {"threadId": thread, "turnId": turn_id, "diff": diff}
                return [notification("turn/diff/updated", params)]
            case p.PatchApplyBegin(turn_id=turn_id, call_id=call_id, changes=changes):
                return self._patch_started(turn_id, call_id, changes, now_ms)
            case p.PatchApplyEnd(turn_id=turn_id, call_id=call_id, changes=changes):
                status = "completed" if msg.success else "failed"
                return self._patch_ended(turn_id, call_id, changes, status, now_ms)
            case p.ApplyPatchApprovalRequest():
                opened = self._patch_started(msg.turn_id, msg.call_id, msg.changes, now_ms)
                return [*opened, self._ask_patch(msg, now_ms)]
            case p.TokenCount(info=info) if info is not None:
                usage = {
                    "total": usage_json(info.total_token_usage),
                    "last": usage_json(info.last_token_usage),
                    "modelContextWindow": info.model_context_window,
                }
                params = {"threadId": thread, "turnId": event.id, "tokenUsage": usage}
                return [notification("thread/tokenUsage/updated", params)]
            case p.ErrorEvent(message=message, code=code):
                error = {"message": message, "codexErrorInfo": ERROR_INFO.get(code, "other")}
                return [self._error(event.id, error, will_retry=False)]
            case p.StreamErrorEvent(message=message, detail=detail):
                error = {"message": message, "additionalDetails": detail}
                return [self._error(event.id, error, will_retry=True)]
            case p.WarningEvent(message=message):
                return [notification("warning", {"threadId": thread, "message": message})]
            case p.ExecApprovalRequest():
                return [self._ask(msg, now_ms)]
            case p.SubAgentSpawned(agent_id=agent_id, model=model):
                self.spawned_models[agent_id] = model
        return []

    def _patch_started(
        self, turn_id: str, call_id: str, changes: tuple[p.FileChange, ...], now_ms: int
    ) -> list[Message]:
        turn = self.turns.get(turn_id)
        if turn is None or call_id in turn.patches:
            return []  # started already, when it asked for approval
        turn.patches[call_id] = changes
        item = _items.file_change(call_id, changes, "in_progress")
        params = {"item": item, "threadId": self.thread_id, "turnId": turn_id}
        return [notification("item/started", {**params, "startedAtMs": now_ms})]

    def _patch_ended(
        self,
        turn_id: str,
        call_id: str,
        changes: tuple[p.FileChange, ...],
        status: str,
        now_ms: int,
    ) -> list[Message]:
        turn = self.turns.get(turn_id)
        if turn is not None:
            if turn.patches.get(call_id, ()) is None:
                return []  # ended already
            turn.patches[call_id] = None
        item = _items.file_change(call_id, changes, status)
        params = {"item": item, "threadId": self.thread_id, "turnId": turn_id}
        return [notification("item/completed", {**params, "completedAtMs": now_ms})]

    def _patch_call_ended(self, turn_id: str, item: p.ToolCallItem, now_ms: int) -> list[Message]:
        """A patch's call ended: its item, started when it asked for approval, ends here when
        no ``patch_apply_end`` ended it (the client declined it). A call that was no patch, or
        did not apply, never had an item, as in Codex."""
        turn = self.turns.get(turn_id)
        changes = turn.patches.get(item.id, None) if turn is not None else None
        if changes is None:
            return []
        declined = item.id in self.declined or (
            item.result is not None and item.result.status is p.CallStatus.DECLINED
        )
        status = "declined" if declined else "failed"
        return self._patch_ended(turn_id, item.id, changes, status, now_ms)

    def _ask_patch(self, asked: p.ApplyPatchApprovalRequest, now_ms: int) -> Message:
        request_id = self._request_id(asked.turn_id, asked.call_id)
        self.patch_calls.add(asked.call_id)
        params = {
            "threadId": self.thread_id,
            "turnId": asked.turn_id,
            "itemId": asked.call_id,
            "startedAtMs": now_ms,
            "reason": asked.reason,
            "grantRoot": asked.grant_root,
        }
        return request(request_id, "item/fileChange/requestApproval", params)

    def _request_id(self, turn_id: str, call_id: str) -> str:
        self._asked_count += 1
        request_id = f"{self.thread_id}:approval-{self._asked_count}"
        self.asked[request_id] = (turn_id, call_id)
        return request_id

    def decision_op(self, call_id: str, decision: p.ReviewDecision) -> p.Op:
        """The op that gives ``decision`` to the call ``call_id``: a patch's, or a command's."""
        if call_id in self.patch_calls:
            return p.PatchApproval(call_id, decision, agent_id=self.agent_id)
        return p.ExecApproval(call_id, decision, agent_id=self.agent_id)

    def _ask(self, asked: p.ExecApprovalRequest, now_ms: int) -> Message:
        request_id = self._request_id(asked.turn_id, asked.call_id)
        command = approval_command(asked.command)
        params = {
            "threadId": self.thread_id,
            "turnId": asked.turn_id,
            "itemId": asked.call_id,
            "startedAtMs": now_ms,
            "command": command,
            "cwd": asked.cwd,
            "reason": asked.reason,
            "commandActions": [{"type": "unknown", "command": command}],
        }
        return request(request_id, "item/commandExecution/requestApproval", params)

    def resolve(self, request_id: RequestId, *, declined: bool) -> tuple[str, Message] | None:
        """The client answered approval request ``request_id``: the call's id and
        ``serverRequest/resolved`` (None when no such request waits). A ``declined`` call's
        item ends ``declined``."""
        found = self.asked.pop(request_id, None) if isinstance(request_id, str) else None
        if found is None:
            return None
        if declined:
            self.declined.add(found[1])
        params = {"threadId": self.thread_id, "requestId": request_id}
        return found[1], notification("serverRequest/resolved", params)

    def _error(self, turn_id: str, error: Message, *, will_retry: bool) -> Message:
        turn = self.turns.get(turn_id)
        if turn is not None and not will_retry:
            turn.error = error
        params = {"error": error, "threadId": self.thread_id, "turnId": turn_id}
        return notification("error", {**params, "willRetry": will_retry})

    def _item(self, turn_id: str, item: p.TurnItem, now_ms: int, *, started: bool) -> Message:
        turn = self.turns.get(turn_id)
        match item:
            case p.UserMessageItem():
                return _items.user_message(item)
            case p.AgentMessageItem(id=item_id, text=text):
                made = _items.agent_message(item_id, text)
                if not started and turn is not None:
                    turn.answer = made
                return made
            case p.ReasoningItem():
                return _items.reasoning(item)
            case p.ToolCallItem(id=call_id):
                duration = None
                if turn is not None:
                    if started:
                        turn.calls[call_id] = (item, now_ms)
                    elif call_id in turn.calls:
                        duration = max(0, now_ms - turn.calls.pop(call_id)[1])
                return _items.tool_call(
                    item,
                    cwd=self.cwd,
                    mcp_tool=self.mcp_tool,
                    duration_ms=duration,
                    declined=not started and call_id in self.declined,
                )
            case p.ContextCompactionItem(id=item_id):
                return _items.compaction(item_id)
            case p.AgentCallItem(id=call_id):
                if turn is not None:
                    if started:
                        turn.agent_calls[call_id] = item
                    else:
                        turn.agent_calls.pop(call_id, None)
                return self._agent_call(item)
        raise AssertionError(f"not a turn item: {item!r}")

    def _agent_call(self, item: p.AgentCallItem, *, aborted: bool = False) -> Message:
        spawned = item.tool is p.AgentTool.SPAWN_AGENT and item.receiver_ids
        model = self.spawned_models.get(item.receiver_ids[0]) if spawned else None
        return _items.agent_call(item, model=model, aborted=aborted)

    def _ended(
        self, turn_id: str, duration_ms: int, now_ms: int, *, aborted: bool
    ) -> list[Message]:
        turn = self.turns.pop(turn_id, None) or _Turn((now_ms - duration_ms) // 1000)
        # A call the turn's end cut short reports no end of its own (its output, "aborted",
        # went to the history alone): its item ends here, before the turn.
        made = [
            notification(
                "item/completed",
                {
                    "item": _items.tool_call(
                        item,
                        cwd=self.cwd,
                        mcp_tool=self.mcp_tool,
                        duration_ms=max(0, now_ms - started_ms),
                        declined=call_id in self.declined,
                        aborted=True,
                    ),
                    "threadId": self.thread_id,
                    "turnId": turn_id,
                    "completedAtMs": now_ms,
                },
            )
            for call_id, (item, started_ms) in turn.calls.items()
        ]
        made += [
            notification(
                "item/completed",
                {
                    "item": self._agent_call(item, aborted=True),
                    "threadId": self.thread_id,
                    "turnId": turn_id,
                    "completedAtMs": now_ms,
                },
            )
            for item in turn.agent_calls.values()
        ]
        status = "interrupted" if aborted else "failed" if turn.error is not None else "completed"
        ended = turn_json(
            turn_id,
            status,
            items=[turn.answer] if turn.answer is not None else [],
            error=None if aborted else turn.error,
            started_at=turn.started_at,
            completed_at=now_ms // 1000,
            duration_ms=duration_ms,
        )
        # A request the turn's end left unanswered is moot: the client may take it down.
        moot = [rid for rid, (asked_turn, _) in self.asked.items() if asked_turn == turn_id]
        made[:0] = [
            notification("serverRequest/resolved", {"threadId": self.thread_id, "requestId": rid})
            for rid in moot
        ]
        for rid in moot:
            del self.asked[rid]
        made.append(notification("turn/completed", {"threadId": self.thread_id, "turn": ended}))
        return made


def thread_json(
    thread_id: str,
    *,
    cwd: str,
    model: str,
    model_provider: str,
    created_at: int,
    path: str | None,
    version: str,
    running: bool = False,
    turns: list[Message] | None = None,
    preview: str = "",
    spawn: Message | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """A ``Thread``: a session, as the app-server shows it. ``spawn``: a sub-agent's
    ``thread_spawn`` source (its parent, depth, path and role); ``session_id``: the root of its
    tree (None: the thread itself)."""
    status: Message = {"type": "active", "activeFlags": []} if running else {"type": "idle"}
    made = {
        "id": thread_id,
        "sessionId": session_id or thread_id,
        "forkedFromId": None,
        "parentThreadId": None,
        "preview": preview,
        "ephemeral": path is None,
        "modelProvider": model_provider,
        "model": model,
        "createdAt": created_at,
        "updatedAt": created_at,
        "status": status,
        "path": path,
        "cwd": cwd,
        "cliVersion": version,
        "source": "appServer",
        "projectId": None,
        "gitInfo": None,
        "name": None,
        "turns": turns or [],
    }
    if spawn is not None:
        made["source"] = {"subAgent": {"thread_spawn": spawn}}
        made["parentThreadId"] = spawn["parent_thread_id"]
        made["agentRole"] = spawn["agent_role"]
        made["agentNickname"] = spawn["agent_nickname"]
    return made


def spawn_source(
    parent_id: str, path: str | None, role: str | None, depth: int | None = None
) -> Message:
    """The ``thread_spawn`` source of a sub-agent; its depth, when not given, is its path's
    (``/root/1/2``: 2)."""
    if depth is None:
        depth = max(1, len([part for part in (path or "").split("/") if part]) - 1)
    return {
        "parent_thread_id": parent_id,
        "depth": depth,
        "agent_path": path,
        "agent_role": role,
        "agent_nickname": None,
    }


__all__ = ["Translator", "spawn_source", "thread_json", "turn_json", "usage_json"]
