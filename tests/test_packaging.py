"""The wheel carries the templates and an installed copy loads them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # processes of its own
def test_wheel_ships_templates_and_loads_them_when_installed(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next((tmp_path / "dist").glob("relay_runtime-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    for name in [
        "base_instructions.md",
        "turn_aborted.md",
        "compact/prompt.md",
        "compact/summary_prefix.md",
    ]:
        assert f"relay/templates/{name}" in names
    assert "relay/py.typed" in names
    # Import the unpacked wheel, away from the checkout, and load a template from it.
    code = (
        "import relay._base._templates as t, pathlib; "
        "print(pathlib.Path(t.__file__).parent); print(t.template('compact/prompt.md'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path / "site")},
        check=True,
        timeout=60,
    )
    location, text = result.stdout.split("\n", 1)
    assert Path(location) == tmp_path / "site" / "relay" / "_base"
    assert text.strip() == (ROOT / "runtime/relay/templates/compact/prompt.md").read_text().strip()
