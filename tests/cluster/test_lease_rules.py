"""How the registry judges a host's lease when it was itself stopped: a plain function of the
renewals it has read and of when it could hear them, played against the registry's checks and a
host's renewals on a timeline of stalls. No Ray, no event loop."""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from relay._cluster._leases import check_every, hearing_since, lost_leases, renew_every
from tests.hypothesis_profiles import examples

LEASES = st.sampled_from([1.0, 3.0, 10.0])
#: Stalls of the registry: when each starts and how long it lasts, in leases.
STALLS = st.lists(
    st.tuples(st.floats(0, 20), st.floats(0, 6)),
    max_size=4,
)


@attrs.frozen
class Timeline:
    """When the registry was stopped, as sorted intervals that do not overlap."""

    stalls: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, lease: float, stalls: list[tuple[float, float]]) -> Timeline:
        merged: list[tuple[float, float]] = []
        for start, length in sorted((s * lease, (s + n) * lease) for s, n in stalls):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], length))
            elif length > start:
                merged.append((start, length))
        return cls(tuple(merged))

    def wake(self, t: float) -> float | None:
        """When the registry wakes, if it is stopped at ``t``."""
        for start, end in self.stalls:
            if start <= t < end:
                return end
        return None

    def checks(self, lease: float, until: float) -> list[tuple[float, bool]]:
        """The registry's checks: every ``check_every``, or at the wake of a stall that held
        one back (flagged: a check at a wake runs before the renewals that waited are read)."""
        every = check_every(lease)
        found: list[tuple[float, bool]] = []
        at = 0.0
        while at < until:
            due = at + every
            woke = self.wake(due)
            at = woke if woke is not None else due
            found.append((at, woke is not None))
        return found

    def renewals(self, lease: float, until: float) -> list[float]:
        """When the registry reads each renewal of a host that renews throughout: every third
        of a lease after it sent the last, or at once when the reply came later than that; a
        renewal sent while the registry is stopped is read when it wakes."""
        read: list[float] = []
        sent = 0.0
        while sent < until:
            woke = self.wake(sent)
            read.append(woke if woke is not None else sent)
            sent = max(sent + renew_every(lease), read[-1])
        return read


def judged_lost(timeline: Timeline, lease: float, read: list[float], until: float) -> list[float]:
    """The checks at which the registry finds the host's lease ran out."""
    since = checked = 0.0
    found = []
    for at, woke in timeline.checks(lease, until):
        since = hearing_since(since, checked, at, lease)
        checked = at
        seen = [r for r in read if r < at or (r == at and not woke)]
        if seen and lost_leases({"h": max(seen)}, lease, at, since):
            found.append(at)
    return found


@settings(max_examples=examples(200), deadline=None)
@given(lease=LEASES, stalls=STALLS)
def test_a_host_that_renews_throughout_is_never_lost_whatever_the_registry_stalls(
    lease: float, stalls: list[tuple[float, float]]
) -> None:
    timeline = Timeline.of(lease, stalls)
    until = 30 * lease
    assert judged_lost(timeline, lease, timeline.renewals(lease, until), until) == []


@settings(max_examples=examples(200), deadline=None)
@given(lease=LEASES, stalls=STALLS, stops=st.floats(0, 25))
def test_a_host_that_stops_renewing_is_lost_after_a_lease_the_registry_could_hear(
    lease: float, stalls: list[tuple[float, float]], stops: float
) -> None:
    timeline = Timeline.of(lease, stalls)
    until = 40 * lease
    read = [r for r in timeline.renewals(lease, until) if r <= stops * lease] or [0.0]
    lost = judged_lost(timeline, lease, read, until)
    # Never before its own lease ran out: it counts from a renewal it sent before the registry
    # read it.
    assert all(at - max(read) > lease for at in lost)
    # And found within a lease and a check of the last time the registry began to hear again.
    heard = max([max(read), *(end for _, end in timeline.stalls)])
    assert lost and lost[0] <= heard + lease + 2 * check_every(lease) + 1e-9


@given(
    renewed=st.floats(0, 100),
    since=st.floats(0, 100),
    now=st.floats(0, 200),
    lease=st.floats(1, 30),
)
def test_a_host_is_judged_lost_only_when_its_own_lease_ran_out(
    renewed: float, since: float, now: float, lease: float
) -> None:
    if lost_leases({"h": renewed}, lease, now, since):
        assert now - renewed > lease and now - since > lease


def test_a_check_that_comes_late_starts_the_hearing_anew() -> None:
    lease = 3.0
    every = check_every(lease)
    # On time, or late by less than a renewal's period: the registry heard throughout.
    assert hearing_since(0.0, 10.0, 10.0 + every, lease) == 0.0
    assert hearing_since(0.0, 10.0, 10.0 + every + renew_every(lease), lease) == 0.0
    # Later than that, it heard nothing in between, renewals included.
    assert hearing_since(0.0, 10.0, 15.0, lease) == 15.0
    # A host renewed at 9.8 is not lost at 15.0 when the registry was stopped from 10.0.
    assert lost_leases({"h": 9.8}, lease, 15.0, 15.0) == []
    assert lost_leases({"h": 9.8}, lease, 18.1, 15.0) == ["h"]
