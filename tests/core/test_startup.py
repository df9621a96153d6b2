"""What a process pays for at start-up: ``import relay`` loads nothing but the version, the
protocol's codec is built as it is used, and each command imports what it uses: the shells it
needs and no other command's, and none of the modules and packages it does not use."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 120

#: The shells of each command: what it may import of ``relay._*`` besides the rooms below
#: every shell.
SHELLS = {"_cli", "_appserver", "_drive", "_eval", "_cluster", "_testing"}


def imported_after(code: str, cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
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
    "app-server --help": (["app-server", "--help"], {"_cli"}),
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


# ----------------------------------------------------------------------------- what is not used

#: relay's core and every dependency: what ``--version`` and every ``--help`` leave out.
ANY_WORK = (
    "relay._base",
    "relay._core",
    "relay._open",
    "relay._drive",
    "relay._rollout",
    "relay._models",
    "relay._wire",
    "relay._mcp",
    "relay._otel",
    "relay._eval",
    "relay._cluster",
    "relay._testing",
    "relay.lowlevel",
    "relay.tasks",
    "attr",
    "attrs",
    "cattrs",
    "anyio",
    "asyncio",
    "trio",
    "openai",
    "pydantic",
    "httpx2",
    "hypercorn",
    "ray",
    "opentelemetry",
    "mcp",
    "tomllib",
)
#: The HTTP wire: only a provider that speaks HTTP needs it.
HTTP = ("relay._wire", "openai", "pydantic", "httpx2", "httpcore2")
#: What a session on the scripted model, with no MCP server, does not use.
NOT_IN_A_SESSION = (
    *HTTP,
    "relay._eval",
    "relay._cluster",
    "relay._testing",
    "relay._mcp",
    "mcp",
    "hypercorn",
    "ray",
    "matplotlib",
    "tiktoken",
    "jinja2",
    "trio",
)
#: What a session's command does not use besides: the page and chart package (``relay show
#: --html``, reports), and the reader of rollouts (a new session only writes one).
NOT_IN_A_TURN = (*NOT_IN_A_SESSION, "relay._html")
NOT_IN_A_NEW_TURN = (*NOT_IN_A_TURN, "relay._rollout._reader")
#: What reading a rollout does not use.
NOT_IN_SHOW = (
    *NOT_IN_A_SESSION,
    "relay._drive",
    "relay._open",
    "relay._core._session",
    "relay.lowlevel",
    "relay.tasks",
    "anyio",
    "asyncio",
    "trio",
)
HELPS = [
    [*command.split(), "--help"]
    for command in (
        "run",
        "exec",
        "resume",
        "show",
        "eval",
        "mock-server",
        "app-server",
        "cluster",
        "cluster run",
        "cluster up",
        "cluster ls",
        "cluster attach",
        "cluster down",
    )
]
SCRIPTED = ["--model-script", "hello.model.json", "--rollout-dir", "sessions"]
#: Each command, and what it must not import.
UNUSED: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "--version": (["--version"], ANY_WORK),
    "--help": (["--help"], ANY_WORK),
    **{" ".join(argv): (argv, ANY_WORK) for argv in HELPS},
    "run": (["run", str(EXAMPLES / "hello.jsonl"), "--json", *SCRIPTED], NOT_IN_A_NEW_TURN),
    "exec": (["exec", "hello", *SCRIPTED], NOT_IN_A_NEW_TURN),
    "exec --experimental-json": (
        ["exec", "--experimental-json", "--skip-git-repo-check", "hello", *SCRIPTED],
        NOT_IN_A_NEW_TURN,
    ),
    "resume": (["resume", "ROLLOUT", str(EXAMPLES / "hello.jsonl"), "--json", *SCRIPTED], (
        NOT_IN_A_TURN
    )),
    "show": (["show", "ROLLOUT"], NOT_IN_SHOW),
    "show --html": (["show", "ROLLOUT", "--html"], NOT_IN_SHOW),
}  # fmt: skip


def used(modules: list[str], unused: tuple[str, ...]) -> list[str]:
    """The modules of ``modules`` that are, or are inside, one of ``unused``."""
    return [m for m in modules if any(m == u or m.startswith(f"{u}.") for u in unused)]


def loaded_after(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> list[str]:
    """The modules loaded (not only marked unavailable) once ``relay ARGV`` has run; it must
    succeed."""
    code = f"""
