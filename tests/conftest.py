from __future__ import annotations

import os
import resource
from typing import Any

import pytest

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
#: a test's own CPU time grows a little (caches and cores are shared), its wall time a lot.
CPU_MARGIN = 1.5
#: Where the wall time is judged too: on CI, whose machine runs nothing else.
JUDGE_WALL_TIME = bool(os.environ.get("CI"))

_too_slow: list[str] = []
_slow_wall: list[str] = []


def _cpu_seconds() -> float:
    """CPU time of this process (every thread) and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # Measured in the process that runs the test (a worker of pytest -n), and carried to the
    # controller with the report.
    start = _cpu_seconds()
    try:
        return (yield)
    finally:
        item.user_properties.append(("cpu_s", _cpu_seconds() - start))


def too_slow(wall_s: float, cpu_s: float | None, *, judge_wall: bool) -> bool:
    """Whether a fast-tier test took too long: its CPU time over the limit with the margin, or
    (``judge_wall``) its wall time over the limit."""
    # No test spends more CPU than its wall time on every core: more is the CPU of processes
    # an earlier test left, reaped during this one (the children's count of rusage).
    possible = wall_s * (os.cpu_count() or 1) + 0.5
    if cpu_s is not None and possible >= cpu_s > FAST_TEST_LIMIT_S * CPU_MARGIN:
        return True
    return judge_wall and wall_s > FAST_TEST_LIMIT_S


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # With pytest-xdist this runs in the controller, for every worker's reports.
    exempt = "slow" in report.keywords or "real_server" in report.keywords
    if report.when != "call" or not report.passed or exempt:
        return
    cpu = dict(report.user_properties).get("cpu_s")
    cpu_s = float(cpu) if isinstance(cpu, int | float) else None
    line = f"{report.nodeid} ({report.duration:.1f} s, CPU {cpu_s or 0:.1f} s)"
    if too_slow(report.duration, cpu_s, judge_wall=JUDGE_WALL_TIME):
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
            f", or ran longer than {FAST_TEST_LIMIT_S:g} s (CI is set)" if JUDGE_WALL_TIME else ""
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
            "(a busy machine, or a wait on the clock); with CI set they fail the run:"
        )
        for line in _slow_wall:
            terminalreporter.write_line(f"  {line}")
