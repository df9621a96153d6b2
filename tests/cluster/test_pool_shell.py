"""The cluster's pure parts: placement, what a host's loss costs, the missing extra.

The pool itself runs on Ray in ``tests/cluster``.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
import trio

import relay
from relay._cluster._cli import _progress, _Tally, summary_table
from relay._cluster._pool import Ledger, Loss, least_loaded, when_unlocked
from relay._core._writer import RolloutWriter

ROOT = Path(__file__).resolve().parents[2]


def started(turn_id: str, seq: int) -> relay.Event:
    return relay.Event(turn_id, seq, relay.TurnStarted(turn_id, None, 100.0))


def completed(turn_id: str, seq: int) -> relay.Event:
    return relay.Event(turn_id, seq, relay.TurnComplete(turn_id, "ok", 5))


def test_least_loaded_takes_the_emptiest_host_and_the_first_on_a_tie() -> None:
    assert least_loaded({}) is None
    assert least_loaded({"a": 2, "b": 1, "c": 1}) == "b"
    assert least_loaded({"a": 0, "b": 0}) == "a"


def test_a_loss_names_the_running_turn_and_the_submissions_no_event_showed() -> None:
    ledger = Ledger()
    for sub_id in ("t1", "t2", "override", "t3"):
        ledger.accept(sub_id)
    ledger.saw(started("t1", 1))
    ledger.saw(completed("t1", 2))
    ledger.saw(started("t2", 3))
    assert ledger.lose() == Loss(aborted_turn="t2", started_at=100.0, unhandled=("override", "t3"))
    # The new host starts from a clean slate: the loss is reported once.
    assert ledger.lose() == Loss(aborted_turn=None, started_at=None, unhandled=())


def test_an_ended_turn_is_not_lost() -> None:
    ledger = Ledger()
    ledger.accept("t1")
    ledger.saw(started("t1", 1))
    ledger.saw(relay.Event("t1", 2, relay.TurnAborted("t1", relay.AbortReason.REPLACED, 3)))
    ledger.saw(relay.Event("bad", 3, relay.ErrorEvent("no", relay.ErrorCode.INVALID_OP)))
    ledger.accept("bad")
    assert ledger.lose() == Loss(aborted_turn=None, started_at=None, unhandled=())


def test_the_summary_table_lines_up() -> None:
    table = summary_table(_Tally(total=200, finished=200, turns=400, failures=1), 12.34)
    assert table.splitlines() == [
        "sessions  turns  failures  failovers    time",
        "     200    400         1          0  12.3 s",
    ]


def test_the_progress_bar_redraws_one_line_with_the_failures() -> None:
    out = io.StringIO()
    _progress(_Tally(total=4, finished=1), out)
    _progress(_Tally(total=4, finished=4, failures=1), out)
    assert out.getvalue() == (
        "\r[#######.......................] 1/4 sessions"
        "\r[##############################] 4/4 sessions · 1 failed"
    )


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_importing_the_runtime_and_its_cluster_module_does_not_import_ray() -> None:
    result = run_python(
        "import sys, runtime, relay.cluster, relay._cli._main; "
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    assert result.returncode == 0, result.stderr


def test_without_ray_the_command_fails_with_one_line_naming_the_extra(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text("", encoding="utf-8")
    result = run_python(
        "import sys; sys.modules['ray'] = None\n"
        "from relay._cli._main import main\n"
        f"sys.exit(main(['cluster', 'run', {str(script)!r}]))"
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "relay: the cluster needs Ray, which is not installed: pip install 'relay-runtime[ray]'"
    ]


async def test_a_move_waits_for_the_lost_host_to_let_go_of_the_rollout(tmp_path: Path) -> None:
    # The killed host's process holds the rollout's lock a moment after ray.kill returns: the
    # resume on the new host goes ahead once the lock is gone, not before.
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with relay.open_session(config) as first:
        assert first.rollout is not None
        path, session_id = first.rollout.path, first.id
    held = RolloutWriter.append_to(path)  # the old host, still there
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 2:
            held.close()  # its process is gone

    async def attempt() -> str:
        async with relay.resume_session(path, config) as session:
            return session.id

    assert await when_unlocked(attempt, wait_s=60, sleep=pause) == session_id
    assert len(pauses) == 2


async def test_a_rollout_still_locked_after_the_wait_is_an_error(tmp_path: Path) -> None:
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    async with relay.open_session(config) as first:
        assert first.rollout is not None
        path = first.rollout.path
    held = RolloutWriter.append_to(path)
    try:

        async def attempt() -> None:
            async with relay.resume_session(path, config):
                pass  # pragma: no cover

        async def pause(seconds: float) -> None:
            await trio.lowlevel.checkpoint()

        with pytest.raises(relay.RolloutLockedError):
            await when_unlocked(attempt, wait_s=0, sleep=pause)
    finally:
        held.close()