import json, sys
sys.argv = ["relay", *{argv!r}]
from relay._cli._main import main
try:
    status = main()
except SystemExit as exc:
    status = exc.code
loaded = sorted(name for name, module in sys.modules.items() if module is not None)
print(json.dumps([status or 0, loaded]))
"""
    found: list[Any] = imported_after(code, cwd, env)
    status, modules = found
    assert status == 0
    return list(modules)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rollout of one scripted run of ``examples/hello.jsonl``."""
    folder = tmp_path_factory.mktemp("rollout")
    subprocess.run(
        [sys.executable, "-m", "relay", "run", str(EXAMPLES / "hello.jsonl"), "--json",
         "--model-script", str(EXAMPLES / "hello.model.json"), "--rollout-dir", "sessions"],
        cwd=folder, capture_output=True, timeout=TIMEOUT, check=True,
    )  # fmt: skip
    (found,) = (folder / "sessions").rglob("rollout-*.jsonl")
    return found


def test_importing_relay_loads_nothing_but_its_version(tmp_path: Path) -> None:
    code = """
import json, sys
import relay, relay.lowlevel
print(json.dumps(sorted(name for name, module in sys.modules.items() if module is not None)))
"""
    modules = imported_after(code, tmp_path)
    assert [m for m in modules if m.startswith("relay")] == [
        "relay",
        "relay._version",
        "relay.lowlevel",
    ]
    assert used(modules, ("attr", "attrs", "anyio", "cattrs", "typing")) == []


@pytest.mark.parametrize("command", list(UNUSED))
def test_each_command_imports_only_what_it_uses(
    tmp_path: Path, rollout: Path, command: str
) -> None:
    argv, unused = UNUSED[command]
    argv = [str(rollout) if arg == "ROLLOUT" else arg for arg in argv]
    (tmp_path / "hello.model.json").write_text(
        (EXAMPLES / "hello.model.json").read_text(encoding="utf-8")
    )
    assert used(loaded_after(argv, tmp_path), unused) == []


def test_eval_imports_only_what_it_uses(tmp_path: Path) -> None:
    case = EXAMPLES / "eval" / "cases" / "01-billing-invoice"
    corpus = tmp_path / "corpus"
    shutil.copytree(case, corpus / case.name)
    (tmp_path / "matrix.toml").write_text('[[configuration]]\nname = "local"\n')
    argv = ["eval", str(corpus), "--matrix", "matrix.toml", "--repeats", "1", "--json", "out.json"]
    unused = ("relay._cluster", "relay._testing", "relay._mcp", "mcp", "hypercorn", "ray",
              "matplotlib", "relay._rollout._reader")  # fmt: skip
    assert used(loaded_after(argv, tmp_path), unused) == []


def test_the_mock_server_imports_no_session_and_no_sdk(tmp_path: Path) -> None:
    """``relay mock-server`` serves model scripts: no session, no task, no SDK."""
    (tmp_path / "hello.model.json").write_text(
        (EXAMPLES / "hello.model.json").read_text(encoding="utf-8")
    )
    code = """
import atexit, json, sys
sys.argv = ["relay", "mock-server", "--script", "hello.model.json"]
def loaded():
    names = sorted(name for name, module in sys.modules.items() if module is not None)
    sys.stderr.write(json.dumps(names) + "\\n")
atexit.register(loaded)
from relay._cli._main import main
try:
    main()
except (SystemExit, KeyboardInterrupt):
    pass
"""
    with subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdout is not None
        assert server.stdout.readline().startswith("http://127.0.0.1:")
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=TIMEOUT)
    modules = json.loads(err.strip().splitlines()[-1])
    unused = ("openai", "pydantic", "relay._wire", "relay._open", "relay._core._session",
              "relay._drive", "relay.tasks", "relay._eval", "relay._cluster", "relay._mcp",
              "ray", "matplotlib")  # fmt: skip
    assert used(modules, unused) == []


