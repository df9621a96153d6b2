"""The ``relay`` process as a user meets it: exit status, script checks, signals, terminals.

Every test drives a real ``relay`` subprocess. Pipes are read by a thread into a queue and
waited on with a timeout, so a hang fails the test instead of stalling the suite; signals are
sent only once an event they depend on has been read from the process's stdout.
"""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

TIMEOUT = 30
USER_TURN = {"type": "user_turn", "items": [{"type": "text", "text": "Wait for an hour."}]}
SLEEP_FOREVER = {"function_call": {"name": "sleep", "arguments": {"seconds": 3600}}}


def relay_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "relay", *args]


def write_jsonl(path: Path, *rows: Any) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


class Lines:
    """Lines of a pipe, read by a thread so that every wait has a timeout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[bytes]) -> None:
        for line in iter(stream.readline, b""):
            self._queue.put(line)
        self._queue.put(None)

    def next(self) -> str | None:
        line = self._queue.get(timeout=TIMEOUT)
        if line is None:
            return None
        text = line.decode("utf-8")
        self.seen.append(text)
        return text

    def until(self, needle: str) -> str:
        while (line := self.next()) is not None:
            if needle in line:
                return line
        raise AssertionError(f"the process ended before printing {needle!r}: {self.seen}")

    def rest(self) -> list[str]:
        while self.next() is not None:
            pass
        return self.seen


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=TIMEOUT)


def spawn(
    processes: list[subprocess.Popen[bytes]], *args: str, cwd: Path, **kwargs: Any
) -> subprocess.Popen[bytes]:
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.Popen(relay_argv(*args), cwd=cwd, **kwargs)
    processes.append(proc)
    return proc


def run(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        relay_argv(*args),
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=TIMEOUT,
        check=False,
    )


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def rollout_lines(root: Path) -> list[dict[str, Any]]:
    (path,) = root.rglob("rollout-*.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# ------------------------------------------------------------------ exit status


def failing_run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    model = write_json(
        tmp_path / "model.json",
        {"responses": [{"http_error": {"status": 400, "message": "no such model here"}}]},
    )
    script = write_jsonl(tmp_path / "s.jsonl", {"id": "t1", "op": USER_TURN})
    return run(
        "run",
        str(script),
        "--model-script",
        str(model),
        "-c",
        "rollout.enabled=false",
        *extra,
        cwd=tmp_path,
    )


def test_a_failed_turn_exits_1(tmp_path: Path) -> None:
    result = failing_run(tmp_path, "--json")
    assert result.returncode == 1, result.stderr
    kinds = [e["msg"]["type"] for e in events(result.stdout)]
    assert kinds[-3:] == ["error", "turn_complete", "shutdown_complete"]


def test_pretty_marks_a_failed_turn_with_its_reason(tmp_path: Path) -> None:
    result = failing_run(tmp_path, "--pretty")
    assert result.returncode == 1
    assert "✓" not in result.stdout
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("✗ turn t1")]
    assert "failed" in line and "no such model here" in line and "[bad_request]" in line


def test_a_deliberately_interrupted_turn_exits_0(tmp_path: Path) -> None:
    model = write_json(tmp_path / "model.json", {"responses": [SLEEP_FOREVER]})
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "t1", "op": USER_TURN},
        {"wait_for": {"type": "item_started", "match": {"item.type": "tool_call"}}},
        {"op": {"type": "interrupt"}},
    )
    result = run(
        "run",
        str(script),
        "--model-script",
        str(model),
        "-c",
        "rollout.enabled=false",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert '"reason":"interrupted"' in result.stdout


# ------------------------------------------------------------------ the script is checked whole


def test_a_bad_script_exits_2_naming_every_line_and_runs_nothing(tmp_path: Path) -> None:
    script = tmp_path / "bad.jsonl"
    script.write_text(
        "# comment\n"
        '{"id": "ok", "op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}}\n'
        "{not json\n"
        '{"op": {"type": "user_trun", "items": [{"type": "text", "text": "hi"}]}}\n'
        '{"op": {"type": "user_turn", "items": [{"type": "text", "text": 5}]}}\n'
        '{"op": {"type": "user_turn", "items": [{"type": "text", "text": "x"}], "on_bussy": 1}}\n'
        '{"wait_for": {"type": "turn_compete"}}\n'
        '{"wait_for": {"type": "item_started", "match": {"item.typ": "tool_call"}}}\n'
        '{"wait": {"type": "turn_complete"}}\n',
        encoding="utf-8",
    )
    sessions = tmp_path / "sessions"
    result = run("run", str(script), "--rollout-dir", str(sessions), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert not sessions.exists()
    lines = result.stderr.splitlines()
    assert [line.split(":")[1] for line in lines] == [
        f" bad.jsonl line {n}" for n in (3, 4, 5, 6, 7, 8, 9)
    ]
    assert "invalid JSON" in lines[0]
    assert "unknown op type 'user_trun' (did you mean 'user_turn'?)" in lines[1]
    assert "expected str, got int" in lines[2]
    assert "unknown field 'on_bussy' (did you mean 'on_busy'?)" in lines[3]
    assert "unknown event type 'turn_compete' (did you mean 'turn_complete'?)" in lines[4]
    assert "unknown match key 'item.typ' (did you mean 'item.type'?)" in lines[5]
    assert "(did you mean 'wait_for'?)" in lines[6]


# ------------------------------------------------------------------ signals


def start_long_turn(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> tuple[subprocess.Popen[bytes], Lines, Path]:
    model = write_json(tmp_path / "model.json", {"responses": [SLEEP_FOREVER]})
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "nap", "op": USER_TURN},
        {"wait_for": {"type": "item_started", "match": {"item.type": "tool_call"}}},
        {"sleep_ms": 3_600_000},
    )
    sessions = tmp_path / "sessions"
    proc = spawn(
        processes,
        "run",
        str(script),
        "--model-script",
        str(model),
        "--rollout-dir",
        str(sessions),
        "--json",
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    out = Lines(proc.stdout)
    out.until('"type":"tool_call"')
    return proc, out, sessions


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_the_session_and_loses_nothing(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path, signum: int, status: int
) -> None:
    proc, out, sessions = start_long_turn(processes, tmp_path)
    proc.send_signal(signum)
    assert proc.stderr is not None
    err = Lines(proc.stderr).rest()
    tail = [json.loads(line)["msg"] for line in out.rest()[-2:]]
    assert proc.wait(timeout=TIMEOUT) == status
    assert err == ["relay: interrupted\n"]
    assert tail == [
        {
            "type": "turn_aborted",
            "turn_id": "nap",
            "reason": "shutdown",
            "duration_ms": tail[0]["duration_ms"],
        },
        {"type": "shutdown_complete"},
    ]
    recorded = rollout_lines(sessions)
    users = [
        line["payload"]["content"][0]["text"]
        for line in recorded
        if line["type"] == "response_item" and line["payload"].get("role") == "user"
    ]
    assert "Wait for an hour." in users
    assert recorded[-1]["payload"] == {"type": "shutdown_complete"}
    assert any(
        line["payload"]
        == {"type": "function_call_output", "call_id": "call_1", "output": "aborted"}
        for line in recorded
    )


def test_a_second_sigint_ends_the_process_without_a_traceback(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    proc, out, _ = start_long_turn(processes, tmp_path)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr is not None
    err = Lines(proc.stderr).rest()
    out.rest()
    assert proc.wait(timeout=TIMEOUT) == 130
    assert err == ["relay: interrupted\n"]


# ------------------------------------------------------------------ terminals


def test_run_without_a_script_on_a_terminal_prints_a_usage_hint(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    leader, follower = pty.openpty()
    try:
        proc = spawn(processes, "run", cwd=tmp_path, stdin=follower)
        assert proc.stderr is not None
        err = "".join(Lines(proc.stderr).rest())
        assert proc.wait(timeout=TIMEOUT) == 2
    finally:
        os.close(leader)
        os.close(follower)
    assert "no op script given" in err and "relay run SCRIPT.jsonl" in err


def terminal_output(processes: list[subprocess.Popen[bytes]], tmp_path: Path, *extra: str) -> str:
    """What ``relay run`` prints when its stdout is a terminal."""
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "t1", "op": {**USER_TURN, "items": [{"type": "text", "text": "hi"}]}},
    )
    leader, follower = pty.openpty()
    try:
        proc = spawn(
            processes,
            "run",
            str(script),
            "-c",
            "rollout.enabled=false",
            *extra,
            cwd=tmp_path,
            stdout=follower,
        )
        os.close(follower)
        chunks: queue.Queue[bytes] = queue.Queue()

        def pump() -> None:
            while True:
                try:
                    data = os.read(leader, 4096)
                except OSError:  # the terminal is gone once the process exited
                    data = b""
                chunks.put(data)
                if not data:
                    return

        threading.Thread(target=pump, daemon=True).start()
        output = b""
        while data := chunks.get(timeout=TIMEOUT):
            output += data
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        os.close(leader)
    return output.decode("utf-8").replace("\r\n", "\n")


def test_a_terminal_gets_the_transcript(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    out = terminal_output(processes, tmp_path)
    assert "▶ turn t1" in out and "■ session shut down" in out
    assert '"seq"' not in out


def test_json_is_forced_on_a_terminal_and_is_the_default_in_a_pipe(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    forced = [line for line in terminal_output(processes, tmp_path, "--json").splitlines() if line]
    assert json.loads(forced[-1])["msg"] == {"type": "shutdown_complete"}
    script = write_jsonl(tmp_path / "p.jsonl", {"op": USER_TURN})
    piped = run("run", str(script), "-c", "rollout.enabled=false", cwd=tmp_path)
    assert events(piped.stdout)[-1]["msg"] == {"type": "shutdown_complete"}
    pretty = run("run", str(script), "-c", "rollout.enabled=false", "--pretty", cwd=tmp_path)
    assert pretty.stdout.splitlines()[-1] == "■ session shut down"


def test_the_transcript_says_how_many_tool_output_lines_it_cut(tmp_path: Path) -> None:
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).write_text("x")
    model = write_json(
        tmp_path / "model.json",
        {
            "responses": [
                {"function_call": {"name": "list_dir", "arguments": {"path": "."}}},
                "done",
            ]
        },
    )
    script = write_jsonl(tmp_path / "s.jsonl", {"op": USER_TURN})
    result = run(
        "run",
        str(script),
        "--model-script",
        str(model),
        "-c",
        "rollout.enabled=false",
        "--pretty",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "↳" in line]
    total = sum(1 for _ in tmp_path.iterdir())
    assert line.endswith(f"(+{total - 1} more lines)"), line


def test_version_imports_no_sdk(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "relay", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.startswith("relay ")
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines()}
    assert "relay" in imported
    assert imported.isdisjoint({"openai", "httpx2"})


def test_two_quick_turns_steer_into_one_as_the_readme_says(tmp_path: Path) -> None:
    model = write_json(
        tmp_path / "model.json", {"responses": [{"text": "first answer", "delay_ms": 200}]}
    )
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "a", "op": {**USER_TURN, "items": [{"type": "text", "text": "first"}]}},
        {"id": "b", "op": {**USER_TURN, "items": [{"type": "text", "text": "second"}]}},
    )
    result = run(
        "run",
        str(script),
        "--model-script",
        str(model),
        "-c",
        "rollout.enabled=false",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    out = events(result.stdout)
    assert [e["msg"]["turn_id"] for e in out if e["msg"]["type"] == "turn_started"] == ["a"]
    assert [e["msg"]["message"] for e in out if e["msg"]["type"] == "user_message"] == [
        "first",
        "second",
    ]
    # Whether the first message was answered on its own depends on when "second" arrived;
    # either way the turn's last answer comes after both messages were recorded.
    kinds = [e["msg"]["type"] for e in out]
    last_answer = len(kinds) - 1 - kinds[::-1].index("agent_message")
    assert kinds.index("user_message", kinds.index("user_message") + 1) < last_answer
    (done,) = [e["msg"] for e in out if e["msg"]["type"] == "turn_complete"]
    assert done["turn_id"] == "a"
    assert done["last_agent_message"] == out[last_answer]["msg"]["message"]


def test_a_scripted_run_imports_no_rollout_reader_and_no_sdk(tmp_path: Path) -> None:
    script = write_jsonl(tmp_path / "s.jsonl", {"id": "a", "op": USER_TURN})
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "relay", "run", str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "RELAY_HOME": str(tmp_path / "home")},
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()}
    assert "relay._core._session" in imported
    assert imported.isdisjoint({"relay._rollout._reader", "openai"})


STUBBORN = """
import anyio
import attrs
import relay


