from __future__ import annotations

import compileall
import os
import resource
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.errors import HypothesisSideeffectWarning

from tests import hypothesis_profiles  # noqa: F401  (registers the profiles)


@pytest.fixture(autouse=True)
def _relay_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # No test may read or write the developer's ~/.relay.
    monkeypatch.setenv("RELAY_HOME", str(tmp_path_factory.mktemp("relay-home")))
    monkeypatch.setenv("SHELL", "/bin/bash")
    os.environ.pop("OPENAI_API_KEY", None)


@pytest.fixture(autouse=True)
def _forget_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    # relay keeps a key it took out of the environment for the rest of the process; each test
    # starts from its own environment.
    from relay._base import _secret

    monkeypatch.setattr(_secret, "_keys", {})


# ----------------------------------------------------------------------------- byte code

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    # relay's sources, compiled once before the run (in the controller: the workers find them
    # done), as pip compiles an installed package: an editable install is not compiled, and
    # with PYTHONDONTWRITEBYTECODE set every `relay` process a test starts would compile the
    # whole package again, about 1.5 s of CPU each.
    if not hasattr(config, "workerinput"):
        for source in ("runtime", "tasks"):
            compileall.compile_dir(ROOT / source, quiet=1, workers=1)


def pytest_sessionstart(session: pytest.Session) -> None:
    # Hypothesis maps the characters a text may hold once per checkout (about 3 s of CPU, kept
    # under .hypothesis/): done here, in the controller, on purpose (Hypothesis warns of slow
    # work at start-up), and not charged to whichever test first draws a text.
    if not hasattr(session.config, "workerinput"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HypothesisSideeffectWarning)
            st.text().validate()


# ----------------------------------------------------------------------------- parallel runs

#: Tests that share an expensive process run on one worker of ``pytest -n``: one local Ray
#: instance, one set of llama-servers.
_GROUPS = {"cluster": "ray", "real_server": "llama"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.parent.name
        if folder in _GROUPS:
            item.add_marker(pytest.mark.xdist_group(_GROUPS[folder]))


# ----------------------------------------------------------------------------- the fast tier

#: The longest a test of the fast tier (not marked ``slow``) may run, in seconds. A test that
#: waits on the clock belongs under ``autojump_clock``, or in the slow tier.
FAST_TEST_LIMIT_S = float(os.environ.get("RELAY_FAST_TEST_LIMIT_S", "2"))
#: How far over the limit a test's CPU time may go before it fails the run: on a loaded machine
#: a test's own CPU time grows too (caches and cores are shared: the same three `relay`
#: processes took 2.0 s of CPU on a quiet day and 2.9 s on a busy one), its wall time a lot.
CPU_MARGIN = 2.0
#: Where the time a test stood idle is judged too: on CI.
JUDGE_WALL_TIME = bool(os.environ.get("CI"))
#: How many times the limit a fast-tier test may stand idle there (its wall time less its CPU
#: time and its threads' wait for a CPU). Not once the limit: this project's machine is
#: shared, and a test that waits for a command or a server of its own waits for that one's
#: turn on a CPU too, uncounted (CI has seen idle times up to 1.5 s on a busy day, and 4.2 s
#: with two more busy processes on the two cores). A test that waits on the clock for seconds
#: is still caught.
IDLE_FACTOR = 5

_too_slow: list[str] = []
_slow_wall: list[str] = []


def _cpu_seconds() -> float:
    """CPU time of this process (every thread) and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _queued_ns() -> dict[str, int]:
    """For each thread of this process, how long it waited for a CPU while it could run, in
    nanoseconds (Linux's schedstat; nothing elsewhere): a loaded machine's share of the wall
    time, not the test's."""
    queued: dict[str, int] = {}
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return queued
    for thread in threads:
        try:
            with open(f"/proc/self/task/{thread}/schedstat", encoding="ascii") as stat:
                queued[thread] = int(stat.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return queued


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # Measured in the process that runs the test (a worker of pytest -n), and carried to the
    # controller with the report.
    start, queued = _cpu_seconds(), _queued_ns()
    try:
        return (yield)
    finally:
        waited = sum(ns - queued.get(thread, 0) for thread, ns in _queued_ns().items())
        item.user_properties.append(("cpu_s", _cpu_seconds() - start))
        item.user_properties.append(("queued_s", waited / 1e9))


def too_slow(
    wall_s: float, cpu_s: float | None, queued_s: float = 0.0, *, judge_wall: bool
) -> bool:
    """Whether a fast-tier test took too long: its CPU time over the limit with the margin, or
    (``judge_wall``) the time it stood idle over ``IDLE_FACTOR`` times the limit: its wall
    time less its CPU time and the time its threads waited for a CPU (``queued_s``), which is
    how long it waited on the clock or on something outside it."""
    # No test spends more CPU than its wall time on every core: more is the CPU of processes
    # an earlier test left, reaped during this one (the children's count of rusage).
    possible = wall_s * (os.cpu_count() or 1) + 0.5
    if cpu_s is not None and possible >= cpu_s > FAST_TEST_LIMIT_S * CPU_MARGIN:
        return True
    idle = wall_s - min(cpu_s or 0.0, wall_s) - queued_s
    return judge_wall and idle > FAST_TEST_LIMIT_S * IDLE_FACTOR


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # With pytest-xdist this runs in the controller, for every worker's reports.
    exempt = "slow" in report.keywords or "real_server" in report.keywords
    if report.when != "call" or not report.passed or exempt:
        return
    measured = dict(report.user_properties)
    cpu, queued = measured.get("cpu_s"), measured.get("queued_s")
    cpu_s = float(cpu) if isinstance(cpu, int | float) else None
    queued_s = float(queued) if isinstance(queued, int | float) else 0.0
    line = (
        f"{report.nodeid} ({report.duration:.1f} s, CPU {cpu_s or 0:.1f} s, "
        f"waiting for a CPU {queued_s:.1f} s)"
    )
    if too_slow(report.duration, cpu_s, queued_s, judge_wall=JUDGE_WALL_TIME):
        _too_slow.append(line)
    elif report.duration > FAST_TEST_LIMIT_S:
        _slow_wall.append(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _too_slow and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _too_slow:
        terminalreporter.section("fast-tier tests over the limit", sep="=", red=True)
        wall = (
            f", or stood idle (neither computing nor waiting for a CPU) longer than "
            f"{FAST_TEST_LIMIT_S * IDLE_FACTOR:g} s (CI is set)"
            if JUDGE_WALL_TIME
            else ""
        )
        terminalreporter.write_line(
            "These tests are not marked slow but took more than "
            f"{FAST_TEST_LIMIT_S * CPU_MARGIN:g} s of CPU time{wall}:"
        )
        for line in _too_slow:
            terminalreporter.write_line(f"  {line}")
    if _slow_wall:
        terminalreporter.section("fast-tier tests slow by the clock", sep="=", yellow=True)
        terminalreporter.write_line(
            f"These tests ran longer than {FAST_TEST_LIMIT_S:g} s but within their CPU time "
            "(a busy machine, or a wait on the clock); the run still passes:"
        )
        for line in _slow_wall:
            terminalreporter.write_line(f"  {line}")
