"""What a process pays for at start-up: the protocol's codec is built as it is used, and each
command imports the shells it needs and no other command's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 120

#: The shells of each command: what it may import of ``relay._*`` besides the rooms below
#: every shell.
SHELLS = {"_cli", "_drive", "_eval", "_cluster", "_testing"}


def imported_after(code: str, cwd: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    return list(json.loads(result.stdout.splitlines()[-1]))


def test_importing_relay_builds_no_encoder_and_encoding_builds_only_what_it_needs(
    tmp_path: Path,
) -> None:
    code = """
import json, cattrs.gen
made = []
real = cattrs.gen.make_dict_unstructure_fn
def spy(cls, *args, **kwargs):
    made.append(cls.__name__)
    return real(cls, *args, **kwargs)
cattrs.gen.make_dict_unstructure_fn = spy
import relay
at_import = list(made)
relay.lowlevel.to_json(relay.TurnStarted("t1", None, 0.0))
print(json.dumps([at_import, made]))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    at_import, made = json.loads(result.stdout)
    assert at_import == []
    assert made == ["TurnStarted"]


def shells_of(modules: list[str]) -> set[str]:
    return {
        name.split(".")[1]
        for name in modules
        if name.startswith("relay._") and name.split(".")[1] in SHELLS
    }


COMMANDS = {
    "run": (
        ["run", str(EXAMPLES / "hello.jsonl"), "--model-script", "hello.model.json"],
        {"_cli", "_drive"},
    ),
    "version": (["--version"], {"_cli"}),
    "eval --help": (["eval", "--help"], {"_cli"}),
    "cluster --help": (["cluster", "--help"], {"_cli"}),
    "mock-server --help": (["mock-server", "--help"], {"_cli"}),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_imports_no_other_commands_shell(tmp_path: Path, command: str) -> None:
    argv, allowed = COMMANDS[command]
    (tmp_path / "hello.model.json").write_text(
        (EXAMPLES / "hello.model.json").read_text(encoding="utf-8")
    )
    if argv[0] == "run":
        argv = [*argv, "--json", "--rollout-dir", "sessions"]
    code = f"""
import json, sys
sys.argv = ["relay", *{argv!r}]
from relay._cli._main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""
    modules = imported_after(code, tmp_path)
    assert shells_of(modules) == allowed
    if command == "run":
        assert "hypercorn" not in {m.split(".")[0] for m in modules}
        assert "openai" not in {m.split(".")[0] for m in modules}


def test_showing_a_rollout_imports_no_driver_or_other_shell(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "relay",
            "run",
            str(EXAMPLES / "hello.jsonl"),
            "--model-script",
            str(EXAMPLES / "hello.model.json"),
            "--json",
            "--rollout-dir",
            "sessions",
        ],
        cwd=tmp_path,
        capture_output=True,
        timeout=TIMEOUT,
        check=True,
    )
    (rollout,) = (tmp_path / "sessions").rglob("rollout-*.jsonl")
    code = f"""
import json, sys
sys.argv = ["relay", "show", {str(rollout)!r}]
from relay._cli._main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""
    assert shells_of(imported_after(code, tmp_path)) == {"_cli"}
