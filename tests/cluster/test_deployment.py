"""A deployment on a cluster of separate raylets (``netns.py``): hosts spread over nodes,
sessions that outlive their caller, leases and fencing under frozen hosts and nodes, a node
without the shared mount, requests the cluster cannot satisfy, lost hosts replaced.

Every command runs as a user would run it, in the cluster's network namespace: ``relay
cluster ...`` and the client process of ``driver.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import relay
from relay._rollout._reader import EventMsgLine, read_rollout

from .deployments import (
    DRIVER,
    LEASE,
    down,
    json_lines,
    listing,
    ok,
    open_sessions,
    up,
    write_model,
)
from .netns import LocalCluster, alive

pytestmark = pytest.mark.slow

# --------------------------------------------------------------------------- placement


def test_hosts_spread_over_the_nodes_and_outlive_the_command(
    cluster: LocalCluster, shared: Path
) -> None:
    # A relative rollout directory is the one where the command was given, not the hosts'.
    result = ok(
        cluster.relay(
            "cluster",
            "up",
            "--address",
            cluster.address,
            "--namespace",
            "spread",
            "--rollout-dir",
            shared.name,
            "--lease-seconds",
            str(LEASE),
            "--hosts",
            "3",
            cwd=shared.parent,
        )
    )
    assert "3 host(s) up in namespace 'spread' (3 started now)" in result.stdout
    assert listing(cluster, "spread")["settings"]["rollout_dir"] == str(shared)
    # up again: the hosts are there, none is added.
    again = ok(up(cluster, "spread", shared, "--hosts", "3"))
    assert "3 host(s) up in namespace 'spread' (0 started now)" in again.stdout
    hosts = listing(cluster, "spread")["hosts"]
    assert [h["state"] for h in hosts] == ["serving"] * 3
    # One host per node: a placement group with SPREAD.
    assert len({h["node"] for h in hosts}) == 3
    text = ok(cluster.relay("cluster", "ls", "--address", cluster.address, "--namespace", "spread"))
    assert text.stdout.splitlines()[0].split() == [
        "HOST",
        "NODE",
        "STATE",
        "SESSIONS",
        "LEASE",
        "RENEWED",
    ]
    down(cluster, "spread")
    gone = cluster.relay("cluster", "ls", "--address", cluster.address, "--namespace", "spread")
    assert gone.returncode == 2
    assert "relay: no relay deployment in namespace 'spread'" in gone.stderr


def test_a_request_the_cluster_cannot_satisfy_fails_naming_the_cpus(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    too_many = up(cluster, "greedy", shared, "--hosts", "4")
    assert too_many.returncode == 2
    assert (
        "relay: cannot place 4 host(s) of 1 CPU each: that asks for 4 CPUs, and the cluster "
        "has 3 of its 3 CPUs available" in too_many.stderr
    )
    # relay cluster run with hosts of its own (no deployment in its namespace): the same.
    script = tmp_path / "script.jsonl"
    script.write_text(REST + "\n", encoding="utf-8")
    run = cluster.relay(
        "cluster",
        "run",
        str(script),
        "--address",
        cluster.address,
        "--namespace",
        "nothing-up",
        "--actors",
        "4",
        "--out",
        str(tmp_path / "events"),
    )
    assert run.returncode == 2
    assert "asks for 4 CPUs, and the cluster has 3 of its 3 CPUs available" in run.stderr
    # Room for the CPUs in all, but not free now: the request waits 10 s at most, then fails.
    ok(up(cluster, "first", shared, "--hosts", "2"))
    try:
        started = time.monotonic()
        waiting = up(cluster, "second", shared, "--hosts", "2")
        took = time.monotonic() - started
        assert waiting.returncode == 2
        assert "asks for 2 CPUs, and the cluster has 1 of its 3 CPUs available" in waiting.stderr
        assert took < 10 + 15  # the wait, plus starting a Ray driver on two shared cores
    finally:
        down(cluster, "first")
        cluster.relay("cluster", "down", "--address", cluster.address, "--namespace", "second")


# --------------------------------------------------------------------------- the caller dies

SCRIPT = "\n".join(
    json.dumps(line)
    for line in [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "one"}]}},
        {"wait_for": {"type": "turn_complete"}},
        {"sleep_ms": 30_000},
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "never sent"}]}},
    ]
)
REST = "\n".join(
    json.dumps(line)
    for line in [
        {"op": {"type": "user_turn", "items": [{"type": "text", "text": "two"}]}},
        {"wait_for": {"type": "turn_complete"}},
        {"op": {"type": "shutdown"}},
    ]
)


def test_a_killed_run_leaves_its_sessions_and_another_process_finishes_them(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "outlive", shared, "--hosts", "3"))
    try:
        script = tmp_path / "script.jsonl"
        script.write_text(SCRIPT + "\n", encoding="utf-8")
        out = tmp_path / "events"
        run = cluster.spawn(
            [
                "python",
                "-m",
                "relay",
                "cluster",
                "run",
                str(script),
                str(script),
                str(script),
                "--address",
                cluster.address,
                "--namespace",
                "outlive",
                "--out",
                str(out),
            ]
        )
        files = [out / f"000{n}-script.jsonl" for n in (1, 2, 3)]
        deadline = time.monotonic() + 120
        while not all(f.exists() and '"turn_complete"' in f.read_text() for f in files):
            assert time.monotonic() < deadline and run.poll() is None
            time.sleep(0.1)
        run.kill()  # SIGKILL: the driver is gone, its sessions are not
        run.wait()
        rest = tmp_path / "rest.jsonl"
        rest.write_text(REST + "\n", encoding="utf-8")
        # One attach per session, all at once: as many client processes as sessions.
        attaches = []
        for path in files:
            events = json_lines(path.read_text())
            session_id = events[0]["msg"]["session_id"]
            last = events[-1]["seq"]
            with rest.open("rb") as stdin:
                attaches.append(
                    (
                        events,
                        cluster.spawn(
                            [
                                "python",
                                "-m",
                                "relay",
                                "cluster",
                                "attach",
                                session_id,
                                "--address",
                                cluster.address,
                                "--namespace",
                                "outlive",
                                "--from",
                                str(last),
                            ],
                            stdin=stdin,
                        ),
                    )
                )
        for events, process in attaches:
            stdout, stderr = process.communicate(timeout=180)
            assert process.returncode == 0, stderr[-3000:]
            more = json_lines(stdout)
            both = events + more
            # Every event once, in order, no gap: the driver's file, then the attach's.
            assert [e["seq"] for e in both] == list(range(1, len(both) + 1))
            assert more[-1]["msg"]["type"] == "shutdown_complete"
            kinds = [e["msg"]["type"] for e in both]
            assert kinds.count("turn_complete") == 2
            # The run named no rollout directory: the deployment's shared one holds it.
            assert Path(events[0]["msg"]["rollout_path"]).is_relative_to(shared)
            rollout = read_rollout(events[0]["msg"]["rollout_path"])
            recorded = [line for line in rollout.lines if isinstance(line, EventMsgLine)]
            assert isinstance(recorded[-1].msg, relay.ShutdownComplete)
            # What the rollout records is what the callers saw, by seq.
            by_seq = {e["seq"]: e["msg"]["type"] for e in both}
            for line in recorded:
                assert (
                    line.seq is not None
                    and by_seq[line.seq] == relay.lowlevel.to_json(line.msg)["type"]
                )
    finally:
        down(cluster, "outlive")


def test_an_attach_from_an_early_seq_reads_the_rest_from_the_rollout(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "replay", shared, "--hosts", "1"))
    try:
        model = write_model(tmp_path / "model.json", answers=20)
        opened = ok(open_sessions(cluster, "replay", model, shared, "--turns", "12"))
        (session,) = json_lines(opened.stdout)
        # 12 turns are more events than a host keeps: from seq 3, the older ones come from the
        # rollout (the kinds it records), the latest from the host, each once.
        attached = ok(
            cluster.relay(
                "cluster",
                "attach",
                session["id"],
                "--address",
                cluster.address,
                "--namespace",
                "replay",
                "--from",
                "3",
                input="",
            )
        )
        seqs = [e["seq"] for e in json_lines(attached.stdout)]
        assert seqs == sorted(set(seqs)) and seqs[0] > 3 and seqs[-1] == session["seq"]
        rollout = read_rollout(session["rollout"])
        recorded = {line.seq for line in rollout.lines if isinstance(line, EventMsgLine)}
        assert {s for s in recorded if s is not None and s > 3} <= set(seqs)
        assert len(seqs) > len({s for s in recorded if s is not None and s > 3})  # and deltas
    finally:
        down(cluster, "replay")


def attach_lines(
    cluster: LocalCluster, namespace: str, session: str, *extra: str, script: str = ""
) -> subprocess.CompletedProcess[str]:
    return cluster.relay(
        "cluster",
        "attach",
        session,
        "--address",
        cluster.address,
        "--namespace",
        namespace,
        *extra,
        input=script,
    )


def relay_lines(stderr: str) -> list[str]:
    """What relay said on standard error: Ray's own log lines aside (in the cluster's network
    namespace, with no route out, Ray warns that it cannot find this machine's address)."""
    return [line for line in stderr.splitlines() if not line.startswith("[")]


