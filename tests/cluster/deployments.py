"""What the tests of a deployment on a cluster of separate raylets share: the ``relay cluster``
commands as a user runs them, the test driver's ``open``, and model scripts."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from .netns import LocalCluster

DRIVER = str(Path(__file__).with_name("driver.py"))
LEASE = 3.0


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def listing(cluster: LocalCluster, namespace: str) -> dict[str, Any]:
    result = ok(
        cluster.relay(
            "cluster", "ls", "--address", cluster.address, "--namespace", namespace, "--json"
        )
    )
    return dict(json.loads(result.stdout))


def up(
    cluster: LocalCluster, namespace: str, shared: Path, *extra: str, lease: float = LEASE
) -> subprocess.CompletedProcess[str]:
    return cluster.relay(
        "cluster",
        "up",
        "--address",
        cluster.address,
        "--namespace",
        namespace,
        "--rollout-dir",
        str(shared),
        "--lease-seconds",
        str(lease),
        *extra,
    )


def down(cluster: LocalCluster, namespace: str) -> None:
    ok(cluster.relay("cluster", "down", "--address", cluster.address, "--namespace", namespace))


def open_sessions(
    cluster: LocalCluster, namespace: str, model: Path | str, shared: Path, *options: str
) -> subprocess.CompletedProcess[str]:
    """The test driver's ``open`` on the deployment in ``namespace`` (``options`` before it)."""
    return cluster.command(
        [
            "python",
            DRIVER,
            "open",
            "--address",
            cluster.address,
            "--namespace",
            namespace,
            *options,
            "--model",
            str(model),
            "--rollout-dir",
            str(shared),
        ]
    )


def write_model(path: Path, *, nap: float | None = None, answers: int = 2) -> Path:
    responses: list[dict[str, Any]] = [{"text": f"answer {n}"} for n in range(answers)]
    if nap is not None:
        responses.append(
            {"function_call": {"name": "sleep", "arguments": {"seconds": nap}, "call_id": "nap"}}
        )
        responses.append({"text": "awake"})
    path.write_text(json.dumps({"responses": responses}), encoding="utf-8")
    return path


class Lines:
    """The JSON lines a process prints, each waited for a bounded time (a reader thread feeds
    them in), so that a test whose process stops printing fails rather than hangs."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self._lines: queue.Queue[str | None] = queue.Queue()
        stdout = process.stdout

        def read() -> None:
            for line in stdout:
                self._lines.put(line)
            self._lines.put(None)

        threading.Thread(target=read, daemon=True).start()

    def next(self, within_s: float = 120.0) -> dict[str, Any] | None:
        """The next line (None: the process closed its output), or a failure after
        ``within_s`` seconds without one."""
        try:
            line = self._lines.get(timeout=within_s)
        except queue.Empty:
            raise AssertionError(f"no line within {within_s:g} s") from None
        return None if line is None else dict(json.loads(line))
