from __future__ import annotations

import os
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

#: The longest a test of the fast tier (not marked ``slow``) may run, in seconds of wall time.
#: A test that waits on the clock belongs under ``autojump_clock``, or in the slow tier.
FAST_TEST_LIMIT_S = float(os.environ.get("RELAY_FAST_TEST_LIMIT_S", "2"))

_too_slow: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # With pytest-xdist this runs in the controller, for every worker's reports.
    exempt = "slow" in report.keywords or "real_server" in report.keywords
    over = report.duration > FAST_TEST_LIMIT_S
    if report.when == "call" and report.passed and over and not exempt:
        _too_slow.append(f"{report.nodeid} ({report.duration:.1f} s)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _too_slow and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _too_slow:
        terminalreporter.section("fast-tier tests over the limit", sep="=", red=True)
        terminalreporter.write_line(
            f"These tests are not marked slow but ran longer than {FAST_TEST_LIMIT_S:g} s:"
        )
        for line in _too_slow:
            terminalreporter.write_line(f"  {line}")
