"""The cluster's rules as plain functions: leases, epochs and grants, the storage check, the
bounded buffers and ledger, placement, paths made absolute. No Ray, no event loop."""

from __future__ import annotations

from pathlib import Path

import pytest

import relay
from relay._cluster._admin import listing_lines
from relay._cluster._buffers import (
    DROPPED_EVENT_ID,
    Dropped,
    Outbox,
    ReaderQueue,
    Ring,
)
from relay._cluster._checks import read_probes, unreadable
from relay._cluster._client import for_hosts
from relay._cluster._host import event_text
from relay._cluster._leases import (
    GRANT,
    MoveLog,
    check_lease,
    expired,
    first_seq_after,
    grant,
    lock_wait,
    renew_every,
    shared_group,
)
from relay._cluster._ledger import OUTSTANDING, RECENT, Ledger, Loss, choose_host
from relay._cluster._ray import placement_problem, stream_options
from relay._cluster._registry import in_deployment


def event(seq: int, msg: relay.EventMsg | None = None, event_id: str = "t") -> relay.Event:
    return relay.Event(event_id, seq, msg or relay.UserMessage(f"m{seq}"))


# --------------------------------------------------------------------------- leases and epochs


def test_a_lease_runs_out_after_its_length_without_a_renewal() -> None:
    renewed = {"a": 100.0, "b": 104.0}
    assert expired(renewed, 5.0, 105.0) == []
    assert expired(renewed, 5.0, 105.5) == ["a"]
    # A host renews three times per lease: one lost renewal is not a lost lease.
    assert renew_every(9.0) == 3.0


def test_a_resume_waits_for_the_lost_hosts_lock_only_while_its_lease_lasts() -> None:
    assert lock_wait(lease_ends=110.0, now=104.0) == 6.0
    # A lease that ran out (a frozen host): the new epoch takes the file over at once.
    assert lock_wait(lease_ends=110.0, now=111.0) == 0.0


def test_a_new_epoch_numbers_its_events_after_all_the_lost_host_may_have_given_out() -> None:
    # Granted up to 4096 + 12, recorded up to 40: events up to the grant may have reached a
    # caller without being recorded, so the next epoch starts after the grant.
    assert first_seq_after(grant(12), 40) == 12 + GRANT + 1
    # A rollout that recorded past the grant (the host was waiting for a larger one).
    assert first_seq_after(100, 250) == 251
    assert first_seq_after(100, None) == 101


def test_a_lease_shorter_than_a_second_is_refused() -> None:
    assert check_lease(3) == 3
    with pytest.raises(ValueError, match=r"at least 1 s, got 0\.5"):
        check_lease(0.5)


def test_the_move_log_says_when_a_caller_fell_too_far_behind() -> None:
    log = MoveLog(keep=2)
    assert log.since(0) == []
    first = log.add("s1", "h1", 2, 5000)
    assert log.since(0) == [first]
    second = log.add("s2", "h1", 2, 5000)
    third = log.add("s3", None, 3, 9000, "no host left")
    assert log.since(1) == [second, third]
    assert log.since(3) == []
    assert log.since(0) is None  # the first move is no longer kept: locate again


# --------------------------------------------------------------------------- the storage check


def test_the_shared_directory_is_the_one_seen_across_the_most_nodes() -> None:
    node = {"registry": "n1", "h0": "n1", "h1": "n2", "h2": "n3", "h3": "n4"}
    # h3's node has no mount: it writes into a directory of its own and sees only itself.
    sees = {
        "registry": ["registry", "h0", "h1", "h2"],
        "h0": ["registry", "h0", "h1", "h2"],
        "h1": ["registry", "h0", "h1", "h2"],
        "h2": ["registry", "h0", "h1", "h2"],
        "h3": ["h3"],
    }
    assert shared_group(sees, node, "registry") == {"registry", "h0", "h1", "h2"}


def test_with_two_nodes_seeing_each_their_own_the_registrys_wins() -> None:
    node = {"registry": "n1", "h0": "n1", "h1": "n2"}
    sees = {"registry": ["registry", "h0"], "h0": ["registry", "h0"], "h1": ["h1"]}
    assert shared_group(sees, node, "registry") == {"registry", "h0"}


def test_a_host_that_cannot_even_write_is_in_no_group() -> None:
    node = {"registry": "n1", "h0": "n2"}
    sees = {"registry": ["registry"], "h0": ["registry"]}
    # h0 reads the registry's probe but wrote none of its own (the write failed).
    assert shared_group(sees, node, "registry") == {"registry"}


def test_probes_are_read_back_by_content(tmp_path: Path) -> None:
    good, other = tmp_path / "a", tmp_path / "b"
    good.write_text("t1")
    other.write_text("someone else's")
    probes = {
        "a": (str(good), "t1"),
        "b": (str(other), "t2"),
        "c": (str(tmp_path / "missing"), "t3"),
    }
    assert read_probes(probes) == ["a"]


