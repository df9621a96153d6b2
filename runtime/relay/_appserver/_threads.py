"""A thread of ``relay app-server``: one session, its translator, and what the answers about it
say; with the plain functions that choose its configuration, find its rollout and read back
its turns.

A thread's id is its session's id: ``thread/resume`` finds the session's rollout by it, under
the rollout directory, as ``relay resume`` would be given the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import attrs

from .._base import _protocol as p
from .._base._config import Config, relay_home
from .._base._errors import ConfigError
from .._codex._defaults import with_codex_tools
from .._core._session import Session
from .._rollout._lines import EventMsgLine, RolloutLine
from ._agents import AgentThreads
from ._notes import Translator, spawn_source, thread_json, turn_json
from ._params import SandboxAsked, ThreadSettings, invalid
from ._rpc import Message, RequestId
from ._store import Summary

#: What a thread id may hold: it names a file.
_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def thread_config(base: Config, settings: ThreadSettings, *, where: str = "") -> Config:
    """``base`` with what ``thread/start`` or ``thread/resume`` set.

    Raises:
        RpcError: a setting names nothing (an unknown provider).
    """
    base = with_codex_tools(base)
    changes: dict[str, Any] = {}
    if settings.model is not None:
        changes["model"] = settings.model
    if settings.model_provider is not None:
        changes["model_provider"] = settings.model_provider
    if settings.cwd is not None:
        changes["cwd"] = os.path.abspath(settings.cwd)
    if settings.base_instructions is not None:
        changes["base_instructions"] = settings.base_instructions
        changes["base_instructions_file"] = None
    if settings.developer_instructions is not None:
        changes["developer_instructions"] = settings.developer_instructions
    if settings.approval_policy is not None:
        changes["approval_policy"] = settings.approval_policy
    if settings.sandbox is not None:
        changes["sandbox_mode"] = settings.sandbox
    if settings.ephemeral:
        changes["rollout"] = attrs.evolve(base.rollout, enabled=False)
    config = attrs.evolve(base, **changes)
    try:
        config.provider()
    except ConfigError as exc:
        raise invalid(f"{where}modelProvider", str(exc)) from None
    return config


def rule_keys(settings: ThreadSettings) -> set[str]:
    """The configuration keys of a session's rules that ``thread/resume`` names
    (``approvalPolicy``, ``sandbox``): a resumed thread takes those from the request and keeps
    the rest of the rules it recorded."""
    named = (("approval_policy", settings.approval_policy), ("sandbox_mode", settings.sandbox))
    return {key for key, value in named if value is not None}


def rollout_root(config: Config) -> Path:
    """The directory rollouts are written under."""
    return Path(config.rollout.dir) if config.rollout.dir else relay_home() / "sessions"


def find_rollout(root: Path, thread_id: str) -> Path:
    """The rollout of the session ``thread_id`` under ``root`` (the newest, if two are).

    Raises:
        RpcError: the id names no rollout there.
    """
    if not _THREAD_ID.fullmatch(thread_id):
        raise invalid("threadId", f"{thread_id!r} is not a thread id")
    found = sorted(root.glob(f"**/rollout-*-{thread_id}.jsonl"))
    if not found:
        raise invalid("threadId", f"no rollout of thread {thread_id} under {root}")
    return found[-1]


def history_turns(lines: Iterable[RolloutLine]) -> list[Message]:
    """The turns a rollout records, each with its user and agent messages (the legacy mirrors
    every rollout keeps) and how it ended."""
    turns: list[Message] = []
    current: Message | None = None
    for line in lines:
        if not isinstance(line, EventMsgLine):
            continue
        match line.msg:
            case p.TurnStarted(turn_id=turn_id, started_at=started_at):
                current = turn_json(turn_id, "inProgress", items=[], started_at=int(started_at))
                turns.append(current)
            case p.UserMessage(message=text) if current is not None:
                item_id = f"{current['id']}-{len(current['items']) + 1}"
                part = {"type": "text", "text": text, "text_elements": []}
                current["items"].append({"type": "userMessage", "id": item_id, "content": [part]})
            case p.AgentMessage(message=text) if current is not None:
                item_id = f"{current['id']}-{len(current['items']) + 1}"
                current["items"].append({"type": "agentMessage", "id": item_id, "text": text})
            case p.ErrorEvent(message=message) if current is not None:
                current["error"] = {"message": message}
            case p.TurnComplete(duration_ms=ms) if current is not None:
                current["status"] = "failed" if current["error"] else "completed"
                current["durationMs"] = ms
                current = None
            case p.TurnAborted(duration_ms=ms) if current is not None:
                current["status"] = "interrupted"
                current["error"] = None
                current["durationMs"] = ms
                current = None
    for turn in turns:
        turn["itemsView"] = "full"
        if turn["status"] == "inProgress":  # the process that ran it stopped mid-turn
            turn["status"] = "interrupted"
    return turns


def first_user_message(turns: Iterable[Message]) -> str:
    """The text of the first user message of ``turns`` (empty: none)."""
    for turn in turns:
        for item in turn["items"]:
            if item["type"] == "userMessage":
                return "".join(part.get("text", "") for part in item["content"])
    return ""


def stored_thread_json(
    summary: Summary, version: str, *, turns: list[Message] | None = None
) -> Message:
    """The ``Thread`` of a rollout no thread of this server has open (``notLoaded``)."""
    path = summary.file.path
    made = thread_json(
        summary.file.thread_id,
        cwd=summary.cwd or "/",
        model=summary.model or "",
        model_provider=summary.model_provider,
        created_at=summary.created_at,
        path=str(path),
        version=summary.version or version,
        turns=turns,
        preview=summary.preview or "",
    )
    made["model"] = summary.model
    made["status"] = {"type": "notLoaded"}
    made["updatedAt"] = max(summary.created_at, summary.file.mtime())
    made["name"] = summary.name
    made["forkedFromId"] = summary.forked_from
    if summary.parent_id is not None:
        spawn = spawn_source(summary.parent_id, summary.agent_path, summary.agent_role)
        made["source"] = {"subAgent": {"thread_spawn": spawn}}
        made["parentThreadId"] = summary.parent_id
        made["agentRole"] = summary.agent_role
        made["agentNickname"] = None
    return made


@attrs.define
class Thread:
    """A thread the server has open."""

    session: Session
    """Its session."""
    notes: Translator
    """What makes its notifications."""
    created_at: int
    """Unix seconds."""
    model: str
    """Its model, as the session opened."""
    model_provider: str
    """Its provider."""
    path: str | None
    """Its rollout file (None: ephemeral)."""
    name: str | None = None
    """The name a client gave it (``thread/name/set``)."""
    forked_from: str | None = None
    """The thread it was forked from."""
    preview: str = ""
    """Its first user message, as far as known."""
    ended: anyio.Event = attrs.field(factory=anyio.Event)
    """Set once its session has ended and its rollout is closed."""
    agents: AgentThreads | None = None
    """Its sub-agents' threads (None: it shows none)."""

    def translate(self, event: p.Event, now_ms: int) -> list[Message]:
        """The notifications of an event of its session's stream: its own, or a
        sub-agent's on the sub-agent's thread."""
        if self.agents is None:
            return [] if event.agent is not None else self.notes.translate(event, now_ms)
        return self.agents.translate(self.notes, event, now_ms)

    def resolve(
        self, request_id: RequestId, *, declined: bool
    ) -> tuple[Translator, str, Message] | None:
        """The client answered approval request ``request_id``: the translator of the
        thread that asked (its own, or a sub-agent's), the call's id and
        ``serverRequest/resolved`` (None: none of them asked it)."""
        found = self.notes.resolve(request_id, declined=declined)
        if found is not None:
            return self.notes, *found
        return None if self.agents is None else self.agents.resolve(request_id, declined=declined)

    @property
    def id(self) -> str:
        """The thread id: the session's."""
        return self.session.id

    def json(self, version: str, turns: list[Message] | None = None) -> Message:
        """The ``Thread`` object."""
        if not self.preview and turns:
            self.preview = first_user_message(turns)
        made = thread_json(
            self.id,
            cwd=self.notes.cwd,
            model=self.model,
            model_provider=self.model_provider,
            created_at=self.created_at,
            path=self.path,
            version=version,
            running=self.notes.running is not None,
            turns=turns,
            preview=self.preview,
        )
        made["name"] = self.name
        made["forkedFromId"] = self.forked_from
        return made

    def answer(self, version: str, turns: list[Message] | None = None) -> Message:
        """The answer to ``thread/start`` or ``thread/resume``."""
        return {
            "thread": self.json(version, turns),
            "model": self.model,
            "modelProvider": self.model_provider,
            "cwd": self.notes.cwd,
            "approvalPolicy": self.session.config.approval_policy,
            "approvalsReviewer": "user",
            "sandbox": sandbox_policy(self.session.config),
            "reasoningEffort": None,
        }


