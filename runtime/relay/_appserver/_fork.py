"""``thread/fork``: a new thread whose history is another's, up to a turn (docs/codex-compat.md).

A fork is a copy of the original's rollout, through the end of the turn it names (all of it
when it names none), under a new session id: the first line, ``session_meta``, is the new
session's; the others are the original's bytes, but for the decisions that approved a
command for the original session (the fork asks again). The fork is then resumed from its
copy as any thread is (``thread/resume``'s path), so its history is exactly what the original
had at that point; the original's file is only read.

A prompt cache is keyed by ``prompt_cache_key``, which a session sets to its id: a fork would
never find the original's prefix under its own. So the fork's requests carry the original's
key (:class:`CacheKeyed`, recorded in the fork's sidecar so that a later resume keeps it),
and its first request finds the prefix the original's requests left in the cache.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

import attrs

from .._base._json import loads
from .._base._model import CompactRequest, ModelClient, ModelEvent, Prompt
from ._params import invalid

#: Rollout line types the copy leaves out: approvals granted to the original session.
_LEFT_OUT = frozenset({"approval"})


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _turn_end(record: dict[str, Any]) -> str | None:
    """The turn a line ends (``turn_complete``, ``turn_aborted``), if it ends one."""
    payload = record.get("payload")
    if record.get("type") != "event_msg" or not isinstance(payload, dict):
        return None
    if payload.get("type") in ("turn_complete", "turn_aborted"):
        turn = payload.get("turn_id")
        return turn if isinstance(turn, str) else None
    return None


def forked_lines(
    data: bytes, new_id: str, created: datetime, *, last_turn_id: str | None = None
) -> bytes:
    """The rollout of a fork of the rollout ``data``: through the end of ``last_turn_id``
    (None: all of it), with ``session_meta`` the new session's.

    Raises:
        RpcError: the rollout has no ``session_meta`` first, or ``last_turn_id`` names no
            turn that ended in it.
    """
    lines = data.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines.pop()  # cut short by a crash: what it lost is no part of the history
    first = _record(lines[0]) if lines else None
    if first is None or first.get("type") != "session_meta":
        raise invalid("threadId", "the thread's rollout does not start with session_meta")
    meta = dict(first["payload"])
    meta["id"] = new_id
    meta["created"] = created.isoformat()
    head = {**first, "timestamp": _stamp(created), "payload": meta}
    kept = [json.dumps(head, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"]
    ended = last_turn_id is None
    for line in lines[1:]:
        record = _record(line)
        if record is not None and record.get("type") in _LEFT_OUT:
            continue
        kept.append(line)
        if last_turn_id is not None and record is not None and _turn_end(record) == last_turn_id:
            ended = True
            break
    if not ended:
        raise invalid("lastTurnId", f"no turn {last_turn_id} ended in the thread")
    return b"".join(kept)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


@attrs.frozen
class CacheKeyed:
    """A model client whose requests carry ``key`` as their ``prompt_cache_key``."""

    inner: ModelClient
    """The client it wraps."""
    key: str
    """The prompt cache key: the thread's the fork comes from."""

    def stream(self, prompt: Prompt) -> AbstractAsyncContextManager[AsyncIterator[ModelEvent]]:
        """The inner client's stream, of ``prompt`` under ``key``."""
        return self.inner.stream(attrs.evolve(prompt, prompt_cache_key=self.key))

    async def compact(self, request: CompactRequest) -> Any:
        """The inner client's compaction."""
        return await self.inner.compact(request)


__all__ = ["CacheKeyed", "forked_lines"]
