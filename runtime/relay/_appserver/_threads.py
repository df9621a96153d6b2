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

import attrs

from .._base import _protocol as p
from .._base._config import Config, relay_home
from .._base._errors import ConfigError
from .._core._session import Session
from .._rollout._lines import EventMsgLine, RolloutLine
from ._notes import Translator, thread_json, turn_json
from ._params import SandboxAsked, ThreadSettings, invalid
from ._rpc import Message

#: What a thread id may hold: it names a file.
_THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def thread_config(base: Config, settings: ThreadSettings, *, where: str = "") -> Config:
    """``base`` with what ``thread/start`` or ``thread/resume`` set.

    Raises:
        RpcError: a setting names nothing (an unknown provider).
    """
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

    @property
    def id(self) -> str:
        """The thread id: the session's."""
        return self.session.id

    def json(self, version: str, turns: list[Message] | None = None) -> Message:
        """The ``Thread`` object."""
        return thread_json(
            self.id,
            cwd=self.notes.cwd,
            model=self.model,
            model_provider=self.model_provider,
            created_at=self.created_at,
            path=self.path,
            version=version,
            running=self.notes.running is not None,
            turns=turns,
        )

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


def sandbox_refusal(config: Config, asked: SandboxAsked) -> str | None:
    """Why a turn cannot run with the sandbox ``asked`` in a session of ``config`` (relay's
    sandbox is the session's, set when it opens); None when it is the session's own."""
    write = config.sandbox_workspace_write
    same = asked.mode == config.sandbox_mode and (
        asked.mode != "workspace-write"
        or (
            {os.path.abspath(root) for root in asked.writable_roots}
            <= {os.path.abspath(root) for root in write.writable_roots}
            and asked.network_access == write.network_access
        )
    )
    if same:
        return None
    return (
        f"the thread's sandbox is {config.sandbox_mode!r} and a turn cannot change it "
        "(a session's sandbox is set when it opens: start a thread with sandbox)"
    )


__all__ = [
    "Thread",
    "find_rollout",
    "history_turns",
    "rollout_root",
    "rule_keys",
    "sandbox_policy",
    "sandbox_refusal",
    "thread_config",
]