def sandbox_policy(config: Config) -> Message:
    """The ``SandboxPolicy`` of a configuration's sandbox mode."""
    if config.sandbox_mode == "read-only":
        return {"type": "readOnly", "networkAccess": False}
    if config.sandbox_mode == "workspace-write":
        write = config.sandbox_workspace_write
        return {
            "type": "workspaceWrite",
            "writableRoots": [os.path.abspath(root) for root in write.writable_roots],
            "networkAccess": write.network_access,
            "excludeTmpdirEnvVar": write.exclude_tmpdir_env_var,
            "excludeSlashTmp": write.exclude_slash_tmp,
        }
    return {"type": "dangerFullAccess"}


def sandbox_difference(config: Config, asked: SandboxAsked, cwd: str) -> str | None:
    """What the sandbox ``asked`` changes of the rules of a session of ``config`` whose
    working directory is ``cwd``; None when it changes nothing. The working directory is
    always writable under ``workspace-write``: listing it among ``writableRoots`` changes
    nothing."""
    if asked.mode != config.sandbox_mode:
        return f"the sandbox mode becomes {asked.mode!r} (was {config.sandbox_mode!r})"
    if asked.mode != "workspace-write":
        return None
    write = config.sandbox_workspace_write
    here = os.path.abspath(cwd)
    have = {os.path.abspath(os.path.join(here, root)) for root in write.writable_roots}
    want = {os.path.abspath(os.path.join(here, root)) for root in asked.writable_roots} - {here}
    if want != have:
        added = ", ".join(sorted(want - have)) or "none"
        removed = ", ".join(sorted(have - want)) or "none"
        return f"writableRoots change (added: {added}; removed: {removed})"
    if asked.network_access != write.network_access:
        return f"networkAccess becomes {str(asked.network_access).lower()}"
    return None


def extra_roots(asked: SandboxAsked, cwd: str) -> tuple[str, ...]:
    """The writable roots ``asked`` lists besides the working directory ``cwd``."""
    here = os.path.abspath(cwd)
    roots = (os.path.abspath(os.path.join(here, root)) for root in asked.writable_roots)
    return tuple(dict.fromkeys(root for root in roots if root != here))


__all__ = [
    "Thread",
    "first_user_message",
    "stored_thread_json",
    "find_rollout",
    "history_turns",
    "rollout_root",
    "rule_keys",
    "sandbox_policy",
    "extra_roots",
    "sandbox_difference",
    "thread_config",
]
