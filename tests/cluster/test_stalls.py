"""Processes of a deployment that stop and go on (SIGSTOP, then SIGCONT), on a cluster of
separate raylets (``netns.py``): a caller its host forgot while it was stopped follows its
sessions again and misses nothing; a registry stopped for less than a lease loses no host, and
one stopped for longer (alone, or with a host) loses no session: each goes on, on a live host,
from its rollout."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .deployments import (
    DRIVER,
    LEASE,
    Lines,
    down,
    json_lines,
    listing,
    ok,
    open_sessions,
    up,
    write_model,
)
from .netns import LocalCluster

pytestmark = pytest.mark.slow


def attach(
    cluster: LocalCluster, namespace: str, session: str, after: int, script: list[Any], *extra: str
) -> Any:
    """``relay cluster attach`` running ``script`` (op script lines) in ``session``."""
    return cluster.relay(
        "cluster",
        "attach",
        session,
        "--address",
        cluster.address,
        "--namespace",
        namespace,
        "--from",
        str(after),
        *extra,
        input="".join(json.dumps(line) + "\n" for line in script),
    )


TURN = [
    {"op": {"type": "user_turn", "items": [{"type": "text", "text": "while you slept"}]}},
    {"wait_for": {"type": "turn_complete"}},
]


def test_a_caller_its_host_forgot_follows_its_session_again_and_misses_nothing(
    cluster: LocalCluster, shared: Path, tmp_path: Path
) -> None:
    ok(up(cluster, "refollow", shared, "--hosts", "1"))
    try:
        model = write_model(tmp_path / "model.json", answers=4)
        (session,) = json_lines(ok(open_sessions(cluster, "refollow", model, shared)).stdout)
        watcher = cluster.spawn(
            [
                "python",
                DRIVER,
                "watch",
                session["id"],
                "--address",
                cluster.address,
                "--namespace",
                "refollow",
                "--after",
                str(session["seq"]),
            ]
        )
        lines = Lines(watcher)
        ready = lines.next()
        assert ready is not None and ready["ready"]
        # The caller stops: it renews its place no more, and its host forgets it after three
        # leases (its stream ends, what waited for it is dropped). A turn runs meanwhile.
        cluster.freeze([watcher.pid])
        stopped = time.monotonic()
        try:
            ok(attach(cluster, "refollow", session["id"], session["seq"], TURN))
            time.sleep(max(0.0, 3 * LEASE + 2 - (time.monotonic() - stopped)))
        finally:
            cluster.thaw([watcher.pid])
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1].get("type") != "turn_complete":
            line = lines.next()
            assert line is not None
            seen.append(line)
        # Going on, it follows the session again from the last event it had: what it missed
        # comes from the host's latest events and the rollout, each once.
        ok(attach(cluster, "refollow", session["id"], seen[-1]["seq"], [], "--shutdown"))
        while (line := lines.next()) is not None:
            seen.append(line)
        watcher.wait(timeout=60)
        assert watcher.returncode == 0, watcher.stderr.read() if watcher.stderr else ""
        assert seen[-1].get("done")
        events = seen[:-1]
        seqs = [event["seq"] for event in events]
        assert seqs == list(range(session["seq"] + 1, session["seq"] + 1 + len(seqs)))
        kinds = [event["type"] for event in events]
        assert kinds[0] == "turn_started" and kinds[-1] == "shutdown_complete"
        assert kinds.count("turn_complete") == 1 and "agent_message" in kinds
    finally:
        down(cluster, "refollow")


# --------------------------------------------------------------------------- a stopped registry


def settled(cluster: LocalCluster, namespace: str, sessions: list[str]) -> dict[str, Any]:
    """The listing once every session runs on a serving host again; a session lost on the way
    fails at once (a lost session stays lost)."""
    deadline = time.monotonic() + 120
    while True:
        now = listing(cluster, namespace)
        states = {s["id"]: s for s in now["sessions"] if s["id"] in sessions}
        lost = [s for s in states.values() if s["state"] == "lost"]
        assert not lost, [(s["id"], s["epoch"], s["problem"]) for s in lost]
        serving = {h["name"] for h in now["hosts"] if h["state"] == "serving"}
        if all(s["state"] in ("idle", "running") and s["host"] in serving for s in states.values()):
            return now
        assert time.monotonic() < deadline, now
        time.sleep(0.3)


def again(cluster: LocalCluster, namespace: str, sessions: list[str]) -> list[dict[str, Any]]:
    """One more turn in each session, from a client process of its own."""
    return json_lines(
        ok(
            cluster.command(
                [
                    "python",
                    DRIVER,
                    "again",
                    *sessions,
                    "--address",
                    cluster.address,
                    "--namespace",
                    namespace,
                ]
            )
        ).stdout
    )


def stop_for(cluster: LocalCluster, pids: list[int], seconds: float) -> None:
    cluster.freeze(pids)
    try:
        time.sleep(seconds)  # the fault: processes stopped for this long
    finally:
        cluster.thaw(pids)


#: The lease of the registry stall tests: long enough that a host of a loaded machine (two
#: cores, the rest of the suite beside it) still renews within it, or within the stop's
#: margin of it (a renewal is due every third of a lease).
STALL_LEASE = 6.0


@pytest.mark.parametrize(
    ("stopped_s", "with_host"),
    [(3.0, False), (10.0, False), (10.0, True)],
    ids=["registry-shorter-than-a-lease", "registry-longer-than-a-lease", "registry-and-a-host"],
)
def test_a_stopped_registry_loses_no_session(
    cluster: LocalCluster, shared: Path, tmp_path: Path, stopped_s: float, with_host: bool
) -> None:
    namespace = f"stall-{int(stopped_s)}-{int(with_host)}"
    ok(up(cluster, namespace, shared, "--hosts", "2", lease=STALL_LEASE))
    try:
        model = write_model(tmp_path / "model.json", answers=6)
        opened = json_lines(
            ok(open_sessions(cluster, namespace, model, shared, "--count", "4")).stdout
        )
        keys = [session["id"] for session in opened]
        before = listing(cluster, namespace)
        stopped = [before["registry"]["pid"]]
        if with_host:
            stopped.append(before["hosts"][0]["pid"])
        stop_for(cluster, stopped, stopped_s)
        after = settled(cluster, namespace, keys)
        epochs = {s["id"]: s["epoch"] for s in after["sessions"]}
        lost_hosts = [h for h in after["hosts"] if h["state"] == "lost"]
        if stopped_s < STALL_LEASE:
            # Every host renewed throughout, and the registry reads those renewals on waking.
            assert lost_hosts == []
            assert {epochs[key] for key in keys} == {1}
        else:
            # A host lost is one whose own lease ran out (it ended itself), never one the
            # registry judged by the time it could not hear. Its sessions went on elsewhere,
            # from their rollouts.
            for host in lost_hosts:
                assert not host["problem"].startswith("its lease ran out"), host
            moved = {
                s["id"] for s in before["sessions"] if s["host"] in {h["name"] for h in lost_hosts}
            }
            assert all(epochs[key] == 2 for key in moved)
        turns = again(cluster, namespace, keys)
        assert [turn["id"] for turn in turns] == keys
        assert all(turn["epoch"] == epochs[turn["id"]] for turn in turns)
    finally:
        down(cluster, namespace)
