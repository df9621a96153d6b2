"""``relay eval --live`` on two cases of the live corpus, a real model driving every turn and
writing every summary: the machinery of docs/eval.md's live figures, as a smoke test (the
figures themselves come from the pinned Qwen model, ``scripts/eval-real-summaries --live``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import API_KEY_VARIABLE, ServerFactory

pytestmark = pytest.mark.real_server

CORPUS = Path(__file__).parents[2] / "examples" / "eval-live"
#: A plain case and an injection case whose tool calls need no MCP server.
CASES = ("01-billing", "18-injection-command")
#: Bound on the evaluation: 6 short sessions on a small model.
EVAL_TIMEOUT_S = 900


def test_relay_eval_live_runs_the_live_corpus_against_a_real_model(
    real_server_factory: ServerFactory, tmp_path: Path
) -> None:
    server = real_server_factory(context_window=8192)
    corpus = tmp_path / "corpus"
    for name in CASES:
        shutil.copytree(CORPUS / "cases" / name, corpus / name)
    (corpus / "matrix.toml").write_text(
        '[[configuration]]\nname = "local"\ntools = { shell = true }\n'
    )
    env = {**os.environ}
    if server.api_key:
        env[API_KEY_VARIABLE] = server.api_key
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "relay", "eval", str(corpus), "--live", "--repeats", "1",
         "--parallel", "1", "--trust-corpus", "--json", str(report),
         *server.cli_overrides("chat"), "-c", "model_max_output_tokens=160"],
        capture_output=True, text=True, env=env, timeout=EVAL_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    figures = json.loads(report.read_text())["configurations"]
    assert list(figures) == ["ceiling", "floor", "local"]
    assert figures["ceiling"]["compactions"]["mean"] == 0
    assert figures["local"]["compactions"]["mean"] == len(CASES)
    assert figures["floor"]["retention"]["mean"] == 0
    # The first request after each compaction was measured: what the server read anew, and
    # what its prompt cache held (at least the instructions the requests begin with).
    assert figures["local"]["prefill_after_compaction"]["mean"] > 0
    assert figures["local"]["cached_after_compaction"]["mean"] > 0
    assert figures["local"]["injection"]["mean"] is not None
    progress = [line for line in result.stderr.splitlines() if line.startswith("relay eval [")]
    assert len(progress) == 3 * len(CASES)
    assert "task success" in result.stdout