def test_an_attach_to_an_unknown_or_ended_session_says_so_in_one_line_and_exits_1(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "attaching", shared, "--hosts", "1"))
    try:
        unknown = attach_lines(cluster, "attaching", "no-such-session")
        assert unknown.returncode == 1
        assert relay_lines(unknown.stderr) == [
            "relay: no session no-such-session in this deployment"
        ]
        model = write_model(tmp_path / "model.json")
        (session,) = json_lines(ok(open_sessions(cluster, "attaching", model, shared)).stdout)
        # Past the last seq: said, and the stream begins with the session's next event.
        turn = REST.split("\n")[0] + "\n" + REST.split("\n")[1] + "\n"
        past = session["seq"] + 1000
        attached = ok(
            attach_lines(
                cluster, "attaching", session["id"], "--from", str(past), "--shutdown", script=turn
            )
        )
        assert relay_lines(attached.stderr) == [
            f"relay: warning: --from {past} is past the last event of session {session['id']} "
            f"(seq {session['seq']}): its events come from the next one"
        ]
        events = json_lines(attached.stdout)
        assert events[0]["seq"] == session["seq"] + 1
        assert events[-1]["msg"]["type"] == "shutdown_complete"
        ended = attach_lines(cluster, "attaching", session["id"])
        assert ended.returncode == 1
        assert relay_lines(ended.stderr) == [
            f"relay: session {session['id']} has ended; its rollout is {session['rollout']}"
        ]
    finally:
        down(cluster, "attaching")


