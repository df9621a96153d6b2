"""Approvals on the command line, through the real ``relay`` command: a ``relay run`` script
answers with ops; ``relay exec`` asks on a terminal (a pseudo-terminal here) or denies without
one (docs/approvals.md)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import events, relay

UNTRUSTED = ["-c", "tools.shell=true", "-c", "approval_policy=untrusted"]
NO_ROLLOUT = ["-c", "rollout.enabled=false", *UNTRUSTED]


def shell(call_id: str, *argv: str) -> dict[str, Any]:
    return {
        "function_call": {"name": "shell", "arguments": {"argv": list(argv)}, "call_id": call_id}
    }


def model(tmp_path: Path, *replies: Any) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"responses": [*replies, "done"]}), encoding="utf-8")
    return str(path)


def script(tmp_path: Path, *lines: dict[str, Any]) -> str:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return str(path)


TURN = {"id": "t1", "op": {"type": "user_turn", "items": [{"type": "text", "text": "go"}]}}


def asked(call_id: str) -> dict[str, Any]:
    return {"wait_for": {"type": "exec_approval_request", "match": {"call_id": call_id}}}


def decide(call_id: str, decision: str) -> dict[str, Any]:
    return {"op": {"type": "exec_approval", "id": call_id, "decision": decision}}


def outputs(out: list[dict[str, Any]]) -> dict[str, str]:
    return {
        e["msg"]["item"]["id"]: e["msg"]["item"]["output"]
        for e in out
        if e["msg"]["type"] == "item_completed" and e["msg"]["item"]["type"] == "tool_call"
    }


def recorded_outputs(sessions: Path) -> dict[str, str]:
    """The outputs of the calls in the one rollout under ``sessions``."""
    (rollout,) = sessions.rglob("rollout-*.jsonl")
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert records[-1]["payload"] == {"type": "shutdown_complete"}
    return {
        r["payload"]["call_id"]: r["payload"]["output"]
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] == "function_call_output"
    }


def requests(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["msg"] for e in out if e["msg"]["type"] == "exec_approval_request"]


# ------------------------------------------------------------------ relay run: ops decide


def test_a_script_waits_for_each_request_and_answers_it_with_an_op(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    replies = [
        shell("c1", "touch", "made"),
        shell("c2", "touch", "made"),  # the same argv: approved for the session
        shell("c3", "rm", "made"),
    ]
    lines = [
        TURN,
        asked("c1"),
        decide("c1", "approved_for_session"),
        asked("c3"),
        decide("c3", "denied"),
        {"wait_for": {"type": "turn_complete"}},
    ]
    result = relay(
        "run",
        script(tmp_path, *lines),
        "--model-script",
        model(tmp_path, *replies),
        "-c",
        "rollout.enabled=false",
        *UNTRUSTED,
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    out = events(result.stdout)
    assert requests(out) == [
        {
            "type": "exec_approval_request",
            "call_id": call_id,
            "turn_id": "t1",
            "command": argv,
            "cwd": str(work),
            "reason": "approval policy untrusted: the command is not read-only",
        }
        for call_id, argv in [("c1", ["touch", "made"]), ("c3", ["rm", "made"])]
    ]
    done = outputs(out)
    assert done["c1"] == done["c2"] == "\n[exit code 0]"
    assert done["c3"].startswith("denied")
    assert (work / "made").exists()
    assert not [e for e in out if e["msg"]["type"] == "error"]


@pytest.mark.parametrize(
    ("lines", "where"),
    [
        ([TURN, {"wait_for": {"type": "turn_complete"}}], "s.jsonl line 2: wait_for"),
        ([TURN], "s.jsonl: the script ended"),
        # A decision for another call leaves c1 waiting.
        ([TURN, asked("c1"), decide("c9", "approved")], "s.jsonl: the script ended"),
    ],
    ids=["wait_for", "end", "other-call"],
)
def test_a_script_that_never_decides_fails_naming_the_call_instead_of_waiting(
    tmp_path: Path, lines: list[dict[str, Any]], where: str
) -> None:
    result = relay(
        "run",
        script(tmp_path, *lines),
        "--model-script",
        model(tmp_path, shell("c1", "touch", "made")),
        "--rollout-dir",
        str(tmp_path / "sessions"),
        *UNTRUSTED,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    assert where in result.stderr and "the call 'c1' waits for its approval" in result.stderr
    assert not (tmp_path / "made").exists()
    # The session was shut down: the call reads aborted in the rollout.
    assert recorded_outputs(tmp_path / "sessions") == {"c1": "aborted"}


def test_an_interrupt_of_a_waiting_call_lets_the_script_go_on(tmp_path: Path) -> None:
    lines = [
        TURN,
        asked("c1"),
        {"op": {"type": "interrupt"}},
        {"wait_for": {"type": "turn_aborted"}},
    ]
    result = relay(
        "run",
        script(tmp_path, *lines),
        "--model-script",
        model(tmp_path, shell("c1", "touch", "made")),
        "--rollout-dir",
        str(tmp_path / "sessions"),
        *UNTRUSTED,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    aborted = [e["msg"] for e in events(result.stdout) if e["msg"]["type"] == "turn_aborted"]
    assert [msg["reason"] for msg in aborted] == ["interrupted"]
    assert recorded_outputs(tmp_path / "sessions") == {"c1": "aborted"}
    assert not (tmp_path / "made").exists()


# ------------------------------------------------------------------ relay exec, no terminal


def test_exec_without_a_terminal_denies_every_request_with_one_warning_each(
    tmp_path: Path,
) -> None:
    replies = [shell("c1", "touch", "made"), shell("c2", "ls"), shell("c3", "rm", "-r", "x y")]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "relay",
            "exec",
            "go",
            "--events",
            "--model-script",
            model(tmp_path, *replies),
            "-c",
            "rollout.enabled=false",
            *UNTRUSTED,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"relay: warning: denied the call {call_id} ({shown}): it needs an approval, and "
        "without a terminal (standard input and standard error) nobody can give one"
        for call_id, shown in [("c1", "touch made"), ("c3", "rm -r 'x y'")]
    ]
    done = outputs(events(result.stdout))
    assert done["c1"].startswith("denied") and done["c3"].startswith("denied")
    assert "[exit code 0]" in done["c2"]  # read-only: never asked
    assert not (tmp_path / "made").exists()


# ------------------------------------------------------------------ relay exec, a terminal

PROMPT = b"[y/a/n] "


class Terminal:
    """``relay exec`` with its standard input and error on a pseudo-terminal, its standard
    output on a pipe."""

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "relay", "exec", *args],
            stdin=slave,
            stderr=slave,
            stdout=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        os.close(slave)
        self.shown = b""

    def read_until(self, count: int) -> str:
        """What the terminal showed up to its ``count``-th question."""
        while self.shown.count(PROMPT) < count:
            ready, _, _ = select.select([self.master], [], [], 60)
            assert ready, f"no question within 60 s; the terminal shows {self.shown!r}"
            chunk = os.read(self.master, 4096)
            assert chunk, f"the terminal closed; it showed {self.shown!r}"
            self.shown += chunk
        return self.shown.decode()

    def type(self, text: bytes) -> None:
        os.write(self.master, text)

    def finish(self) -> tuple[int, str, str]:
        """The exit status, standard output and all the terminal showed."""
        stdout, _ = self.process.communicate(timeout=60)
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: every end of the slave is closed
                break
            if not chunk:
                break
            self.shown += chunk
        return self.process.returncode, stdout.decode(), self.shown.decode().replace("\r\n", "\n")

    def close(self) -> None:
        """End the process if a failed test left it asking, and close the terminal."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        os.close(self.master)


