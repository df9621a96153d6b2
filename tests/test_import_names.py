"""relay installs as ``relay``: a user's own ``runtime.py`` and ``tasks.py`` are left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 120

PROGRAM = """
import trio
import relay

async def main() -> None:
    async with relay.open_session(relay.Config()) as session:
        await session.submit(relay.UserTurn(items=[relay.Text("hello")]))
        async for event in session.events():
            match event.msg:
                case relay.TurnComplete(last_agent_message=text):
                    print("answer:", text)
                    await session.submit(relay.Shutdown())

trio.run(main)
"""


def user_project(tmp_path: Path) -> Path:
    """A folder with the user's own ``runtime.py`` and ``tasks.py`` (as many projects have)."""
    for name in ("runtime", "tasks"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the user\\'s {name}.py ran')\n")
    return tmp_path


def test_relay_run_in_a_folder_with_its_own_runtime_and_tasks_modules(tmp_path: Path) -> None:
    project = user_project(tmp_path)
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "relay"),
            "run",
            str(EXAMPLES / "hello.jsonl"),
            "--model-script",
            str(EXAMPLES / "hello.model.json"),
            "--json",
            "--rollout-dir",
            str(project / "sessions"),
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert '"type":"turn_complete"' in result.stdout
    assert "ran" not in result.stderr


def test_a_program_beside_its_own_runtime_and_tasks_modules_embeds_relay(tmp_path: Path) -> None:
    project = user_project(tmp_path)
    (project / "prog.py").write_text(PROGRAM)
    result = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("answer: ")


def test_python_dash_m_relay_is_the_relay_command(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "relay", "--version"],
        cwd=user_project(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("relay ")


@pytest.mark.parametrize("name", ["runtime", "tasks", "bench", "tests"])
def test_the_install_makes_relay_importable_and_nothing_else(tmp_path: Path, name: str) -> None:
    """Outside the checkout, the source roots and the checkout's other folders are not modules."""
    result = subprocess.run(
        [sys.executable, "-c", f"import relay.tasks; import {name}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 1
    assert f"No module named '{name}'" in result.stderr


def test_relay_tasks_is_one_module_under_one_name(tmp_path: Path) -> None:
    code = (
        "import relay, relay.tasks._regular as r, sys; "
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('runtime', 'tasks')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert result.stdout == "[]\n"
