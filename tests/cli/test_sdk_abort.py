"""What a caller of Codex's TypeScript SDK sees when a run on relay cannot go as asked: an
aborted call (its ``AbortSignal``), and a base URL with no model. Each scenario runs on relay,
and on the Codex 0.169 binary too when ``RELAY_CODEX_BIN`` names it (as ``test_sdk.py``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_sdk import MODULE, RELAY, TIMEOUT, engine, node, serve

pytestmark = pytest.mark.slow  # node, the engine and a model server per test

DRIVER = Path(__file__).with_name("sdk_abort_driver.mjs")

__all__ = ["engine", "node"]  # the fixtures, used by name


def drive(node: str, engine: str, scenario: str, base_url: str, log: Path, tmp_path: Path) -> Any:
    """Run one scenario of the driver; what the SDK's call rejected with."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (tmp_path / "codex-home").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "RELAY_SDK_MODULE": MODULE.as_uri(),
        "RELAY_SDK_ENGINE": str(RELAY) if engine == "relay" else os.environ["RELAY_CODEX_BIN"],
        "RELAY_SDK_BASE_URL": base_url,
        "RELAY_SDK_CWD": str(work),
        "RELAY_SDK_LOG": str(log),
        "RELAY_HOME": str(tmp_path / "relay-home"),
        "CODEX_HOME": str(tmp_path / "codex-home"),
    }
    result = subprocess.run(
        [node, str(DRIVER), scenario],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["rejected"]


def test_an_aborted_run_rejects_with_the_abort_error_as_on_codex(
    node: str, engine: str, tmp_path: Path
) -> None:
    # The server holds the turn's request far longer than the test runs: the abort ends it.
    held = {"text": "Too late.", "delay_ms": 600_000}
    with serve(tmp_path, [held]) as (url, log):
        rejected = drive(node, engine, "abort", url, log, tmp_path)
    # Node's own AbortError, which the SDK passes on when the engine writes no end of the
    # turn after the signal; not an Error carrying a message of the engine's.
    assert rejected == {
        "name": "AbortError",
        "message": "The operation was aborted",
        "code": "ABORT_ERR",
    }


def test_a_base_url_with_no_model_rejects_saying_how_to_set_one(node: str, tmp_path: Path) -> None:
    with serve(tmp_path, [{"text": "Hello."}]) as (url, log):
        rejected = drive(node, "relay", "no_model", url, log, tmp_path)
        assert not log.exists() or log.read_text() == ""  # no request was sent
    assert rejected["name"] == "Error"
    assert rejected["message"].startswith("Codex Exec exited with code 2: ")
    assert f"relay: no model is set for provider 'openai' ({url})" in rejected["message"]
    assert "-m/--model MODEL" in rejected["message"]
