"""``relay`` as a real process when its files and streams fail: a rollout past the file size
limit (EFBIG), on a full disk (ENOSPC), on a file system without locks (ENOLCK); an empty
rollout that ``resume --last`` must pass over; a standard output that is closed or full.

Each case once ended in a traceback, or failed every run; now there is one line on stderr,
the session ends in order (``shutdown_complete`` last) and its rollout stays resumable.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from relay._rollout._reader import read_rollout
from relay._rollout._resume import reconstruct

#: Each test starts relay once to three times as a process: a second or two, more on a busy
#: machine.
pytestmark = pytest.mark.slow
GUARD_S = 60


def turn(turn_id: str, text: str) -> str:
    op = {"type": "user_turn", "items": [{"type": "text", "text": text}]}
    wait = {"wait_for": {"type": "turn_complete", "match": {"turn_id": turn_id}}}
    return json.dumps({"id": turn_id, "op": op}) + "\n" + json.dumps(wait) + "\n"


def write_session(folder: Path, *, turns: int = 3, size: int = 3000, name: str = "ops") -> None:
    """An op script of ``turns`` turns and a model script whose every answer is ``size``
    characters long."""
    (folder / f"{name}.jsonl").write_text("".join(turn(f"t{n}", f"turn {n}") for n in range(turns)))
    answers = [{"text": f"Answer {n}: " + "x" * size} for n in range(turns)]
    (folder / f"{name}.model.json").write_text(json.dumps({"responses": answers}))


def relay(
    folder: Path,
    *args: str,
    preexec: Callable[[], None] | None = None,
    stdout: Any = subprocess.PIPE,
    code: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``relay ARGS`` in ``folder`` (or ``python -c CODE ARGS``, whose code runs relay)."""
    command = [sys.executable, "-m", "relay"] if code is None else [sys.executable, "-c", code]
    return subprocess.run(
        [*command, *args],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=GUARD_S,
        preexec_fn=preexec,
        check=False,
    )


def run_args(name: str = "ops", rollout_dir: str = "sessions") -> list[str]:
    return ["run", f"{name}.jsonl", "--model-script", f"{name}.model.json", "--json",
            "--rollout-dir", rollout_dir]  # fmt: skip


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line)["msg"] for line in stdout.splitlines()]


def rollout_events(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["payload"] for line in lines if line["type"] == "event_msg"]


def assert_resumable(path: Path) -> None:
    """The rollout reads without a note and rebuilds a session; ``relay resume`` runs it."""
    rollout = read_rollout(path, for_resume=True)
    assert rollout.notes == ()
    reconstruct(rollout)
    folder = path.parents[4]
    write_session(folder, turns=1, size=10, name="more")
    resumed = relay(folder, "resume", str(path), "more.jsonl", "--model-script",
                    "more.model.json", "--json")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert events_of(resumed.stdout)[-1]["type"] == "shutdown_complete"


