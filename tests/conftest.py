from __future__ import annotations

import os

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