@attrs.frozen
class Stubborn(relay.SessionTask):
    @property
    def kind(self) -> str:
        return "stubborn"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        ctx.emit(relay.WarningEvent("holding on"))
        with anyio.CancelScope(shield=True):  # ignores every cancellation
            await anyio.sleep(3600)
        return None


def stubborn(op: relay.CustomOp) -> Stubborn:
    return Stubborn()
"""


@pytest.mark.slow  # waits out the bound of five seconds
@pytest.mark.parametrize("signum", [None, signal.SIGTERM])
def test_a_task_that_ignores_cancellation_does_not_keep_relay_alive(
    processes: list[subprocess.Popen[bytes]], tmp_path: Path, signum: int | None
) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    script = write_jsonl(
        tmp_path / "s.jsonl",
        {"id": "s1", "op": {"type": "stubborn"}},
        {"wait_for": {"type": "warning"}},
        {"op": {"type": "shutdown"}} if signum is None else {"sleep_ms": 3_600_000},
    )
    proc = spawn(
        processes,
        "run",
        str(script),
        "--json",
        "--task",
        "stubborn=stubborn.py:stubborn",
        "-c",
        "rollout.enabled=false",
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = Lines(proc.stdout)
    out.until('"type":"warning"')
    if signum is not None:
        proc.send_signal(signum)
    status = proc.wait(timeout=TIMEOUT)
    err = "".join(Lines(proc.stderr).rest())
    tail = [json.loads(line)["msg"]["type"] for line in out.rest()[-2:]]
    assert tail == ["turn_aborted", "shutdown_complete"]
    if signum is None:
        assert status == 0
        assert "stubborn s1 did not stop when asked" in err
    else:
        assert status == 128 + signum
        assert "did not end within 5 s of the signal" in err
