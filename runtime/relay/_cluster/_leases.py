"""The registry's rules as plain functions and records: leases, epochs, seq grants, the
storage check, the log of moves. No Ray, no event loop (``docs/cluster.md``, Leases and epochs).

- **Leases.** A host renews its lease every third of it. The registry counts a lease from the
  last renewal it received; the host counts it from when it sent that renewal, so the host
  stops writing before the registry can give its sessions to another host. The registry counts
  only time it could hear: after it was stopped (or its loop held up), renewals wait unread
  for it, so it counts a lease anew from when it began to hear again (:func:`hearing_since`),
  and a host is lost only when its own lease ran out while the registry could hear it
  (:func:`lost_leases`).
- **Epochs.** Every placement of a session on a host is an epoch: 1 at open, one more at each
  move. The rollout records it (``docs/rollout.md``, Epochs).
- **Callers.** A client renews its place on every host it follows sessions on once a lease; a
  host forgets a caller it has not heard from for three leases (a dead caller's stream is never
  ended by Ray), and a caller that was only slow follows its sessions again.
- **Seq grants.** Events are numbered per session across hosts. A host may number a session's
  events up to the limit the registry granted it; a move starts the new epoch right after
  that limit (or after the highest ``seq`` in the rollout, if higher), so no number a lost host
  may have given a caller is given again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

import attrs

#: The default lease of a host, in seconds.
LEASE_S = 10.0
#: The shortest lease allowed: renewals must get through a loaded Ray cluster.
MIN_LEASE_S = 1.0
#: Seq numbers a host may use beyond the last it reported.
GRANT = 4096
#: Moves a registry remembers for callers that follow their sessions.
MOVES_KEPT = 10_000


def renew_every(lease_s: float) -> float:
    """How often a host renews its lease."""
    return lease_s / 3


def caller_timeout(lease_s: float) -> float:
    """How long a host keeps what waits for a caller it has not heard from: three leases.
    Ray does not end a stream whose caller died, so a host learns of it only by silence."""
    return 3 * lease_s


def check_every(lease_s: float) -> float:
    """How often the registry looks for leases that ran out."""
    return max(0.1, lease_s / 8)


def expired(renewed_at: Mapping[str, float], lease_s: float, now: float) -> list[str]:
    """The keys of ``renewed_at`` not renewed for longer than ``lease_s`` at ``now``."""
    return [host for host, at in renewed_at.items() if now - at > lease_s]


def hearing_since(since: float, checked_at: float, now: float, lease_s: float) -> float:
    """From when the registry could hear its hosts, as of its check at ``now`` (the one before
    was at ``checked_at``; ``since`` is what it was then).

    A check later than due by more than a renewal's period means that the registry was
    stopped, or its loop held up, and read nothing meanwhile: the renewals sent then wait for
    it, and a check at its wake runs before them. It hears again from ``now``. A check late by
    less cannot make a host that renewed look lost: its last renewal read is then at most two
    periods old, within its lease.
    """
    late = now - checked_at - check_every(lease_s)
    return now if late > renew_every(lease_s) else since


def lost_leases(
    renewed_at: Mapping[str, float], lease_s: float, now: float, heard_since: float
) -> list[str]:
    """The hosts whose lease ran out at ``now`` while the registry could hear them: no renewal
    read for a lease, counted from the last one read or from ``heard_since``, the later.

    A host judged lost here had its own lease run out too: it counts its lease from when it
    sent the renewal the registry read last.
    """
    return [host for host, at in renewed_at.items() if now - max(at, heard_since) > lease_s]


def lock_wait(lease_ends: float, now: float) -> float:
    """How long a resume waits for the lost host's lock: until that host's lease has ended
    (it may still be dying, and its lock goes with its process), not one moment longer."""
    return max(0.0, lease_ends - now)


def grant(seq: int) -> int:
    """The limit granted to a session whose events have reached ``seq``."""
    return seq + GRANT


def first_seq_after(limit: int, recorded: int | None) -> int:
    """The first ``seq`` of a new epoch: after everything the last one may have numbered."""
    return max(limit, recorded or 0) + 1


def check_lease(lease_s: float) -> float:
    """``lease_s`` if it is a usable lease; else ValueError saying what is."""
    if not lease_s >= MIN_LEASE_S:
        raise ValueError(f"a lease lasts at least {MIN_LEASE_S:g} s, got {lease_s:g}")
    return lease_s


# --------------------------------------------------------------------------- the storage check


def shared_group(
    sees: Mapping[str, Iterable[str]], node_of: Mapping[str, str], reference: str
) -> set[str]:
    """The processes that share the rollout directory, from who read whose probe file.

    ``sees[a]`` holds every process whose probe ``a`` could read (itself included when it could
    write and read its own). Two processes share the directory when each reads the other's
    probe. Of the groups that share one, the one spread over the most nodes is *the* shared
    directory; a tie goes to the group of ``reference`` (the registry), then to the larger.
    """
    seen = {name: set(names) for name, names in sees.items()}
    best: set[str] = set()
    best_key: tuple[int, bool, int] = (0, False, 0)
    for name in seen:
        if name not in seen[name]:
            continue  # it cannot even read its own probe
        group = {other for other in seen if other in seen[name] and name in seen[other]}
        key = (len({node_of.get(member) for member in group}), reference in group, len(group))
        if key > best_key:
            best, best_key = group, key
    return best


# --------------------------------------------------------------------------- moves


@attrs.frozen
class Move:
    """A session placed anew: on its new host, in a new epoch (or lost, with why)."""

    version: int
    session: str
    host: str | None
    epoch: int
    first_seq: int
    problem: str | None = None


class MoveLog:
    """The latest moves, numbered, for callers that wait on the ones after a number."""

    def __init__(self, keep: int = MOVES_KEPT) -> None:
        self.version = 0
        self._moves: deque[Move] = deque(maxlen=keep)

    def add(
        self,
        session: str,
        host: str | None,
        epoch: int,
        first_seq: int,
        problem: str | None = None,
    ) -> Move:
        """Log a move; returns it, numbered."""
        self.version += 1
        move = Move(self.version, session, host, epoch, first_seq, problem)
        self._moves.append(move)
        return move

    def since(self, version: int) -> list[Move] | None:
        """The moves after ``version``; None when some of them are no longer kept."""
        if version >= self.version:
            return []
        moves = self._moves
        if not moves or moves[0].version > version + 1:
            return None
        return [move for move in moves if move.version > version]


__all__ = [
    "GRANT",
    "LEASE_S",
    "MIN_LEASE_S",
    "MOVES_KEPT",
    "Move",
    "MoveLog",
    "caller_timeout",
    "check_every",
    "check_lease",
    "expired",
    "first_seq_after",
    "grant",
    "hearing_since",
    "lock_wait",
    "lost_leases",
    "renew_every",
    "shared_group",
]