def test_unreadable_paths_name_the_reason(tmp_path: Path) -> None:
    script = tmp_path / "model.json"
    script.write_text("{}")
    found = unreadable([str(script), str(tmp_path), str(tmp_path / "gone.json")])
    assert found == {str(tmp_path / "gone.json"): "No such file or directory"}


def test_an_impossible_placement_names_the_cpus_asked_for_and_available() -> None:
    assert placement_problem(4, 1.0, 3.0, 3.0) == (
        "cannot place 4 host(s) of 1 CPU each: that asks for 4 CPUs, and the cluster has 3 "
        "of its 3 CPUs available; start fewer hosts (--hosts), smaller ones (--host-cpus), or "
        "add nodes"
    )


# --------------------------------------------------------------------------- placement


def test_a_session_goes_to_the_least_loaded_host_on_another_node() -> None:
    nodes = {"h0": "n1", "h1": "n1", "h2": "n2"}
    assert choose_host({"h0": 0, "h1": 2, "h2": 1}, nodes) == "h0"
    # Moving off node n1, the session goes to n2 though a host of n1 holds fewer.
    assert choose_host({"h1": 0, "h2": 3}, nodes, avoid_node="n1") == "h2"
    # Only n1 is left: there, then.
    assert choose_host({"h1": 0}, nodes, avoid_node="n1") == "h1"
    assert choose_host({}, nodes) is None


# --------------------------------------------------------------------------- buffers


def test_the_ring_keeps_the_latest_events_within_its_bounds() -> None:
    ring = Ring(max_events=3, max_bytes=1000)
    for seq in range(1, 6):
        ring.add(seq, f"e{seq}")
    assert ring.first_seq == 3
    assert ring.after(3) == [(4, "e4"), (5, "e5")]
    big = Ring(max_events=100, max_bytes=10)
    big.add(1, "x" * 8)
    big.add(2, "y" * 8)
    assert (big.first_seq, len(big)) == (2, 1)  # the newest stays, however large
    big.add(3, "z" * 50)
    assert big.after(0) == [(3, "z" * 50)]


def test_an_outbox_that_overflows_says_what_it_dropped() -> None:
    outbox = Outbox(max_events=3, max_bytes=10_000)
    for seq in range(1, 7):
        outbox.add(seq, f"e{seq}")
    assert outbox.take() == (Dropped(1, 3, 3), ["e4", "e5", "e6"])
    assert not outbox
    assert outbox.take() == (None, [])


def test_a_reader_queue_keeps_its_bound_and_one_warning_for_the_dropped_run() -> None:
    queue = ReaderQueue(max_items=4)
    for seq in range(1, 11):
        queue.push(event(seq))
    assert len(queue) == 4
    warning = queue.pop()
    assert warning is not None
    assert (warning.id, warning.seq) == (DROPPED_EVENT_ID, 7)
    assert isinstance(warning.msg, relay.WarningEvent)
    assert warning.msg.message.startswith("7 event(s), seq 1 to 7, were dropped")
    assert "relay cluster attach --from 0" in warning.msg.message
    assert [e.seq for e in iter(queue.pop, None)] == [8, 9, 10]


def test_a_run_dropped_upstream_joins_the_one_dropped_here() -> None:
    queue = ReaderQueue(max_items=3)
    queue.push(event(1))
    queue.push_dropped(Dropped(2, 5, 4))
    queue.push_dropped(Dropped(6, 6, 1))
    queue.push(event(7))
    queue.push(event(8))
    items = [queue.pop() for _ in range(3)]
    assert [(e.id, e.seq) for e in items if e] == [(DROPPED_EVENT_ID, 6), ("t", 7), ("t", 8)]
    first = items[0]
    assert first is not None and isinstance(first.msg, relay.WarningEvent)
    assert first.msg.message.startswith("6 event(s), seq 1 to 6")


def test_event_text_is_the_events_json() -> None:
    import json

    from relay._base._codec import to_json

    made = event(3, relay.TurnComplete("t", None, 5), "t\u00e9")
    assert json.loads(event_text(made, None)) == to_json(made)
    msg_json = json.dumps(to_json(made.msg))
    assert json.loads(event_text(made, msg_json)) == to_json(made)


# --------------------------------------------------------------------------- the ledger


def started(turn_id: str, seq: int) -> relay.Event:
    return relay.Event(turn_id, seq, relay.TurnStarted(turn_id, None, 100.0))


def completed(turn_id: str, seq: int) -> relay.Event:
    return relay.Event(turn_id, seq, relay.TurnComplete(turn_id, "ok", 5))