# --------------------------------------------------------------------------- fencing


def freeze_and_follow(
    cluster: LocalCluster,
    namespace: str,
    sessions: list[dict[str, Any]],
    freeze: Callable[[], list[int]],
) -> tuple[list[dict[str, Any]], float, list[int]]:
    """Follow ``sessions``, freeze (``freeze`` returns the pids it stopped), read until every
    session moved and ran a turn after the move; returns what the follower saw, when the freeze
    began and the frozen pids (still stopped)."""
    follower = cluster.spawn(
        [
            "python",
            DRIVER,
            "follow",
            *[s["id"] for s in sessions],
            "--address",
            cluster.address,
            "--namespace",
            namespace,
        ]
    )
    assert follower.stdout is not None
    ready = json.loads(follower.stdout.readline())
    assert ready["ready"]
    frozen_at = time.time()
    frozen = freeze()
    lines: list[dict[str, Any]] = []
    try:
        for line in follower.stdout:
            found = json.loads(line)
            lines.append(found)
            if found.get("done"):
                break
        follower.wait(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert lines and lines[-1].get("done"), follower.stderr.read() if follower.stderr else ""
    return lines, frozen_at, frozen


def check_moved(
    sessions: list[dict[str, Any]], lines: list[dict[str, Any]], frozen_at: float
) -> None:
    for session in sessions:
        seen = [line for line in lines if line.get("session") == session["id"]]
        resumed = [line for line in seen if line["type"] == "session_resumed"]
        assert len(resumed) == 1, seen
        # Moved within the lease and 5 s of the freeze.
        assert resumed[0]["at"] - frozen_at < LEASE + 5
        assert resumed[0]["msg"]["aborted_turn"] == session["busy"]
        before = seen[: seen.index(resumed[0])]
        assert [e["msg"].get("reason") for e in before if e["type"] == "turn_aborted"] == [
            "host_lost"
        ]
        # Nothing of the lost epoch reached the caller after the move, and the busy turn
        # never completed anywhere.
        after = seen[seen.index(resumed[0]) :]
        assert {line["epoch"] for line in after} == {2}
        assert all(
            line["id"] != session["busy"] for line in after if line["type"] == "turn_complete"
        )
        assert any(line["type"] == "turn_complete" for line in after)
        seqs = [line["seq"] for line in seen]
        assert seqs == sorted(set(seqs))


def check_rollout(session: dict[str, Any]) -> None:
    """Everything acknowledged is in the rollout; nothing of the old epoch after the move
    counts."""
    rollout = read_rollout(session["rollout"])
    ended = [
        line.msg
        for line in rollout.lines
        if isinstance(line, EventMsgLine)
        and isinstance(line.msg, relay.TurnComplete | relay.TurnAborted)
    ]
    completed = [m.turn_id for m in ended if isinstance(m, relay.TurnComplete)]
    for turn_id in session["completed"]:
        assert turn_id in completed
    assert session["busy"] not in completed
    aborted = [m for m in ended if isinstance(m, relay.TurnAborted)]
    assert [(m.turn_id, m.reason) for m in aborted] == [
        (session["busy"], relay.AbortReason.HOST_LOST)
    ]
    assert rollout.epoch == 2
    for note in rollout.notes:
        assert "after epoch 2 began" in note.message, note


def open_busy(
    cluster: LocalCluster, namespace: str, shared: Path, model: Path, count: int
) -> list[dict[str, Any]]:
    opened = ok(
        open_sessions(
            cluster, namespace, str(model), shared, "--count", str(count), "--turns", "2", "--busy"
        )
    )
    return json_lines(opened.stdout)


def test_a_frozen_host_loses_its_sessions_within_the_lease_and_nothing_acknowledged(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "frozen", shared, "--hosts", "3"))
    try:
        model = write_model(tmp_path / "model.json", nap=60)
        sessions = open_busy(cluster, "frozen", shared, model, 6)
        hosts = listing(cluster, "frozen")["hosts"]
        victim = sessions[0]["host"]
        pid = next(h["pid"] for h in hosts if h["name"] == victim)
        moving = [s for s in sessions if s["host"] == victim]

        def freeze() -> list[int]:
            cluster.freeze([pid])
            return [pid]

        lines, frozen_at, frozen = freeze_and_follow(cluster, "frozen", moving, freeze)
        cluster.thaw(frozen)
        check_moved(moving, lines, frozen_at)
        # The frozen host was ended: whatever it wakes to, it writes nothing more.
        deadline = time.monotonic() + 30
        while alive(pid):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for session in moving:
            check_rollout(session)
        after = listing(cluster, "frozen")
        states = {h["name"]: h["state"] for h in after["hosts"]}
        assert states[victim] == "lost"
        untouched = {s["id"] for s in sessions if s["host"] != victim}
        assert all(s["epoch"] == 1 for s in after["sessions"] if s["id"] in untouched)
    finally:
        down(cluster, "frozen")


