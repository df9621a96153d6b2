"""The parameters of the thread store's methods, of ``thread/fork`` and ``turn/steer``, read
into plain values as :mod:`._params` reads the others (docs/codex-compat.md).

A filter of ``thread/list`` that relay cannot honour is read past when the schema makes it
optional and leaving it out shows the client more, never less, than it asked for
(``currentAccountOnly`` and ``useStateDbOnly``: relay has no accounts, and no database);
``sourceKinds`` tells sub-agents' threads (``subAgent``, ``subAgentThreadSpawn``) from root
threads, which pass for any other kind (relay's rollouts do not record which face started
them), and lists the root threads alone when empty;
``originators`` is refused when not empty, as Codex's own local server refuses it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import attrs

from .._base import _protocol as p
from ._params import Fields, ThreadSettings, input_item, invalid, read_settings
from ._store import ListQuery

#: The page size of ``thread/list`` when the client gives none, and the largest.
DEFAULT_LIMIT = 25
MAX_LIMIT = 500
#: The most ``excludedThreadIds`` a listing takes (Codex's bound).
MAX_EXCLUDED = 100


def _limit(fields: Fields, default: int | None) -> int | None:
    value = fields.raw("limit")
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise invalid("limit", "expected a non-negative integer")
    return max(1, min(value, MAX_LIMIT))


def _strings(fields: Fields, key: str) -> list[str] | None:
    value = fields.raw(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(each, str) for each in value):
        raise invalid(key, "expected an array of strings")
    return value


def thread_list(params: Any) -> ListQuery:
    """The parameters of ``thread/list``."""
    fields = Fields(params)
    cwd = fields.raw("cwd")
    cwds: frozenset[str] | None = None
    if isinstance(cwd, str):
        cwds = frozenset({os.path.abspath(cwd)})
    elif isinstance(cwd, list) and all(isinstance(each, str) for each in cwd):
        cwds = frozenset(os.path.abspath(each) for each in cwd)
    elif cwd is not None:
        raise invalid("cwd", "expected a path or an array of paths")
    providers = _strings(fields, "modelProviders")
    excluded = _strings(fields, "excludedThreadIds") or []
    if len(excluded) > MAX_EXCLUDED:
        raise invalid("excludedThreadIds", f"at most {MAX_EXCLUDED} ids")
    if _strings(fields, "originators"):
        raise invalid("originators", "relay's threads record no originator to filter on")
    kinds = _strings(fields, "sourceKinds") or []
    sort_key = fields.choice(
        "sortKey", ("created_at", "updated_at", "recency_at", "section_position")
    )
    direction = fields.choice("sortDirection", ("asc", "desc"))
    # Relay has no sections: every thread is outside one, so asking for a section finds none.
    in_section = isinstance(params, Mapping) and fields.text("sectionId") is not None
    limit = _limit(fields, DEFAULT_LIMIT)
    assert limit is not None
    return ListQuery(
        archived=bool(fields.flag("archived")),
        cursor=fields.text("cursor"),
        limit=limit,
        cwds=cwds,
        providers=frozenset(providers) if providers else None,
        search=fields.text("searchTerm") or None,
        excluded=frozenset(excluded),
        by_updated=sort_key in ("updated_at", "recency_at"),
        ascending=direction == "asc",
        no_threads=in_section,
        kinds=frozenset(kinds),
    )


def loaded_list(params: Any) -> tuple[str | None, int | None]:
    """The ``cursor`` and ``limit`` of ``thread/loaded/list``."""
    fields = Fields(params)
    return fields.text("cursor"), _limit(fields, None)


def thread_read(params: Any) -> tuple[str, bool]:
    """The ``threadId`` and ``includeTurns`` of ``thread/read``."""
    fields = Fields(params)
    thread_id = fields.text("threadId", required=True)
    assert thread_id is not None
    return thread_id, bool(fields.flag("includeTurns"))


def thread_name(params: Any) -> tuple[str, str]:
    """The ``threadId`` and ``name`` of ``thread/name/set``."""
    fields = Fields(params)
    thread_id = fields.text("threadId", required=True)
    name = fields.text("name", required=True)
    assert thread_id is not None and name is not None
    name = name.strip()
    if not name:
        raise invalid("name", "must not be empty")
    return thread_id, name


@attrs.frozen
class ThreadFork:
    """The parameters of ``thread/fork``."""

    thread_id: str
    """The thread to fork."""
    settings: ThreadSettings
    """What the fork's session changes (``ephemeral``: it writes no rollout)."""
    last_turn_id: str | None = None
    """The last turn the fork keeps (None: all)."""
    exclude_turns: bool = False
    """Leave the fork's turns out of the answer."""


def thread_fork(params: Any) -> ThreadFork:
    """The parameters of ``thread/fork``."""
    fields = Fields(params)
    thread_id = fields.text("threadId", required=True)
    assert thread_id is not None
    return ThreadFork(
        thread_id,
        read_settings(fields, ephemeral=True),
        last_turn_id=fields.text("lastTurnId"),
        exclude_turns=bool(fields.flag("excludeTurns")),
    )


@attrs.frozen
class TurnSteer:
    """The parameters of ``turn/steer``."""

    thread_id: str
    """The thread."""
    expected_turn_id: str
    """The turn the input is for: the one running."""
    items: tuple[p.InputItem, ...]
    """The input."""


def turn_steer(params: Any) -> TurnSteer:
    """The parameters of ``turn/steer``."""
    fields = Fields(params)
    thread_id = fields.text("threadId", required=True)
    expected = fields.text("expectedTurnId", required=True)
    assert thread_id is not None and expected is not None
    raw_input = fields.raw("input")
    if not isinstance(raw_input, list):
        raise invalid("input", "missing" if raw_input is None else "expected an array")
    if not raw_input:
        raise invalid("input", "must hold at least one item")
    items = tuple(input_item(value, f"input[{n}]") for n, value in enumerate(raw_input))
    return TurnSteer(thread_id, expected, items)


def model_list(params: Any) -> tuple[str | None, int | None, str | None]:
    """The ``cursor``, ``limit`` and ``modelProvider`` of ``model/list``."""
    fields = Fields(params)
    return fields.text("cursor"), _limit(fields, None), fields.text("modelProvider")


__all__ = [
    "DEFAULT_LIMIT",
    "ThreadFork",
    "TurnSteer",
    "loaded_list",
    "model_list",
    "thread_fork",
    "thread_list",
    "thread_name",
    "thread_read",
    "turn_steer",
]