def test_a_loss_names_the_running_turn_and_the_submissions_no_event_showed() -> None:
    ledger = Ledger()
    for sub_id in ("t1", "t2", "override", "t3"):
        ledger.accept(sub_id)
    ledger.saw(started("t1", 1))
    ledger.saw(completed("t1", 2))
    ledger.saw(started("t2", 3))
    assert ledger.lose() == Loss(aborted_turn="t2", started_at=100.0, unhandled=("override", "t3"))
    assert ledger.lose() == Loss(aborted_turn=None, started_at=None, unhandled=())


def test_a_submission_acknowledged_after_its_first_event_is_not_outstanding() -> None:
    ledger = Ledger()
    ledger.saw(started("t1", 1))
    ledger.accept("t1")
    assert ledger.lose().unhandled == ()


def test_the_ledger_of_a_long_session_stays_bounded() -> None:
    ledger = Ledger()
    for n in range(20_000):
        ledger.accept(f"t{n}")
        ledger.saw(started(f"t{n}", 2 * n))
        ledger.saw(completed(f"t{n}", 2 * n + 1))
        ledger.accept(f"quiet{n}")  # an op that emits nothing
    assert len(ledger.recent) == RECENT
    assert len(ledger.outstanding) == OUTSTANDING
    assert ledger.lose().unhandled[-1] == "quiet19999"


# --------------------------------------------------------------------------- paths and listing


def test_paths_are_made_absolute_where_the_caller_is(tmp_path: Path) -> None:
    config = relay.Config(
        model_script="models/m.json",
        rollout=relay.RolloutConfig(dir="shared/sessions"),
    )
    made = for_hosts(config, cwd=str(tmp_path))
    assert made.cwd == str(tmp_path)
    assert made.model_script == str(tmp_path / "models/m.json")
    assert made.rollout.dir == str(tmp_path / "shared/sessions")
    relative_cwd = for_hosts(relay.Config(cwd="work"), cwd=str(tmp_path))
    assert relative_cwd.cwd == str(tmp_path / "work")


def test_a_session_without_a_rollout_dir_writes_in_the_deployments(tmp_path: Path) -> None:
    shared = str(tmp_path / "shared")
    # A host's own $RELAY_HOME is not the directory the storage check found shared.
    placed = in_deployment(relay.Config(), shared)
    assert placed.rollout.dir == shared
    own = str(tmp_path / "elsewhere")
    kept = in_deployment(relay.Config(rollout=relay.RolloutConfig(dir=own)), shared)
    assert kept.rollout.dir == own


def test_a_stream_is_bounded_ahead_only_where_ray_allows_it_for_an_async_actor() -> None:
    # Ray 2.50 refuses the bound for an async actor: the stream would fail, and no event
    # would reach the caller.
    assert stream_options("2.50.0", 4) == {}
    assert stream_options("2.60.0", 4) == {"_generator_backpressure_num_objects": 4}
    assert stream_options("2.61.0rc1", 4) == {"_generator_backpressure_num_objects": 4}
    assert stream_options("3.0.0", 4) == {"_generator_backpressure_num_objects": 4}
    assert stream_options("nightly", 4) == {}


def test_the_listing_shows_hosts_sessions_and_problems() -> None:
    listing = {
        "hosts": [
            {
                "name": "relay-host-0",
                "node": "3f2a9c1e1234abcd",
                "state": "serving",
                "sessions": 1,
                "renewed_s_ago": 0.4,
                "problem": None,
            },
            {
                "name": "relay-host-1",
                "node": "77aa01b2",
                "state": "no storage",
                "sessions": 0,
                "renewed_s_ago": 1.0,
                "problem": "host relay-host-1 on node 77aa01b2 does not see the shared dir",
            },
        ],
        "sessions": [
            {
                "id": "s-1",
                "host": "relay-host-0",
                "epoch": 2,
                "state": "idle",
                "last_seq": 4120,
                "last_event": "turn_complete",
                "last_at": 97.0,
                "problem": None,
            }
        ],
    }
    assert listing_lines(listing, 100.0) == [
        "HOST          NODE          STATE       SESSIONS  LEASE RENEWED",
        "relay-host-0  3f2a9c1e1234  serving     1         0.4 s ago",
        "relay-host-1  77aa01b2      no storage  0         1.0 s ago",
        "",
        "SESSION  HOST          EPOCH  STATE  LAST EVENT",
        "s-1      relay-host-0  2      idle   #4120 turn_complete 3 s ago",
        "",
        "host relay-host-1 on node 77aa01b2 does not see the shared dir",
    ]


def test_an_empty_listing_has_its_headings() -> None:
    assert listing_lines({"hosts": [], "sessions": []}, 0.0) == [
        "HOST  NODE  STATE  SESSIONS  LEASE RENEWED",
        "",
        "SESSION  HOST  EPOCH  STATE  LAST EVENT",
    ]