def test_a_frozen_node_loses_its_sessions_and_wakes_to_no_write_that_counts(
    fresh_cluster: Callable[..., LocalCluster], shared: Path, tmp_path: Path
) -> None:
    cluster = fresh_cluster(["a", "b", "c"])
    ok(up(cluster, "node", shared, "--hosts", "3"))
    # Naps that end while the node is frozen, or soon after it wakes (the freeze lasts until
    # every session moved and ran a turn: a lease and a few seconds).
    model = write_model(tmp_path / "model.json", nap=15)
    sessions = open_busy(cluster, "node", shared, model, 6)
    hosts = listing(cluster, "node")["hosts"]
    # A node other than the head (which holds the registry and Ray's own state).
    head = cluster.nodes[0]
    head_pids = set(cluster.node_processes(head))
    victim_host = next(
        h
        for h in hosts
        if h["pid"] not in head_pids and any(s["host"] == h["name"] for s in sessions)
    )
    node = next(n for n in cluster.nodes[1:] if victim_host["pid"] in cluster.node_processes(n))
    moving = [s for s in sessions if s["host"] == victim_host["name"]]

    def freeze() -> list[int]:
        pids = cluster.node_processes(node)
        cluster.freeze(pids)
        return pids

    lines, frozen_at, frozen = freeze_and_follow(cluster, "node", moving, freeze)
    # The node wakes: its nap is over, and its host may run before it ends. Nothing it does
    # counts: the writer refuses, the reader ignores, the callers moved on.
    cluster.thaw(frozen)
    deadline = time.monotonic() + 30
    while alive(victim_host["pid"]):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    check_moved(moving, lines, frozen_at)
    for session in moving:
        check_rollout(session)