# ----------------------------------------------------------------------------- per SDK turn
# Codex's SDK starts one ``relay exec --experimental-json`` per turn, and a client of the
# app-server one server per conversation: each pays its command's imports every time.


@pytest.fixture(scope="module")
def mock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a ``relay mock-server`` that echoes every prompt."""
    folder = tmp_path_factory.mktemp("mock")
    (folder / "echo.json").write_text('{"responses": []}', encoding="utf-8")
    with subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", "echo.json"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as server:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        yield url
        server.terminate()


def sdk_turn(tmp_path: Path, url: str) -> list[str]:
    """The modules one turn over HTTP loads, started as Codex's SDK starts it (``baseUrl``,
    ``apiKey``)."""
    argv = ["exec", "--experimental-json", "--skip-git-repo-check", "--config",
            f'openai_base_url="{url}"', "-m", "mock-model", "--rollout-dir", "sessions",
            "hi"]  # fmt: skip
    env = {**os.environ, "CODEX_API_KEY": "sk-test", "RELAY_HOME": str(tmp_path / "home")}
    return loaded_after(argv, tmp_path, env)


def test_an_sdk_turn_over_http_imports_the_wire_and_nothing_unused(
    tmp_path: Path, mock_url: str
) -> None:
    modules = sdk_turn(tmp_path, mock_url)
    assert "relay._wire" in modules and "openai" in modules  # the turn went over HTTP
    unused = tuple(name for name in NOT_IN_A_NEW_TURN if name not in HTTP)
    assert used(modules, unused) == []


def test_an_sdk_turn_over_http_imports_no_http2(tmp_path: Path, mock_url: str) -> None:
    """relay never asks for HTTP/2; the SDK's HTTP stack imports ``h2`` when it can."""
    assert used(sdk_turn(tmp_path, mock_url), ("h2", "hpack", "hyperframe")) == []


def test_the_app_server_imports_only_what_a_turn_uses(tmp_path: Path) -> None:
    """``relay app-server`` on the scripted model: a thread and one turn, then the end of its
    input."""
    code = """
import atexit, json, sys
sys.argv = ["relay", "app-server"]
def loaded():
    names = sorted(name for name, module in sys.modules.items() if module is not None)
    sys.stderr.write(json.dumps(names) + "\\n")
atexit.register(loaded)
from relay._cli._main import main
try:
    main()
except SystemExit:
    pass
"""
    env = {**os.environ, "RELAY_HOME": str(tmp_path / "home")}
    with subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None

        def send(message: dict[str, object]) -> None:
            assert server.stdin is not None
            server.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            server.stdin.flush()

        def until(done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
            assert server.stdout is not None
            for line in server.stdout:
                message: dict[str, Any] = json.loads(line)
                if done(message):
                    return message
            raise AssertionError("the app-server ended early")

        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t",
              "version": "1"}}})  # fmt: skip
        until(lambda m: m.get("id") == 1)
        send({"method": "initialized"})
        send({"id": 2, "method": "thread/start", "params": {}})
        thread = until(lambda m: m.get("id") == 2)["result"]["thread"]["id"]
        turn = {"threadId": thread, "input": [{"type": "text", "text": "hi"}]}
        send({"id": 3, "method": "turn/start", "params": turn})
        until(lambda m: m.get("method") == "turn/completed")
        _, err = server.communicate(timeout=TIMEOUT)
    modules = json.loads(err.strip().splitlines()[-1])
    assert "relay._core._session" in modules  # a session ran
    assert used(modules, (*NOT_IN_A_TURN, "relay._drive")) == []
