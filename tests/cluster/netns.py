"""A Ray cluster of separate raylets on this machine, for the tests of a deployment.

Each raylet is a node of its own (``ray start`` with its own temp dir and agent port), and the
whole cluster runs in a network namespace that has only ``lo``: Ray then binds 127.0.0.1, its
ports cannot meet those of any other Ray on the machine, and nothing leaves loopback. Every
process of the cluster, and every command a test runs against it, lives in the namespace; the
cluster ends by killing the namespace's processes by id (never ``ray stop``, which would end
every Ray on the machine).

A node can be started *without the shared mount*: in a mount namespace of its own, with an
empty file system mounted over the shared directory, so that the directory exists there but is
another one, as on a node where the shared file system is not mounted.

Nodes die faster than Ray's default here (5 missed health checks, one a second, each given
2 s), so that a test of a lost node does not wait a minute for Ray, while a node slowed down by
the two shared cores is not taken for dead; relay's own lease is what the tests measure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import attrs

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
HEALTH = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 2000,
    "health_check_failure_threshold": 5,
}
PORT = 6379


def unavailable() -> str | None:
    """Why this machine cannot run such a cluster (None: it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "the ip and unshare commands are missing"
    probe = f"relay-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.decode().strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, check=False)
    return None


def environment() -> dict[str, str]:
    """The environment of the cluster's processes and of the commands run against it."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    }
    env.update(
        RAY_AUTH_MODE="disabled",
        RAY_USAGE_STATS_ENABLED="0",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


@attrs.define
class Node:
    label: str
    temp: Path


@attrs.define
class LocalCluster:
    """A head and worker nodes in one network namespace (see the module doc)."""

    root: Path
    name: str = attrs.field(factory=lambda: f"relay-test-{uuid.uuid4().hex[:8]}")
    nodes: list[Node] = attrs.field(factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{PORT}"

    def _exec(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def create(self) -> None:
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run([*self._exec(), "ip", "link", "set", "lo", "up"], check=True)

    def start_node(self, label: str, *, cpus: float = 1, hidden: Path | None = None) -> Node:
        """Start a node (the first is the head); ``hidden``: a directory this node sees
        empty and unshared (a node without the shared mount)."""
        temp = self.root / f"ray-{label}"
        head = not self.nodes
        args = [
            str(BIN / "ray"),
            "start",
            f"--num-cpus={cpus:g}",
            f"--temp-dir={temp}",
            f"--resources={json.dumps({f'node_{label}': 1})}",
            "--object-store-memory=80000000",
            "--disable-usage-stats",
            f"--dashboard-agent-listen-port={52365 + len(self.nodes)}",
        ]
        if head:
            args += [
                "--head",
                f"--port={PORT}",
                "--include-dashboard=false",
                f"--system-config={json.dumps(HEALTH)}",
            ]
        else:
            args.append(f"--address={self.address}")
        command = [*self._exec(), *args]
        if hidden is not None:
            hidden.mkdir(parents=True, exist_ok=True)
            start = " ".join(map(_quoted, args))
            script = f"mount -t tmpfs relay-unshared {hidden} && exec {start}"
            command = [
                *self._exec(),
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
            ]
        started = subprocess.run(
            command, env=environment(), capture_output=True, text=True, timeout=180, check=False
        )
        if started.returncode != 0:
            raise RuntimeError(f"ray start for node {label} failed:\n{started.stderr[-3000:]}")
        node = Node(label, temp)
        self.nodes.append(node)
        return node

    def command(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run a command in the namespace (``python`` is this interpreter; ``env``: variables
        of its own besides the cluster's)."""
        kwargs.setdefault("timeout", 180)
        return subprocess.run(
            self._line(args),
            env={**environment(), **kwargs.pop("env", {})},
            capture_output=True,
            text=True,
            cwd=kwargs.pop("cwd", ROOT),
            check=False,
            **kwargs,
        )

    def spawn(self, args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        """Start a command in the namespace, without waiting."""
        return subprocess.Popen(
            self._line(args),
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=kwargs.pop("stdin", subprocess.DEVNULL),
            text=True,
            cwd=kwargs.pop("cwd", ROOT),
            **kwargs,
        )

    def relay(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """``relay ARGS`` in the namespace."""
        return self.command(["python", "-m", "relay", *args], **kwargs)

    def _line(self, args: list[str]) -> list[str]:
        if args and args[0] == "python":
            args = [sys.executable, *args[1:]]
        return [*self._exec(), *args]

    def pids(self) -> list[int]:
        found = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False
        )
        return [int(pid) for pid in found.stdout.split()]

    def node_processes(self, node: Node) -> list[int]:
        """The raylet of ``node`` and every process it started (the node, as a machine)."""
        # A raylet is known by the resource its node alone has (``node_<label>``): Ray 2.50
        # runs every raylet under the head's temp dir, whatever ``--temp-dir`` said.
        raylet = None
        for pid in self.pids():
            line = _cmdline(pid)
            if "raylet/raylet" in line and f"node_{node.label}" in _resources(line):
                raylet = pid
        if raylet is None:
            return []
        # Every descendant, whatever the depth (Ray 2.50 starts workers a level further down).
        family = [raylet]
        others = [pid for pid in self.pids() if pid != raylet]
        grown = True
        while grown:
            grown = False
            for pid in others:
                if pid not in family and _parent(pid) in family:
                    family.append(pid)
                    grown = True
        return family

    def freeze(self, pids: list[int]) -> None:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def destroy(self) -> None:
        """Kill every process of the namespace by id, then the namespace and the temp dirs."""
        for _ in range(20):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)
        for node in self.nodes:
            shutil.rmtree(node.temp, ignore_errors=True)


def _quoted(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _resources(cmdline: str) -> list[str]:
    """The names of the resources a raylet's command line gives its node."""
    for arg in cmdline.split():
        if arg.startswith("--static_resource_list="):
            return arg.split("=", 1)[1].split(",")[0::2]
    return []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1])


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
