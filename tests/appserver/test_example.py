"""``examples/sdk/app_server.py``, a Python client of ``relay app-server``, runs offline and
does what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sdk" / "app_server.py"


def test_the_python_client_example_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # The reason of each request is relay's wording of the policy: left out here.
    lines = [re.sub(r"\? \(.+\) ->", "? ->", line) for line in result.stdout.splitlines()]
    assert lines[0].startswith("thread ")
    assert lines[1:] == [
        "approve `touch notes.txt`? -> accept",
        "command `touch notes.txt`: completed",
        "model: I created notes.txt.",
        "approve `rm notes.txt`? -> decline",
        "command `rm notes.txt`: declined",
        "model: You declined, so notes.txt stays.",
        "turns: completed, completed",
        "notes.txt exists: True",
        "relay app-server exited with 0",
    ]


def test_the_client_in_the_compatibility_page_runs(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "codex-compat.md").read_text()
    section = page[page.index("### A Python client") :]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    (tmp_path / "client.py").write_text(block)
    result = subprocess.run(
        [sys.executable, "client.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: Hello"  # relay's default model echoes