@pytest.fixture
def terminal() -> Iterator[Callable[..., Terminal]]:
    """Opens terminals, each closed when the test ends, whatever its outcome."""
    opened: list[Terminal] = []

    def open_terminal(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Terminal:
        opened.append(Terminal(cwd, *args, env=env))
        return opened[-1]

    yield open_terminal
    for term in opened:
        term.close()


def test_exec_on_a_terminal_asks_each_request_until_answered(
    tmp_path: Path, terminal: Callable[..., Terminal]
) -> None:
    replies = [
        shell("c1", "touch", "one"),
        shell("c2", "touch", "two"),
        shell("c3", "touch", "two"),  # approved for the session: not asked
        shell("c4", "touch", "four"),
    ]
    term = terminal(tmp_path, "go", "--model-script", model(tmp_path, *replies), *NO_ROLLOUT)
    term.read_until(1)
    term.type(b"\n")  # empty: asked again
    term.read_until(2)
    term.type(b"maybe\n")  # unknown: asked again
    term.read_until(3)
    term.type(b"y\n")
    term.read_until(4)
    term.type(b"a\n")
    term.read_until(5)
    term.type(b"n\n")
    status, stdout, shown = term.finish()
    assert status == 0, shown
    assert stdout == "done\n"
    assert shown.count("[y/a/n]") == 5
    assert [line for line in shown.splitlines() if "waits for your approval" in line] == [
        f"relay: the call {call_id} waits for your approval" for call_id in ("c1", "c2", "c4")
    ]
    assert f"  touch one\n  in {tmp_path}\n  why: approval policy untrusted" in shown
    assert (tmp_path / "one").exists() and (tmp_path / "two").exists()
    assert not (tmp_path / "four").exists()


def test_exec_on_a_terminal_denies_at_the_end_of_input(
    tmp_path: Path, terminal: Callable[..., Terminal]
) -> None:
    replies = [shell("c1", "touch", "made")]
    term = terminal(tmp_path, "go", "--model-script", model(tmp_path, *replies), *NO_ROLLOUT)
    term.read_until(1)
    term.type(b"\x04")  # Ctrl-D on an empty line: the end of input
    status, stdout, shown = term.finish()
    assert status == 0, shown
    assert stdout == "done\n"
    assert "relay: no answer (end of input): denied" in shown
    assert not (tmp_path / "made").exists()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_interrupt_ends_the_question_and_nothing_runs(
    tmp_path: Path, backend: str, terminal: Callable[..., Terminal]
) -> None:
    replies = [shell("c1", "touch", "made")]
    term = terminal(
        tmp_path,
        "go",
        "--events",
        "--model-script",
        model(tmp_path, *replies),
        "--rollout-dir",
        str(tmp_path / "sessions"),
        *UNTRUSTED,
        env={"RELAY_BACKEND": backend},
    )
    term.read_until(1)
    term.process.send_signal(signal.SIGINT)
    status, stdout, shown = term.finish()
    assert status == 128 + signal.SIGINT, shown
    # The question's reader ended with it: the session ended without waiting for an answer.
    assert shown.endswith("[y/a/n] relay: interrupted\n"), shown
    out = events(stdout)
    assert [e["msg"]["reason"] for e in out if e["msg"]["type"] == "turn_aborted"] == ["shutdown"]
    assert recorded_outputs(tmp_path / "sessions") == {"c1": "aborted"}
    assert not (tmp_path / "made").exists()
