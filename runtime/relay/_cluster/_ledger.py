"""What one caller knows of a session, and where a session goes: plain bookkeeping, no Ray.

A :class:`Ledger` follows the submissions a caller made and the events it saw, so that when the
session moves to another host the caller can be told what the move cost *it*: the turn that was
running and the submissions no event showed handled. It is bounded whatever the session's age:
it keeps the submissions not yet seen handled (at most :data:`OUTSTANDING`) and the ids of the
latest events (:data:`RECENT`), for a submission acknowledged after its first event arrived.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

import attrs

from .._base import _protocol as p

#: Submissions a ledger follows at most; an older one is forgotten (it was long handled, or
#: its op emits nothing: an ``override_turn_context``, an ``interrupt`` of an idle session).
OUTSTANDING = 1024
#: Event ids a ledger remembers, for a submission whose acknowledgement comes after its events.
RECENT = 256


def least_loaded(loads: Mapping[str, int]) -> str | None:
    """The host with the fewest sessions (the first such one in insertion order)."""
    best: str | None = None
    for host, load in loads.items():
        if best is None or load < loads[best]:
            best = host
    return best


def choose_host(
    loads: Mapping[str, int], nodes: Mapping[str, str], *, avoid_node: str | None = None
) -> str | None:
    """Where a session goes: the least loaded host, on another node than ``avoid_node`` when
    one is live (the node a session leaves may be the one that failed)."""
    elsewhere = {host: load for host, load in loads.items() if nodes.get(host) != avoid_node}
    return least_loaded(elsewhere) if elsewhere else least_loaded(loads)


@attrs.frozen
class Loss:
    """What a host's loss cost one session, as its caller saw it."""

    aborted_turn: str | None
    """The turn that had started and not ended."""
    started_at: float | None
    """Its ``started_at`` (Unix seconds)."""
    unhandled: tuple[str, ...]
    """Accepted submissions that no event showed handled."""


@attrs.define
class Ledger:
    """What the caller of one session knows: its accepted submissions and the events it saw.

    A plain object, fed by the session's pump and its submit calls, read on a move.
    """

    outstanding: OrderedDict[str, None] = attrs.field(factory=OrderedDict)
    """Accepted submissions no event has shown handled yet, oldest first."""
    recent: OrderedDict[str, None] = attrs.field(factory=OrderedDict)
    """The ids of the latest events seen."""
    running: str | None = None
    running_since: float | None = None

    def accept(self, sub_id: str) -> None:
        """The host acknowledged submission ``sub_id``."""
        if sub_id in self.recent:
            return  # its events came first
        self.outstanding[sub_id] = None
        if len(self.outstanding) > OUTSTANDING:
            self.outstanding.popitem(last=False)

    def saw(self, event: p.Event) -> None:
        """An event reached the caller."""
        self._handled(event.id)
        match event.msg:
            case p.TurnStarted(turn_id=turn_id, started_at=started_at):
                self.running, self.running_since = turn_id, started_at
                self._handled(turn_id)
            case p.TurnComplete(turn_id=turn_id) | p.TurnAborted(turn_id=turn_id):
                if self.running == turn_id:
                    self.running = self.running_since = None
            case _:
                pass

    def _handled(self, event_id: str) -> None:
        self.outstanding.pop(event_id, None)
        recent = self.recent
        if event_id in recent:
            recent.move_to_end(event_id)
            return
        recent[event_id] = None
        if len(recent) > RECENT:
            recent.popitem(last=False)

    def lose(self) -> Loss:
        """What is lost with the host; the ledger starts over on the new host."""
        loss = Loss(
            aborted_turn=self.running,
            started_at=self.running_since,
            unhandled=tuple(self.outstanding),
        )
        self.outstanding.clear()
        self.running = self.running_since = None
        return loss


__all__ = ["OUTSTANDING", "RECENT", "Ledger", "Loss", "choose_host", "least_loaded"]
