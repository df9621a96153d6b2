"""The writer of one task's events and history items, guarded by the task's handle.

Every event and item a task produces goes through its :class:`TurnWriter`. Once the handle is
detached (its terminal event is out), whatever the task still emits or records is dropped, so
nothing carries the turn id after its terminal event, even from a task that lingers in a
shielded section. A background compaction writes nothing: its writer is :class:`Silent`.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._base import _protocol as p
from ._services import Services
from ._task import TaskHandle


class Writer(Protocol):
    """Where a piece of work reports events and records items."""

    @property
    def turn_id(self) -> str:
        """The id its events carry."""
        ...

    @property
    def detached(self) -> bool:
        """True once nothing it does is reported any more."""
        ...

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event."""
        ...

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        """Append an item to the history."""
        ...


class TurnWriter:
    """The writer of a task: its events carry its turn id, and stop at its terminal event."""

    def __init__(self, services: Services, handle: TaskHandle[Any]) -> None:
        self._services = services
        self._handle = handle

    @property
    def turn_id(self) -> str:
        return self._handle.turn_id

    @property
    def detached(self) -> bool:
        return self._handle.detached

    def emit(self, msg: p.EventMsg) -> None:
        handle = self._handle
        if not handle.detached:
            if isinstance(msg, p.AgentMessage):
                handle.last_message = msg.message
            self._services.emit(handle.turn_id, msg)

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        if not self._handle.detached:
            self._services.record(item, from_model=from_model)


class Silent:
    """The writer of background work: it reports and records nothing (its result waits on its
    job until a turn installs it), but it is never detached, so the usage of its requests
    still counts towards the session's total."""

    def __init__(self, turn_id: str) -> None:
        self._turn_id = turn_id

    @property
    def turn_id(self) -> str:
        return self._turn_id

    @property
    def detached(self) -> bool:
        return False

    def emit(self, msg: p.EventMsg) -> None:
        del msg

    def record(self, item: p.ResponseItem, *, from_model: bool = False) -> None:
        del item, from_model


__all__ = ["Silent", "TurnWriter", "Writer"]
