"""Tasks of a run's own on a cluster of separate raylets (``netns.py``): ``relay cluster run
--task`` carries the factories' modules to the hosts it starts, ``relay cluster up --task`` to a
deployment's (and to a host started in place of a lost one), and a host that cannot load one is
an error naming the op type, before any session runs.

The task package and the task file are written to a temporary directory that only the command
finds (its ``PYTHONPATH`` and working directory): the nodes' processes can import them only from
what Ray carried.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .netns import LocalCluster

pytestmark = pytest.mark.slow

SHOUT = """\
import attrs
import relay


@attrs.frozen
class Shout(relay.SessionTask):
    text: str

    @property
    def kind(self) -> str:
        return "shout"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        answer = self.text.upper()
        ctx.emit(relay.AgentMessage(answer))
        return answer


def shout(op: relay.CustomOp) -> Shout:
    return Shout(str(op.fields["text"]))
"""

WHISPER = SHOUT.replace("Shout", "Whisper").replace("shout", "whisper").replace("upper", "lower")

SCRIPT = "\n".join(
    json.dumps(line)
    for line in [
        {"op": {"type": "shout", "text": "hello"}},
        {"wait_for": {"type": "turn_complete"}},
        {"op": {"type": "whisper", "text": "QUIET"}},
        {"wait_for": {"type": "turn_complete", "count": 2}},
    ]
)
TASKS = ["--task", "shout=shoutpkg.tasks:shout", "--task", "whisper=extra/whisper.py:whisper"]


@pytest.fixture
def work(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The command's working directory (with the task file and the script) and the variables
    that let it find the task package."""
    packages = tmp_path / "packages"
    (packages / "shoutpkg").mkdir(parents=True)
    (packages / "shoutpkg" / "__init__.py").write_text("", encoding="utf-8")
    (packages / "shoutpkg" / "tasks.py").write_text(SHOUT, encoding="utf-8")
    here = tmp_path / "work"
    (here / "extra").mkdir(parents=True)
    (here / "extra" / "whisper.py").write_text(WHISPER, encoding="utf-8")
    (here / "script.jsonl").write_text(SCRIPT + "\n", encoding="utf-8")
    return here, {"PYTHONPATH": str(packages)}


def run(
    cluster: LocalCluster, work: tuple[Path, dict[str, str]], namespace: str, *extra: str
) -> Any:
    here, env = work
    return cluster.relay(
        "cluster",
        "run",
        "script.jsonl",
        "script.jsonl",
        "--address",
        cluster.address,
        "--namespace",
        namespace,
        "--out",
        "events",
        "--rollout-dir",
        str(here / "sessions"),
        *extra,
        cwd=here,
        env=env,
    )


def answers(here: Path) -> list[list[str | None]]:
    found = []
    for path in sorted((here / "events").iterdir()):
        events = [json.loads(line) for line in path.read_text().splitlines()]
        completed = [e["msg"] for e in events if e["msg"]["type"] == "turn_complete"]
        found.append([msg["last_agent_message"] for msg in completed])
        assert events[-1]["msg"]["type"] == "shutdown_complete"
    return found


def listing(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    result = cluster.relay(
        "cluster", "ls", "--address", cluster.address, "--namespace", namespace, "--json"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


def up(
    cluster: LocalCluster, work: tuple[Path, dict[str, str]], namespace: str, *extra: str
) -> Any:
    here, env = work
    return cluster.relay(
        "cluster",
        "up",
        "--address",
        cluster.address,
        "--namespace",
        namespace,
        "--hosts",
        "2",
        "--rollout-dir",
        str(here / "sessions"),
        *extra,
        cwd=here,
        env=env,
    )


def down(cluster: LocalCluster, namespace: str) -> None:
    cluster.relay("cluster", "down", "--address", cluster.address, "--namespace", namespace)


def test_a_run_carries_its_tasks_to_the_hosts_it_starts(
    cluster: LocalCluster, work: tuple[Path, dict[str, str]]
) -> None:
    result = run(cluster, work, "own-hosts", *TASKS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert answers(work[0]) == [["HELLO", "quiet"], ["HELLO", "quiet"]]


def test_the_runs_tasks_are_loaded_and_its_scripts_checked_before_anything_runs(
    work: tuple[Path, dict[str, str]],
) -> None:
    here, env = work

    def relay_run(variables: dict[str, str], *tasks: str) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "RAY_ADDRESS"}}
        return subprocess.run(
            [sys.executable, "-m", "relay", "cluster", "run", "script.jsonl", *tasks],
            capture_output=True,
            text=True,
            cwd=here,
            env={**environ, **variables},
            timeout=60,
            check=False,
        )

    unserved = relay_run(env, "--task", "shout=shoutpkg.tasks:shout")
    assert unserved.returncode == 2
    assert "script.jsonl line 3: unknown op type 'whisper'" in unserved.stderr
    unfound = relay_run({}, *TASKS)
    assert unfound.returncode == 2
    assert unfound.stderr.startswith(
        "relay: task shout 'shoutpkg.tasks:shout': cannot import shoutpkg.tasks"
    )
    assert not (here / "events").exists()


def test_a_deployment_serves_the_tasks_it_carries_and_names_a_host_that_cannot_load_one(
    cluster: LocalCluster, work: tuple[Path, dict[str, str]]
) -> None:
    here, _ = work
    # Started without them, the deployment's hosts cannot load the run's tasks.
    assert up(cluster, work, "bare").returncode == 0
    try:
        refused = run(cluster, work, "bare", *TASKS)
    finally:
        down(cluster, "bare")
    assert refused.returncode == 2, refused.stderr[-3000:]
    (line,) = [line for line in refused.stderr.splitlines() if "cannot load" in line]
    assert line.startswith("relay: host relay-host-")
    assert "cannot load the task of op 'shout' (" in line
    assert "No module named 'shoutpkg'" in line
    assert not list((here / "events").iterdir())

    # Started with them, its hosts serve them; so does a host started in place of a lost one.
    started = up(cluster, work, "carrying", *TASKS)
    assert started.returncode == 0, started.stderr[-3000:]
    assert "relay: the hosts carry the tasks of shout, whisper" in started.stdout
    try:
        served = run(cluster, work, "carrying", *TASKS)
        assert served.returncode == 0, served.stderr[-3000:]
        assert answers(here) == [["HELLO", "quiet"], ["HELLO", "quiet"]]
        hosts = listing(cluster, "carrying")["hosts"]
        os.kill(hosts[0]["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while True:
            now = listing(cluster, "carrying")["hosts"]
            if [h["state"] for h in now].count("serving") == 2 and len(now) == 3:
                break
            assert time.monotonic() < deadline, now
            time.sleep(0.3)
        for path in (here / "events").iterdir():
            path.unlink()
        again = run(cluster, work, "carrying", *TASKS)
        assert again.returncode == 0, again.stderr[-3000:]
        assert answers(here) == [["HELLO", "quiet"], ["HELLO", "quiet"]]
    finally:
        down(cluster, "carrying")