def assert_failed_in_order(
    folder: Path, result: subprocess.CompletedProcess[str], reason: str
) -> Path:
    """Exit 1, one line on stderr, ``error{rollout}`` then ``shutdown_complete`` last."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("relay: the rollout file ") and f"({reason})" in line, line
    events = events_of(result.stdout)
    errors = [e for e in events if e["type"] == "error"]
    assert [e["code"] for e in errors] == ["rollout"]
    assert events[-1]["type"] == "shutdown_complete"
    (path,) = (folder / line.split()[4]).parent.glob("*.jsonl")
    data = path.read_bytes()
    assert data.endswith(b"\n")  # whole lines, and nothing after the last
    return path


# ------------------------------------------------------------------------------ file size


def test_relay_run_past_its_file_size_limit_reports_it_and_shuts_down(tmp_path: Path) -> None:
    write_session(tmp_path, turns=5, size=1000)
    limit = 9000  # the first turn fits (about 6 KB), the second does not

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = relay(tmp_path, *run_args(), preexec=small_files)
    path = assert_failed_in_order(tmp_path, result, "File too large")
    assert path.stat().st_size <= limit
    kinds = [e["type"] for e in rollout_events(path)]
    assert kinds.count("turn_complete") == 1 and "shutdown_complete" not in kinds
    assert_resumable(path)


# ------------------------------------------------------------------------------ full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (it needs the privilege to mount; without it the writer's own test,
    ``tests/rollout/test_rollout_disk.py``, covers a full disk)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_relay_run_on_a_full_disk_reports_it_and_shuts_down(
    tmp_path: Path, small_disk: Path
) -> None:
    write_session(tmp_path, turns=5, size=20_000)
    result = relay(tmp_path, *run_args(rollout_dir=str(small_disk / "sessions")))
    path = assert_failed_in_order(tmp_path, result, "No space left on device")
    kinds = [e["type"] for e in rollout_events(path)]
    assert "turn_complete" in kinds and "shutdown_complete" not in kinds
    # Resume where there is room again.
    moved = tmp_path / "sessions" / "2026" / "01" / "01" / path.name
    moved.parent.mkdir(parents=True)
    moved.write_bytes(path.read_bytes())
    assert_resumable(moved)


# ------------------------------------------------------------------------------ no locks

NO_LOCKS = """\
import errno, fcntl, os, sys
def flock(fd, operation):
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
fcntl.flock = flock
sys.argv[0] = "relay"
from relay._cli._main import console_main
console_main()
"""


def test_relay_run_on_a_file_system_without_locks_runs_with_a_warning(tmp_path: Path) -> None:
    write_session(tmp_path, turns=2, size=10)
    result = relay(tmp_path, *run_args(), code=NO_LOCKS)
    assert result.returncode == 0, result.stderr
    events = events_of(result.stdout)
    assert events[1]["type"] == "warning" and "cannot be locked" in events[1]["message"]
    assert [e["type"] for e in events].count("turn_complete") == 2
    (path,) = (tmp_path / "sessions").rglob("*.jsonl")
    assert rollout_events(path)[-1]["type"] == "shutdown_complete"
    assert_resumable(path)


def test_resume_last_passes_over_an_empty_rollout(tmp_path: Path) -> None:
    write_session(tmp_path, turns=1, size=10)
    first = relay(tmp_path, *run_args())
    assert first.returncode == 0, first.stderr
    (path,) = (tmp_path / "sessions").rglob("*.jsonl")
    empty = path.with_name("rollout-2099-01-01T00-00-00-empty.jsonl")
    empty.touch()
    os.utime(empty, (path.stat().st_mtime + 60,) * 2)  # the newest
    write_session(tmp_path, turns=1, size=10, name="more")
    resumed = relay(tmp_path, "resume", "--last", "more.jsonl", "--model-script",
                    "more.model.json", "--json", "--rollout-dir", "sessions")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert tmp_path / events_of(resumed.stdout)[0]["rollout_path"] == path


# ------------------------------------------------------------------------------ standard output


def close_stdout() -> None:
    os.close(1)


@pytest.mark.parametrize("output", ["--json", "--pretty"])
def test_relay_run_into_a_full_stdout_says_so_in_one_line(tmp_path: Path, output: str) -> None:
    write_session(tmp_path, turns=2, size=10)
    args = [a for a in run_args() if a != "--json"]
    with open("/dev/full", "w") as full:
        result = relay(tmp_path, *args, output, stdout=full)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        "relay: cannot write to standard output: No space left on device; "
        "the session was shut down\n"
    )
    (path,) = (tmp_path / "sessions").rglob("*.jsonl")
    events = rollout_events(path)
    assert events[-1]["type"] == "shutdown_complete"
    # The session ends at the first event that cannot be written: the script goes no further.
    assert [e["type"] for e in events].count("turn_complete") <= 1
    assert_resumable(path)


def test_relay_run_with_stdout_closed_says_so_in_one_line(tmp_path: Path) -> None:
    write_session(tmp_path, turns=2, size=10)
    result = relay(tmp_path, *run_args(), preexec=close_stdout, stdout=None)
    assert result.returncode == 1, result.stderr
    assert result.stderr == (
        "relay: cannot write to standard output: Bad file descriptor; the session was shut down\n"
    )
    (path,) = (tmp_path / "sessions").rglob("*.jsonl")
    # No file took descriptor 1 in its place: the rollout holds rollout lines only.
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "session_meta" and all("payload" in line for line in lines)
    assert rollout_events(path)[-1]["type"] == "shutdown_complete"
    assert_resumable(path)


def test_relay_exec_and_show_into_a_full_stdout_say_so_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "model.json").write_text(json.dumps({"responses": [{"text": "The answer."}]}))
    with open("/dev/full", "w") as full:
        answered = relay(tmp_path, "exec", "hi", "--model-script", "model.json",
                         "--rollout-dir", "sessions", stdout=full)  # fmt: skip
        assert answered.returncode == 1, answered.stderr
        assert answered.stderr == (
            "relay: cannot write to standard output: No space left on device\n"
        )
        (path,) = (tmp_path / "sessions").rglob("*.jsonl")
        shown = relay(tmp_path, "show", str(path), stdout=full)
        page = relay(tmp_path, "show", "--html", str(path), stdout=full)
    assert shown.returncode == 1, shown.stderr
    assert shown.stderr == "relay: cannot write to standard output: No space left on device\n"
    assert page.returncode == 1, page.stderr
    assert page.stderr == "relay: cannot write to standard output: No space left on device\n"
