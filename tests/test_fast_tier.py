"""The fast-tier guard of ``tests/conftest.py``: a test that is not marked slow fails the run when
it takes more than its share of CPU time, wherever it runs, and where ``CI`` is set when it
stands idle (neither computing nor waiting for a CPU) for several times the limit, so that a
busy machine does not fail a run whose every test passed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import CPU_MARGIN, FAST_TEST_LIMIT_S, IDLE_FACTOR, _queued_ns, too_slow

ROOT = Path(__file__).resolve().parent.parent


def test_cpu_time_fails_everywhere_and_idle_time_only_where_judged() -> None:
    limit = FAST_TEST_LIMIT_S
    idle = limit * IDLE_FACTOR
    # A wait on the clock: idle past its bound.
    assert not too_slow(idle * 1.2, limit / 2, judge_wall=False)
    assert too_slow(idle * 1.2, limit / 2, judge_wall=True)
    # A busy machine: the clock ran two and three times long, the test itself did not.
    assert not too_slow(limit * 2, limit, judge_wall=True)
    assert not too_slow(limit * 3, limit * CPU_MARGIN * 0.9, judge_wall=True)
    # Time spent waiting for a CPU is the machine's, not the test's.
    assert not too_slow(idle * 1.2, limit / 2, idle * 0.5, judge_wall=True)
    # Within the margin of CPU time, on a loaded machine.
    assert not too_slow(limit * 2, limit * CPU_MARGIN * 0.9, judge_wall=False)
    # Work of its own over the limit and the margin.
    assert too_slow(limit * 2, limit * CPU_MARGIN * 1.1, judge_wall=False)
    # A report without a measure is judged by its wall time where that is judged.
    assert not too_slow(idle * 1.2, None, judge_wall=False)
    assert too_slow(idle * 1.2, None, judge_wall=True)
    # CPU no test could have spent in its wall time is an earlier test's, reaped now.
    assert not too_slow(0.01, limit * CPU_MARGIN * 2, judge_wall=True)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux's schedstat")
def test_the_wait_for_a_cpu_is_read_per_thread_and_never_goes_back() -> None:
    before = _queued_ns()
    assert str(os.getpid()) in before  # the main thread's
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    after = _queued_ns()
    assert all(after[thread] >= ns for thread, ns in before.items() if thread in after)


INNER_TESTS = """
import time


def test_waits_on_the_clock():
    time.sleep(1.5)


def test_computes():
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass
"""


def run_inner(tmp_path: Path, *, ci: bool, only: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PYTHONPATH=str(ROOT), RELAY_FAST_TEST_LIMIT_S="0.2")  # idle: 1 s on CI
    if ci:
        env["CI"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", only],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_run_slow_by_the_clock_passes_outside_ci_and_fails_on_ci(tmp_path: Path) -> None:
    waited = run_inner(tmp_path, ci=False, only="waits")
    assert waited.returncode == 0, waited.stdout
    assert "fast-tier tests slow by the clock" in waited.stdout
    assert "fast-tier tests over the limit" not in waited.stdout
    on_ci = run_inner(tmp_path, ci=True, only="waits")
    assert on_ci.returncode == 1, on_ci.stdout
    assert "test_inner.py::test_waits_on_the_clock" in on_ci.stdout.split("over the limit")[1]
    computed = run_inner(tmp_path, ci=False, only="computes")
    assert computed.returncode == 1, computed.stdout
    assert "test_inner.py::test_computes" in computed.stdout.split("over the limit")[1]
