"""``relay app-server``'s turns and threads over their life: interrupt, compact, a failed turn,
resume, and the end of the process (its input closed, a signal) with a command running. The
real command over pipes; every line checked against Codex 0.169's schema (:mod:`.client`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.escapees import TAKE_LOCK, alive, holders

from .client import CLIENT_INFO, AppServer, app_server, read_pid, write_script

SHELL = ("-c", "tools.shell=true")


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


#: Run by the long command as ``sh -c LONG HOLD PYTHON FIFO``: a Python process that takes the
#: lock of FIFO (:func:`tests.escapees.lock_of`), says so through FIFO, then runs until it is
#: stopped. Its pid would name nothing here (the command runs in a PID namespace of its own):
#: the lock, which goes only when the process has ended, tells whether it still runs.
LONG = 'exec "$1" -c "$0" "$2"'
HOLD = (
    TAKE_LOCK + "import time\nopen(sys.argv[1], 'w').write(f'{os.getpid()}\\n')\ntime.sleep(300)\n"
)


def run_command_forever(fifo: Path) -> dict[str, Any]:
    """A ``shell`` call whose command holds the lock of the named pipe ``fifo`` (made here),
    says so through it, then runs until it is stopped."""
    os.mkfifo(fifo)
    argv = ["sh", "-c", LONG, HOLD, sys.executable, str(fifo)]
    return {"function_call": {"name": "shell", "arguments": {"argv": argv}, "call_id": "long"}}


def start_long_command(server: AppServer, fifo: Path) -> tuple[str, str]:
    """A thread whose turn runs the long command, returned once it holds its lock: the thread
    and the turn."""
    server.initialize()
    thread = server.start_thread()
    turn = server.call("turn/start", {"threadId": thread, "input": text("go")})["turn"]["id"]
    command = server.next("item/started", threadId=thread)
    while command["item"]["type"] != "commandExecution":
        command = server.next("item/started", threadId=thread)
    assert command["item"]["command"].startswith("sh -c ")
    read_pid(fifo)  # written once the lock is held
    assert alive(fifo)
    return thread, turn


def still_runs(fifo: Path) -> bool:
    """Whether the long command still runs (it holds its lock); if so, it is killed here, so
    that a failing test leaves nothing behind."""
    if not alive(fifo):
        return False
    for pid in holders(fifo):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


def test_interrupt_ends_the_running_command_and_the_turn(tmp_path: Path) -> None:
    fifo = tmp_path / "ready"
    script = write_script(tmp_path / "model.json", run_command_forever(fifo), "after")
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread, turn = start_long_command(server, fifo)
        assert server.call("turn/interrupt", {"threadId": thread, "turnId": turn}) == {}
        seen = server.until("turn/completed", threadId=thread)
        command = seen[-2]["params"]["item"]
        assert (command["type"], command["id"], command["status"]) == (
            "commandExecution",
            "long",
            "failed",
        )
        assert seen[-1]["params"]["turn"]["status"] == "interrupted"
        assert not still_runs(fifo)
        # The thread goes on: its next turn runs.
        server.call("turn/start", {"threadId": thread, "input": text("again")})
        done = server.next("turn/completed", threadId=thread)
        assert (done["turn"]["status"], done["turn"]["items"][0]["text"]) == ("completed", "after")
        late = server.error(server.request("turn/interrupt", {"threadId": thread, "turnId": turn}))
        assert late["code"] == -32602 and late["message"].startswith("turnId: ")
        assert server.close_input() == 0


def test_compact_runs_a_compaction_turn(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", "first answer", "the summary")
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread()
        server.call("turn/start", {"threadId": thread, "input": text("hi")})
        server.until("turn/completed", threadId=thread)
        assert server.call("thread/compact/start", {"threadId": thread}) == {}
        seen = server.until("turn/completed", threadId=thread)
        kinds = [
            (m["method"], m["params"]["item"]["type"])
            for m in seen
            if m.get("method") in ("item/started", "item/completed")
        ]
        assert kinds == [
            ("item/started", "contextCompaction"),
            ("item/completed", "contextCompaction"),
        ]
        assert seen[0]["method"] == "turn/started"
        assert seen[-1]["params"]["turn"]["status"] == "completed"
        assert server.close_input() == 0


def test_a_turn_the_model_refuses_fails_with_the_server_s_message(tmp_path: Path) -> None:
    script = write_script(
        tmp_path / "model.json", {"http_error": {"status": 400, "message": "no such thing"}}
    )
    with app_server("--model-script", str(script), cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread()
        server.call("turn/start", {"threadId": thread, "input": text("hi")})
        error = server.next("error", threadId=thread)
        assert error["willRetry"] is False and "no such thing" in error["error"]["message"]
        assert error["error"]["codexErrorInfo"] == "badRequest"
        turn = server.next("turn/completed", threadId=thread)["turn"]
        assert turn["status"] == "failed" and turn["error"] == error["error"]
        assert server.close_input() == 0


@pytest.mark.slow  # two servers, one after the other
def test_resume_continues_the_thread_s_rollout(tmp_path: Path) -> None:
    script = write_script(tmp_path / "model.json", "first answer", "second answer")
    rollouts = ("--rollout-dir", str(tmp_path / "sessions"))
    with app_server("--model-script", str(script), *rollouts, cwd=tmp_path) as server:
        server.initialize()
        thread = server.start_thread()
        server.call("turn/start", {"threadId": thread, "input": text("hi")})
        server.next("turn/completed", threadId=thread)
        assert server.close_input() == 0
    with app_server("--model-script", str(script), *rollouts, cwd=tmp_path) as server:
        server.initialize()
        resumed = server.call("thread/resume", {"threadId": thread})
        assert resumed["thread"]["id"] == thread
        assert resumed["thread"]["path"].startswith(str(tmp_path / "sessions"))
        (turn,) = resumed["thread"]["turns"]
        assert turn["status"] == "completed"
        assert [item["type"] for item in turn["items"]] == ["userMessage", "agentMessage"]
        assert turn["items"][1]["text"] == "first answer"
        assert server.next("thread/started")["thread"]["id"] == thread
        # The resumed session's model script starts over: its first reply answers again,
        # after the history the rollout holds.
        server.call("turn/start", {"threadId": thread, "input": text("more")})
        done = server.next("turn/completed", threadId=thread)
        assert done["turn"]["items"][0]["text"] == "first answer"
        again = server.call("thread/resume", {"threadId": thread})
        assert again["thread"]["id"] == thread
        assert server.close_input() == 0
    ephemeral = write_script(tmp_path / "m2.json", "x")
    with app_server("--model-script", str(ephemeral), *rollouts, cwd=tmp_path) as server:
        server.initialize()
        started = server.call("thread/start", {"ephemeral": True})["thread"]
        assert (started["ephemeral"], started["path"]) == (True, None)
        assert server.close_input() == 0
    (only,) = (tmp_path / "sessions").glob("**/rollout-*.jsonl")
    assert only.name.endswith(f"-{thread}.jsonl")


@pytest.mark.slow  # waits for a command to be stopped
@pytest.mark.parametrize("how", ["stdin", "SIGTERM", "SIGINT"])
def test_the_end_of_the_server_stops_every_session_and_its_commands(
    tmp_path: Path, how: str
) -> None:
    fifo = tmp_path / "ready"
    script = write_script(tmp_path / "model.json", run_command_forever(fifo))
    with app_server("--model-script", str(script), *SHELL, cwd=tmp_path) as server:
        thread, turn = start_long_command(server, fifo)
        idle = server.start_thread()
        status = server.close_input() if how == "stdin" else server.signal(getattr(signal, how))
        assert status == 0, server.stderr_text()
        assert not still_runs(fifo)
        ended = server.next("turn/completed", threadId=thread)["turn"]
        assert (ended["id"], ended["status"]) == (turn, "interrupted")
        assert idle != thread
        assert server.stderr_text() == ""


def test_a_client_that_stops_reading_ends_the_server(tmp_path: Path) -> None:
    # The turn's tool call ends after the client has gone: what the server then has to say
    # cannot be written, and it shuts down though its input is still open.
    script = write_script(
        tmp_path / "model.json",
        {"function_call": {"name": "sleep", "arguments": {"seconds": 0.5}}},
        "never read",
    )
    output, server_output = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "relay", "app-server", "--model-script", str(script)],
        stdin=subprocess.PIPE,
        stdout=server_output,
        cwd=tmp_path,
    )
    os.close(server_output)
    try:
        assert process.stdin is not None
        requests = [
            {"id": 1, "method": "initialize", "params": {"clientInfo": CLIENT_INFO}},
            {"id": 2, "method": "thread/start", "params": {}},
        ]
        process.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        process.stdin.flush()
        thread = read_until(output, lambda m: m.get("id") == 2)["result"]["thread"]["id"]
        turn = {"threadId": thread, "input": text("go")}
        process.stdin.write(json.dumps({"id": 3, "method": "turn/start", "params": turn}).encode())
        process.stdin.write(b"\n")
        process.stdin.flush()
        read_until(output, lambda m: m.get("id") == 3)
        os.close(output)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


def read_until(fd: int, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Read lines of JSON from ``fd`` until one ``matches``, each wait bounded."""
    data = b""
    while True:
        while b"\n" not in data:
            readable, _, _ = select.select([fd], [], [], 30)
            assert readable, "no output within 30 s"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "the server ended its output"
            data += chunk
        line, _, data = data.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        if matches(message):
            return message
