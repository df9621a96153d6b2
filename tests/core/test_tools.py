"""The tool registry and the built-in tools (docs/session.md)."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from relay import testing
from relay._base import _protocol as p
from relay._base._config import Config, RolloutConfig
from relay._base._errors import ConfigError
from relay._base._model import ToolSpec
from relay._core._builtin import BUILTIN_TOOLS, builtin_registry
from relay._core._tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    file_kind,
    readable,
    resolve_in_cwd,
    unsupported_output,
)
from tests.escapees import escape_argv, wait_gone


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def context(cwd: Path, events: list[p.EventMsg] | None = None) -> ToolContext:
    return ToolContext(
        turn_id="t1", cwd=str(cwd), emit=(events.append if events is not None else lambda _: None)
    )


async def call(registry: ToolRegistry, cwd: Path, name: str, args: Mapping[str, Any] | str) -> str:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return await registry.call(p.FunctionCall(name, arguments, "call-1"), context(cwd))


ALL_ON = {"read_file": True, "list_dir": True, "sleep": True, "shell": True}


# ------------------------------------------------------------------ resolve_in_cwd


def test_resolve_in_cwd_accepts_paths_inside(cwd: Path) -> None:
    (cwd / "sub").mkdir()
    root = cwd.resolve()
    assert resolve_in_cwd(str(cwd), "a.txt") == root / "a.txt"
    assert resolve_in_cwd(str(cwd), "sub/../b.txt") == root / "b.txt"
    assert resolve_in_cwd(str(cwd), ".") == root
    assert resolve_in_cwd(str(cwd), str(cwd / "sub" / "c")) == root / "sub" / "c"


@pytest.mark.parametrize("raw", ["..", "../x", "sub/../../x", "/etc/passwd", "/"])
def test_resolve_in_cwd_refuses_escapes(cwd: Path, raw: str) -> None:
    with pytest.raises(ToolError, match="outside the working directory"):
        resolve_in_cwd(str(cwd), raw)


def test_resolve_in_cwd_refuses_a_sibling_with_the_same_prefix(cwd: Path) -> None:
    sibling = cwd.parent / (cwd.name + "-other")
    sibling.mkdir()
    with pytest.raises(ToolError, match="outside"):
        resolve_in_cwd(str(cwd), str(sibling / "f"))
    with pytest.raises(ToolError, match="outside"):
        resolve_in_cwd(str(cwd), f"../{sibling.name}/f")


def test_resolve_in_cwd_refuses_a_symlink_pointing_outside(cwd: Path) -> None:
    secret = cwd.parent / "secret.txt"
    secret.write_text("top secret")
    (cwd / "link").symlink_to(secret)
    outside_dir = cwd.parent / "outside"
    outside_dir.mkdir()
    (cwd / "dirlink").symlink_to(outside_dir, target_is_directory=True)
    with pytest.raises(ToolError, match="'link' is outside"):
        resolve_in_cwd(str(cwd), "link")
    with pytest.raises(ToolError, match="outside"):
        resolve_in_cwd(str(cwd), "dirlink/anything")


def test_resolve_in_cwd_follows_a_symlink_that_stays_inside(cwd: Path) -> None:
    (cwd / "real.txt").write_text("x")
    (cwd / "alias.txt").symlink_to(cwd / "real.txt")
    assert resolve_in_cwd(str(cwd), "alias.txt") == (cwd / "real.txt").resolve()


@pytest.mark.parametrize("raw", ["", None, 5, ["a"]])
def test_resolve_in_cwd_needs_a_non_empty_string(cwd: Path, raw: object) -> None:
    with pytest.raises(ToolError, match="non-empty string"):
        resolve_in_cwd(str(cwd), raw)


# ------------------------------------------------------------------ read_file / list_dir


async def test_read_file_returns_the_text(cwd: Path) -> None:
    (cwd / "notes.md").write_text("line one\nligne deux é\n", encoding="utf-8")
    registry = builtin_registry({})
    assert await call(registry, cwd, "read_file", {"path": "notes.md"}) == (
        "line one\nligne deux é\n"
    )


async def test_read_file_replaces_invalid_utf8(cwd: Path) -> None:
    (cwd / "bin").write_bytes(b"ok\xff\xfeok")
    assert await call(builtin_registry({}), cwd, "read_file", {"path": "bin"}) == (
        "ok\ufffd\ufffdok"
    )


async def test_read_file_truncates_large_files(cwd: Path) -> None:
    limit = 256 * 1024
    (cwd / "big").write_bytes(b"a" * (limit + 10))
    output = await call(builtin_registry({}), cwd, "read_file", {"path": "big"})
    assert output == "a" * limit + f"\n[file truncated at {limit} bytes of {limit + 10}]"


async def test_read_file_reads_only_what_it_returns(cwd: Path) -> None:
    # A sparse file of 1 TiB: reading it whole cannot even be attempted.
    limit = 256 * 1024
    size = 1 << 40
    with (cwd / "huge").open("wb") as huge:
        huge.write(b"head")
        huge.truncate(size)
    output = await call(builtin_registry({}), cwd, "read_file", {"path": "huge"})
    assert output == "head" + "\0" * (limit - 4) + f"\n[file truncated at {limit} bytes of {size}]"


async def test_read_file_refuses_a_fifo_without_opening_it_for_good(cwd: Path) -> None:
    os.mkfifo(cwd / "pipe")
    with trio.fail_after(10):
        output = await call(builtin_registry({}), cwd, "read_file", {"path": "pipe"})
    assert output == "error: pipe is a FIFO, not a regular file"


async def test_read_file_refuses_a_socket(cwd: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(str(cwd / "sock"))
        output = await call(builtin_registry({}), cwd, "read_file", {"path": "sock"})
    finally:
        listener.close()
    assert output == "error: sock is a socket, not a regular file"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
async def test_read_file_refuses_a_device_node(cwd: Path) -> None:
    os.mknod(cwd / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    output = await call(builtin_registry({}), cwd, "read_file", {"path": "null"})
    assert output == "error: null is a character device, not a regular file"


def test_file_kinds_are_named() -> None:
    assert file_kind(os.stat("/dev/null").st_mode) == "a character device"
    assert file_kind(stat.S_IFBLK) == "a block device"
    assert file_kind(stat.S_IFIFO) == "a FIFO"
    assert file_kind(stat.S_IFSOCK) == "a socket"
    assert file_kind(stat.S_IFDIR) == "a directory"
    assert file_kind(stat.S_IFREG) == "a regular file"


@pytest.mark.parametrize(
    ("args", "output"),
    [
        ({"path": "missing.txt"}, "error: no such file: missing.txt"),
        ({"path": "."}, "error: . is a directory"),
        ({"path": "../secret"}, "error: path '../secret' is outside the working directory"),
        ({}, "error: path must be a non-empty string"),
    ],
    ids=["missing", "directory", "escape", "no-path"],
)
async def test_read_file_errors_are_outputs(cwd: Path, args: dict[str, Any], output: str) -> None:
    assert await call(builtin_registry({}), cwd, "read_file", args) == output


async def test_read_file_refuses_a_symlink_outside(cwd: Path) -> None:
    secret = cwd.parent / "secret.txt"
    secret.write_text("top secret")
    (cwd / "link").symlink_to(secret)
    output = await call(builtin_registry({}), cwd, "read_file", {"path": "link"})
    assert output == "error: path 'link' is outside the working directory"
    assert "top secret" not in output


async def test_list_dir_lists_sorted_entries_with_directories_marked(cwd: Path) -> None:
    (cwd / "b.txt").write_text("")
    (cwd / "a_dir").mkdir()
    (cwd / "c.py").write_text("")
    (cwd / "a_dir" / "inner.txt").write_text("")
    registry = builtin_registry({})
    assert await call(registry, cwd, "list_dir", {}) == "a_dir/\nb.txt\nc.py"
    assert await call(registry, cwd, "list_dir", {"path": "."}) == "a_dir/\nb.txt\nc.py"
    assert await call(registry, cwd, "list_dir", {"path": "a_dir"}) == "inner.txt"


async def test_list_dir_shows_the_first_entries_and_counts_the_rest(cwd: Path) -> None:
    limit = 1000
    names = [f"f{n:05d}" for n in range(limit + 1234)]
    for name in reversed(names):
        (cwd / name).touch()
    output = await call(builtin_registry({}), cwd, "list_dir", {})
    assert output.split("\n") == [
        *names[:limit],
        f"[1234 more entries not shown; {limit + 1234} in all]",
    ]


async def test_list_dir_errors_are_outputs(cwd: Path) -> None:
    (cwd / "empty").mkdir()
    (cwd / "file").write_text("")
    registry = builtin_registry({})
    assert await call(registry, cwd, "list_dir", {"path": "empty"}) == "(empty)"
    assert await call(registry, cwd, "list_dir", {"path": "nope"}) == (
        "error: no such directory: nope"
    )
    assert await call(registry, cwd, "list_dir", {"path": "file"}) == (
        "error: file is not a directory"
    )
    assert await call(registry, cwd, "list_dir", {"path": ".."}) == (
        "error: path '..' is outside the working directory"
    )


async def test_list_dir_shows_names_that_are_not_utf8_escaped(cwd: Path) -> None:
    (cwd / os.fsdecode(b"caf\xe9.txt")).write_text("")
    (cwd / os.fsdecode(b"d\xff")).mkdir()
    output = await call(builtin_registry({}), cwd, "list_dir", {})
    assert output == "caf\\xe9.txt\nd\\xff/"
    output.encode("utf-8")


async def test_a_symlink_loop_is_a_tool_error_that_does_not_show_the_cwd(cwd: Path) -> None:
    (cwd / "a").symlink_to("b")
    (cwd / "b").symlink_to("a")
    registry = builtin_registry({})
    for name in ("read_file", "list_dir"):
        output = await call(registry, cwd, name, {"path": "a"})
        assert output == "error: path 'a' cannot be resolved: symlink loop"
        assert str(cwd) not in output


async def test_a_tool_that_crashes_still_answers_the_call(cwd: Path) -> None:
    async def crashes(args: Mapping[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError(f"bug in {ctx.cwd}")

    registry = ToolRegistry()
    registry.register(Tool("crashes", "", {}, crashes))
    output = await call(registry, cwd, "crashes", {})
    assert output == "error: crashes failed unexpectedly (RuntimeError)"


def test_tool_output_is_made_valid_utf8() -> None:
    assert readable("plain é") == "plain é"
    assert readable(os.fsdecode(b"x\xe9y")) == "x\\xe9y"
    assert readable("lone \ud800 surrogate") == "lone \ufffd surrogate"


async def test_a_session_in_a_directory_with_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / os.fsdecode(b"r\xe9sum\xe9.txt")).write_text("")
    config = Config(cwd=str(work), rollout=RolloutConfig(dir=str(tmp_path / "sessions")))
    script = {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {}, "call_id": "c1"}},
            {"text": "listed"},
        ]
    }
    async with testing.open_test_session(script, config=config) as t:
        await t.turn("list")
        await t.wait_for(testing.turn_ended)
    errors = [m for m in t.recorder.msgs if isinstance(m, p.ErrorEvent)]
    assert errors == []
    outputs = [
        m.item.output
        for m in t.recorder.of_type(p.ItemCompleted)
        if isinstance(m.item, p.ToolCallItem)
    ]
    assert outputs == ["r\\xe9sum\\xe9.txt"]
    rollout = next((tmp_path / "sessions").rglob("*.jsonl"))
    assert "r\\\\xe9sum\\\\xe9.txt" in rollout.read_text(encoding="utf-8")


# ------------------------------------------------------------------ the registry


async def test_an_unknown_tool_is_unsupported(cwd: Path) -> None:
    assert unsupported_output("frobnicate") == "unsupported call: frobnicate"
    assert await call(builtin_registry({}), cwd, "frobnicate", {}) == (
        "unsupported call: frobnicate"
    )
    # A built-in that is switched off is unknown too.
    assert await call(builtin_registry({}), cwd, "shell", {"argv": ["true"]}) == (
        "unsupported call: shell"
    )


async def test_invalid_json_arguments_get_a_clear_message(cwd: Path) -> None:
    output = await call(builtin_registry({}), cwd, "read_file", '{"path": ')
    assert output.startswith("invalid arguments for read_file: ")
    assert len(output) > len("invalid arguments for read_file: ")


@pytest.mark.parametrize("arguments", ['["a.txt"]', '"a.txt"', "42", "null"])
async def test_non_object_arguments_are_refused(cwd: Path, arguments: str) -> None:
    output = await call(builtin_registry({}), cwd, "read_file", arguments)
    assert output == "invalid arguments for read_file: expected a JSON object"


async def test_blank_arguments_are_an_empty_object(cwd: Path) -> None:
    seen: list[Mapping[str, Any]] = []

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        seen.append(args)
        return "ok"

    registry = ToolRegistry()
    registry.register(Tool("probe", "probe", {"type": "object"}, handler))
    assert await call(registry, cwd, "probe", "  ") == "ok"
    assert seen == [{}]


async def test_a_tool_error_becomes_the_output(cwd: Path) -> None:
    async def refuses(args: Mapping[str, Any], ctx: ToolContext) -> str:
        raise ToolError("not today")

    registry = ToolRegistry()
    registry.register(Tool("refuses", "", {}, refuses))
    assert await call(registry, cwd, "refuses", {}) == "error: not today"


async def test_a_handler_gets_its_arguments_and_the_context(cwd: Path) -> None:
    events: list[p.EventMsg] = []

    async def echo(args: Mapping[str, Any], ctx: ToolContext) -> str:
        ctx.emit(p.BackgroundEvent(f"echo in {ctx.turn_id}"))
        return f"{args['word']} from {ctx.cwd}"

    registry = ToolRegistry()
    registry.register(Tool("echo", "Echo a word.", {"type": "object"}, echo))
    output = await registry.call(
        p.FunctionCall("echo", '{"word": "hi"}', "c"), context(cwd, events)
    )
    assert output == f"hi from {cwd}"
    assert events == [p.BackgroundEvent("echo in t1")]


def test_registration_order_names_specs_and_replacement() -> None:
    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return ""

    registry = ToolRegistry()
    registry.register(Tool("b", "first b", {"type": "object"}, handler))
    registry.register(Tool("a", "a", {}, handler))
    registry.register(Tool("b", "second b", {}, handler))
    assert registry.names() == ["b", "a"]
    assert registry.specs() == (ToolSpec("b", "second b", {}), ToolSpec("a", "a", {}))
    assert registry.get("a") is not None
    assert registry.get("zzz") is None


# ------------------------------------------------------------------ builtin_registry


def test_builtin_defaults() -> None:
    registry = builtin_registry({})
    assert registry.names() == ["read_file", "list_dir", "sleep"]
    assert {name: default for name, (_, default) in BUILTIN_TOOLS.items()} == {
        "read_file": True,
        "list_dir": True,
        "sleep": True,
        "shell": False,
        # Effects and Codex's tools are asked for (on by default only in Codex's faces).
        "apply_patch": False,
        "update_plan": False,
        # The sub-agent tools come with features.multi_agent.
        "spawn_agent": False,
        "send_input": False,
        "wait": False,
        "close_agent": False,
        "resume_agent": False,
    }


def test_the_sub_agent_tools_come_with_multi_agent_and_each_can_be_left_out() -> None:
    agents = ["spawn_agent", "send_input", "wait", "close_agent", "resume_agent"]
    assert builtin_registry({}, multi_agent=True).names() == [
        "read_file",
        "list_dir",
        "sleep",
        *agents,
    ]
    offered = builtin_registry({"close_agent": False, "resume_agent": False}, multi_agent=True)
    assert offered.names()[3:] == ["spawn_agent", "send_input", "wait"]


def test_builtin_switches() -> None:
    assert builtin_registry(ALL_ON).names() == ["read_file", "list_dir", "sleep", "shell"]
    assert builtin_registry({"shell": True, "sleep": False}).names() == [
        "read_file",
        "list_dir",
        "shell",
    ]
    assert builtin_registry({"read_file": False, "list_dir": False, "sleep": False}).names() == []


def test_an_unknown_tool_switch_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tools\.web_search"):
        builtin_registry({"web_search": True})


def test_builtin_specs_describe_their_arguments() -> None:
    specs = {spec.name: spec for spec in builtin_registry(ALL_ON).specs()}
    assert specs["read_file"].parameters["required"] == ["path"]
    # Codex's names: a model trained on Codex's tool calls relay's the same way.
    shell = specs["shell"].parameters
    assert shell["required"] == ["command"]
    assert shell["properties"]["command"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "The program and its arguments",
    }
    assert {"workdir", "timeout_ms", "sandbox_permissions", "justification"} <= set(
        shell["properties"]
    )
    assert specs["shell"].parameters["properties"]["timeout_ms"]["default"] == 10_000
    assert all(spec.description for spec in specs.values())
    assert all(
        "description" in argument
        for spec in specs.values()
        for argument in spec.parameters["properties"].values()
    )


# ------------------------------------------------------------------ sleep


async def test_sleep_waits_in_virtual_time(
    cwd: Path, autojump_clock: trio.testing.MockClock
) -> None:
    start = trio.current_time()
    assert await call(builtin_registry({}), cwd, "sleep", {"seconds": 30}) == "slept 30 seconds"
    assert trio.current_time() - start == pytest.approx(30)


@pytest.mark.parametrize("seconds", [-1, "5", True, None])
async def test_sleep_refuses_bad_seconds(cwd: Path, seconds: Any) -> None:
    output = await call(builtin_registry({}), cwd, "sleep", {"seconds": seconds})
    assert output == "error: seconds must be a non-negative number"


# ------------------------------------------------------------------ shell


async def shell(cwd: Path, argv: Any, **extra: Any) -> str:
    return await call(builtin_registry(ALL_ON), cwd, "shell", {"argv": argv, **extra})


async def test_shell_passes_arguments_literally(cwd: Path) -> None:
    assert await shell(cwd, ["printf", "%s", "$(echo hi)"]) == "$(echo hi)\n[exit code 0]"
    assert await shell(cwd, ["printf", "%s|", "a b", "*", "`id`"]) == ("a b|*|`id`|\n[exit code 0]")


async def test_shell_metacharacters_do_not_run_commands(cwd: Path) -> None:
    (cwd / "x").write_text("keep me")
    assert await shell(cwd, ["printf", "%s", "; rm -rf x"]) == "; rm -rf x\n[exit code 0]"
    assert await shell(cwd, ["echo", "&&", "rm", "x"]) == "&& rm x\n\n[exit code 0]"
    assert (cwd / "x").read_text() == "keep me"


async def test_shell_reports_exit_codes_and_merges_stderr(cwd: Path) -> None:
    output = await shell(cwd, ["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert output == "out\nerr\n\n[exit code 3]"
    assert await shell(cwd, ["false"]) == "\n[exit code 1]"


async def test_shell_runs_in_the_working_directory(cwd: Path) -> None:
    assert await shell(cwd, ["pwd", "-P"]) == f"{cwd.resolve()}\n\n[exit code 0]"


async def test_shell_does_not_inherit_stdin(cwd: Path) -> None:
    assert await shell(cwd, ["cat"]) == "\n[exit code 0]"


async def test_shell_timeout_kills_the_process_group(cwd: Path) -> None:
    # The background child holds a lock (util-linux ``flock`` and the ``sh`` it runs, then
    # ``sleep``), taken before it prints: the lock goes when they have all ended.
    start = trio.current_time()
    output = await shell(
        cwd,
        ["sh", "-c", "flock child.lock sh -c 'echo started; exec sleep 30' & wait"],
        timeout_ms=1000,
    )
    elapsed = trio.current_time() - start
    assert output == "started\n\n[timed out after 1000 ms; process killed]"
    assert elapsed < 10
    await wait_gone(cwd / "child")


@pytest.mark.parametrize(
    ("args", "output"),
    [
        ({"argv": "ls -la"}, "error: command must be a non-empty list of strings"),
        ({"argv": []}, "error: command must be a non-empty list of strings"),
        ({"argv": ["ls", 5]}, "error: command must be a non-empty list of strings"),
        ({"argv": ["ls", "a\0b"]}, "error: command must be a non-empty list of strings"),
        ({}, "error: command must be a non-empty list of strings"),
        ({"argv": ["true"], "timeout_ms": 0}, "error: timeout_ms must be a positive integer"),
        ({"argv": ["true"], "timeout_ms": "5"}, "error: timeout_ms must be a positive integer"),
        ({"argv": ["true"], "timeout_ms": True}, "error: timeout_ms must be a positive integer"),
    ],
)
async def test_shell_refuses_bad_arguments(cwd: Path, args: dict[str, Any], output: str) -> None:
    assert await call(builtin_registry(ALL_ON), cwd, "shell", args) == output


async def test_shell_reports_a_missing_program(cwd: Path) -> None:
    output = await shell(cwd, ["relay-no-such-program-xyz"])
    assert output.startswith("error: cannot start 'relay-no-such-program-xyz'")


def test_the_tools_are_estimated_once_until_one_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from relay._base._tokens import tools_tokens

    wired = 0
    real = ToolSpec.to_wire

    def counting(spec: ToolSpec) -> dict[str, Any]:
        nonlocal wired
        wired += 1
        return real(spec)

    monkeypatch.setattr(ToolSpec, "to_wire", counting)
    registry = builtin_registry({})
    tools = len(registry.specs())
    first = tools_tokens(registry.specs())
    # Every request asks again; the registry's tools are the same tuple, estimated once.
    assert [tools_tokens(registry.specs()) for _ in range(10)] == [first] * 10
    assert wired == tools

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return "ok"

    registry.register(Tool("extra", "One more tool.", {"type": "object"}, handler))
    assert tools_tokens(registry.specs()) > first
    assert wired == 2 * tools + 1


async def test_a_grandchild_that_left_the_session_does_not_outlive_the_call(cwd: Path) -> None:
    output = await shell(cwd, escape_argv("escapee.pid"))
    assert (cwd / "escapee.pid").read_text().strip().isdigit()  # it had left, holding the lock
    await wait_gone(cwd / "escapee.pid")
    assert output == "\n[exit code 0]"


async def test_a_grandchild_that_left_the_session_holding_the_output_goes_at_the_timeout(
    cwd: Path,
) -> None:
    # It holds the command's output open: the call waits for the end of the output, up to the
    # timeout, and then nothing of the command is left.
    output = await shell(cwd, escape_argv("escapee.pid", "hold"), timeout_ms=300)
    assert (cwd / "escapee.pid").read_text().strip().isdigit()
    await wait_gone(cwd / "escapee.pid")
    assert output.endswith("[timed out after 300 ms; process killed]")
