"""Processes of a deployment that stop and go on (SIGSTOP, then SIGCONT), on a cluster of
separate raylets (``netns.py``): a caller its host forgot while it was stopped follows its
sessions again and misses nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .deployments import DRIVER, LEASE, Lines, down, json_lines, ok, open_sessions, up, write_model
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