# --------------------------------------------------------------------------- storage


def test_a_node_without_the_shared_mount_gets_no_sessions_and_is_named(
    fresh_cluster: Callable[..., LocalCluster], shared: Path, tmp_path: Path
) -> None:
    cluster = fresh_cluster(["a", "b", "d"], hidden={"d": shared})
    result = up(cluster, "mounts", shared, "--hosts", "3")
    assert result.returncode == 1
    hosts = listing(cluster, "mounts")["hosts"]
    unshared = [h for h in hosts if h["state"] == "no storage"]
    assert len(unshared) == 1
    assert f"does not see the shared rollout directory {shared}" in unshared[0]["problem"]
    assert f"relay: {unshared[0]['problem']}" in result.stderr
    model = write_model(tmp_path / "model.json")
    sessions = json_lines(
        ok(open_sessions(cluster, "mounts", model, shared, "--count", "6")).stdout
    )
    assert unshared[0]["name"] not in {s["host"] for s in sessions}


def test_a_model_script_a_host_cannot_read_is_an_error_at_open(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "paths", shared, "--hosts", "2"))
    try:
        opened = open_sessions(cluster, "paths", str(tmp_path / "nowhere.json"), shared)
        assert opened.returncode != 0
        assert "cannot read the model script" in opened.stderr
        assert "every host must, since a session moves between them" in opened.stderr
    finally:
        down(cluster, "paths")


# --------------------------------------------------------------------------- elasticity


def test_a_lost_host_is_replaced_when_the_cluster_has_room(
    fresh_cluster: Callable[..., LocalCluster], shared: Path, tmp_path: Path
) -> None:
    cluster = fresh_cluster(["a", "b"])
    ok(up(cluster, "elastic", shared, "--hosts", "2"))
    model = write_model(tmp_path / "model.json")
    ok(open_sessions(cluster, "elastic", model, shared, "--count", "2"))
    hosts = listing(cluster, "elastic")["hosts"]
    worker = cluster.nodes[1]
    on_worker = next(h for h in hosts if h["pid"] in cluster.node_processes(worker))
    # The worker node dies whole: its bundle has nowhere to go (the head's CPU is taken).
    pids = cluster.node_processes(worker)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        now = listing(cluster, "elastic")
        states = {h["name"]: h["state"] for h in now["hosts"]}
        if states[on_worker["name"]] == "lost" and all(
            s["host"] != on_worker["name"] for s in now["sessions"] if s["state"] != "ended"
        ):
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert [h for h in now["hosts"] if h["state"] == "serving"] == [
        h for h in now["hosts"] if h["name"] != on_worker["name"] and h["state"] == "serving"
    ]
    # A new node brings room: the replacement starts there, and takes the next sessions.
    added = cluster.start_node("e")
    deadline = time.monotonic() + 120
    while True:
        now = listing(cluster, "elastic")
        fresh = [
            h
            for h in now["hosts"]
            if h["name"] not in {x["name"] for x in hosts} and h["state"] == "serving"
        ]
        if fresh:
            break
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert fresh[0]["pid"] in cluster.node_processes(added)
    sessions = json_lines(
        ok(open_sessions(cluster, "elastic", model, shared, "--count", "1")).stdout
    )
    assert sessions[0]["host"] == fresh[0]["name"]
