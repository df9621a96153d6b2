"""The README's two commands exist, and CI runs the test one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    run_command, test_command = blocks[0], blocks[1]
    assert "relay run examples/hello.jsonl" in run_command
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()
