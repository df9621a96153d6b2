"""MCP servers in a session, against real servers (``tests/mcp/mcp_server.py``, on the official SDK)
over stdio and streamable HTTP: a scripted model calls their tools through relay's tool layer;
errors, cancellation, timeouts, crashes and restarts, startup failures, filters, a resume and
masking (docs/tools.md).

A server is a Python process that imports the SDK (about a second on a shared core): the tests
that start one are in the slow tier, except those whose server fails before it imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import relay
from relay import McpServerConfig, testing
from relay._mcp._names import qualified_name
from relay.tasks.compaction._history import mask_reference
from tests.escapees import alive, lock_of
from tests.mcp.mcp_server import LONG_TOOL

pytest.importorskip("mcp")

SERVER = Path(__file__).resolve().parent / "mcp_server.py"
#: Every tool of the test server.
TOOLS = 13
#: How long a test waits for what a server does on its own (it logs it).
DEADLINE = 20.0


def stdio(*args: str, **fields: Any) -> McpServerConfig:
    """The test server over stdio."""
    return McpServerConfig(command=sys.executable, args=(str(SERVER), *args), **fields)


def call(tool: str, call_id: str, /, **arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": tool, "arguments": arguments, "call_id": call_id}}


def config(**fields: Any) -> relay.Config:
    fields.setdefault("rollout", relay.RolloutConfig(enabled=False))
    return relay.Config(**fields)


def outputs(recorder: testing.EventRecorder) -> dict[str, str]:
    """Each tool call's output as ``item_completed`` reported it, by call id."""
    return {
        msg.item.id: msg.item.output
        for msg in recorder.msgs
        if isinstance(msg, relay.ItemCompleted) and isinstance(msg.item, relay.ToolCallItem)
    }


def recorded(session: relay.Session) -> dict[str, str]:
    """Each tool call's output as the history has it, by call id."""
    return {
        item.call_id: item.output
        for item in session.history.items
        if isinstance(item, relay.FunctionCallOutput)
    }


async def logged(log: Path, line: str) -> None:
    """Wait until the test server wrote ``line`` to its log (what it does on its own)."""
    with anyio.fail_after(DEADLINE):
        # Another process writes it: there is no event to wait on, only the file to read.
        while not (log.exists() and line in log.read_text(encoding="utf-8").splitlines()):  # noqa: ASYNC110
            await anyio.sleep(0.02)


# ------------------------------------------------------------------ startup failures


async def test_a_server_that_fails_to_start_is_a_warning_with_its_stderr_tail() -> None:
    servers = {"broken": stdio("--fail-start", "fatal: SEARCH_TOKEN is not set")}
    script = {"responses": [call("mcp__broken__echo", "c1", text="hi"), "Done."]}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
    configured = t.recorder.of_type(relay.SessionConfigured)[0]
    assert configured.mcp_servers == {}
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert warning.message == (
        "MCP server 'broken' did not start: exited before it answered (exit status 2). "
        "The end of its standard error:\n"
        "  starting the test server\n"
        "  fatal: SEARCH_TOKEN is not set"
    )
    assert t.recorder.events[1].id == "mcp"
    assert outputs(t.recorder) == {"c1": "unsupported call: mcp__broken__echo"}


async def test_a_command_that_does_not_exist_is_a_warning_naming_it() -> None:
    servers = {"ghost": McpServerConfig(command="/no/such/mcp-server")}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert warning.message == (
        "MCP server 'ghost' did not start: cannot start '/no/such/mcp-server': "
        "No such file or directory"
    )


async def test_a_cwd_that_does_not_exist_is_a_warning_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    servers = {"lost": McpServerConfig(command=sys.executable, cwd=str(missing))}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    assert warning.message == (
        f"MCP server 'lost' did not start: its cwd {str(missing)!r} cannot be used: "
        "No such file or directory"
    )


async def test_a_server_that_never_answers_is_given_up_after_its_startup_timeout() -> None:
    servers = {"mute": stdio("--hang", startup_timeout_sec=0.3)}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    (warning,) = t.recorder.of_type(relay.WarningEvent)
    gave_up = "MCP server 'mute' did not start: did not start within 0.3 s"
    # On a loaded machine the timeout may come before the server said anything.
    assert warning.message in (gave_up, f"{gave_up}. The end of its standard error:\n  hanging")


async def test_an_http_server_that_cannot_be_reached_or_has_no_token_is_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MCP_NO_TOKEN", raising=False)
    port = free_port()  # nobody listens on it
    servers = {
        "closed": McpServerConfig(url=f"http://127.0.0.1:{port}/mcp"),
        "secret": McpServerConfig(
            url=f"http://127.0.0.1:{port}/mcp", bearer_token_env_var="MCP_NO_TOKEN"
        ),
    }
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    closed, secret = [w.message for w in t.recorder.of_type(relay.WarningEvent)]
    assert closed.startswith("MCP server 'closed' did not start: ConnectError: ")
    assert secret == (
        "MCP server 'secret' did not start: the environment variable MCP_NO_TOKEN (its "
        "bearer_token_env_var) is unset or empty"
    )


async def test_a_disabled_server_is_not_started() -> None:
    servers = {"off": McpServerConfig(command="/no/such/mcp-server", enabled=False)}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        assert [n for n in t.session.tools.names() if n.startswith("mcp__")] == []
    assert t.recorder.of_type(relay.WarningEvent) == []


# ------------------------------------------------------------------ calls


@pytest.mark.slow
async def test_the_model_calls_the_tools_of_a_stdio_server(tmp_path: Path) -> None:
    long_name = qualified_name("test", LONG_TOOL)
    script = {
        "responses": [
            call("mcp__test__echo", "c1", text="hello"),
            call("mcp__test__add", "c2", a=2, b=3),
            call("mcp__test__fail", "c3", message="x must be positive"),
            call("mcp__test__image", "c4"),
            call(long_name, "c5"),
            call("mcp__test__cwd", "c6"),
            call("mcp__test__pid", "c7"),
            "Done.",
        ]
    }
    sessions = tmp_path / "sessions"
    cfg = config(
        rollout=relay.RolloutConfig(dir=str(sessions)),
        features=relay.Features(work_state=True),
        mcp_servers={"test": stdio("--lock", lock_of(tmp_path / "server"), cwd=str(tmp_path))},
    )
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("Use the tools.")
        tools = {spec.name: spec for spec in t.session.tools.specs()}
        assert alive(tmp_path / "server")  # the server holds its lock while it runs
    assert len(long_name) == 64 and long_name in tools
    echo = tools["mcp__test__echo"]
    assert echo.description == "Return the text."
    assert echo.parameters["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert echo.parameters["required"] == ["text"]
    configured = t.recorder.of_type(relay.SessionConfigured)[0]
    assert configured.mcp_servers == {"test": TOOLS}
    assert relay.lowlevel.to_json(configured)["mcp_servers"] == {"test": TOOLS}
    found = outputs(t.recorder)
    assert found == {
        "c1": "hello",
        "c2": "5",
        "c3": "error: Error executing tool fail: x must be positive",
        "c4": "[image: image/png, 67 bytes]",
        "c5": "long",
        "c6": str(tmp_path),
        "c7": found["c7"],
    }
    # Each call was reported as it started, and its output went to the model and the rollout.
    started = [
        m.item.name
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemStarted) and isinstance(m.item, relay.ToolCallItem)
    ]
    assert started[:2] == ["mcp__test__echo", "mcp__test__add"]
    assert t.model.requests[-1]["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c7",
        "output": found["c7"],
    }
    (rollout,) = sessions.rglob("*.jsonl")
    recorded = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert {
        "type": "function_call_output",
        "call_id": "c3",
        "output": found["c3"],
    } in [line["payload"] for line in recorded if line["type"] == "response_item"]
    # A failed call is a fact of the work-state record, as any tool's error is.
    noted = [(m.kind, m.text) for m in t.recorder.of_type(relay.WorkStateNoted)]
    assert ("error", 'mcp__test__fail: "Error executing tool fail: x must be positive"') in noted
    # The server went with the session.
    assert not alive(tmp_path / "server")


@pytest.mark.slow
async def test_enabled_and_disabled_tools_choose_what_the_model_is_offered() -> None:
    servers = {
        "test": stdio(enabled_tools=("echo", "add", "pid"), disabled_tools=("add",)),
    }
    script = {"responses": [call("mcp__test__add", "c1", a=1, b=2), "Done."]}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
        offered = sorted(n for n in t.session.tools.names() if n.startswith("mcp__"))
    assert offered == ["mcp__test__echo", "mcp__test__pid"]
    assert t.recorder.of_type(relay.SessionConfigured)[0].mcp_servers == {"test": 2}
    assert outputs(t.recorder) == {"c1": "unsupported call: mcp__test__add"}


@pytest.mark.slow
async def test_mcp_outputs_are_cut_and_counted_by_the_step_limit_as_any_tool_output() -> None:
    script = {
        "responses": [
            call("mcp__test__echo", "c1", text="word " * 20_000),
            call("mcp__test__echo", "c2", text="again"),
            "Never said.",
        ]
    }
    cfg = config(max_steps_per_turn=2, mcp_servers={"test": stdio()})
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("go")
    found = outputs(t.recorder)
    assert len(found["c1"]) < 60_000 and "truncated" in found["c1"]
    assert found["c2"] == "again"
    (error,) = t.recorder.of_type(relay.ErrorEvent)
    assert error.code is relay.ErrorCode.STEP_LIMIT


@pytest.mark.slow
async def test_the_environment_of_a_stdio_server_is_what_its_table_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_PASSED", "through env_vars")
    monkeypatch.setenv("MCP_KEPT", "not for servers")
    script = {
        "responses": [
            call("mcp__test__env", "c1", name="MCP_GIVEN"),
            call("mcp__test__env", "c2", name="MCP_PASSED"),
            call("mcp__test__env", "c3", name="MCP_KEPT"),
            call("mcp__test__env", "c4", name="HOME"),
            "Done.",
        ]
    }
    servers = {"test": stdio(env={"MCP_GIVEN": "from env"}, env_vars=("MCP_PASSED",))}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
    assert outputs(t.recorder) == {
        "c1": "from env",
        "c2": "through env_vars",
        "c3": "(unset)",
        "c4": os.environ["HOME"],
    }


# ------------------------------------------------------------------ cancellation and timeouts


@pytest.mark.slow
async def test_an_interrupt_cancels_the_call_and_the_server_is_told(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    script = {"responses": [call("mcp__test__slow", "c1", seconds=60, tag="t1"), "Done."]}
    servers = {"test": stdio("--log", str(log))}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turn("Take your time.", id="t1")
        await logged(log, "slow t1 started")
        await t.submit(relay.Interrupt())
        aborted = await t.wait_for(relay.TurnAborted)
        await logged(log, "slow t1 cancelled")
        assert recorded(t.session) == {"c1": "aborted"}
    assert aborted.msg.reason is relay.AbortReason.INTERRUPTED
    assert "slow t1 finished" not in log.read_text()


@pytest.mark.slow
async def test_a_call_longer_than_tool_timeout_sec_fails_and_the_server_is_told(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    script = {
        "responses": [
            call("mcp__test__slow", "c1", seconds=60, tag="t1"),
            call("mcp__test__echo", "c2", text="still here"),
            "Done.",
        ]
    }
    servers = {"test": stdio("--log", str(log), tool_timeout_sec=0.5)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
        await logged(log, "slow t1 cancelled")
    assert outputs(t.recorder) == {
        "c1": "error: the call timed out after 0.5 s (tool_timeout_sec); the server was told "
        "to stop it",
        "c2": "still here",
    }


# ------------------------------------------------------------------ crashes and restarts


@pytest.mark.slow
async def test_a_server_that_dies_fails_its_call_and_is_restarted_once_per_turn(
    tmp_path: Path,
) -> None:
    # Each server runs in a PID namespace of its own, where the pid it reports is the same for
    # all: its log counts the starts, and its lock tells whether one still runs.
    log, report = tmp_path / "server.log", tmp_path / "server"
    script = {
        "responses": [
            call("mcp__test__pid", "a1"),
            call("mcp__test__crash", "a2"),
            call("mcp__test__pid", "a3"),  # restarted
            call("mcp__test__crash", "a4"),
            call("mcp__test__pid", "a5"),  # not again in this turn
            "First turn done.",
            call("mcp__test__pid", "b1"),  # restarted in the next turn
            "Second turn done.",
        ]
    }
    servers = {"test": stdio("--log", str(log), "--lock", lock_of(report))}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("Crash it.", "Again.")
        assert alive(report)  # the server of the second turn holds the lock while it runs
    found = outputs(t.recorder)
    died = (
        "error: MCP server 'test' stopped (exit status 3) during the call; it is started "
        "again at the next call. The end of its standard error:\n  crashing with status 3"
    )
    assert found["a2"] == died and found["a4"] == died
    assert found["a5"] == (
        "error: MCP server 'test' stopped (exit status 3); it was started again once in this "
        "turn already, and is started again at its next call in a later turn"
    )
    # A server answered each of these, three processes in all: the first and two restarts.
    assert all(found[call_id].isdigit() for call_id in ("a1", "a3", "b1"))
    starts = [
        line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("started ")
    ]
    assert len(starts) == 3
    restarts = [m.message for m in t.recorder.of_type(relay.BackgroundEvent)]
    assert restarts == ["MCP server 'test' stopped (exit status 3); started it again"] * 2
    assert not alive(report)


def warnings_of(recorder: testing.EventRecorder) -> list[tuple[str, str]]:
    return [(e.id, e.msg.message) for e in recorder.events if isinstance(e.msg, relay.WarningEvent)]


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["name"] for tool in request.get("tools", [])}


@pytest.mark.slow
async def test_a_new_list_of_tools_is_offered_by_the_next_request_and_reported() -> None:
    script = {
        "responses": [
            call("mcp__test__offer", "c1", name="fresh"),
            call("mcp__test__fresh", "c2", text="from the new tool"),
            call("mcp__test__crash", "c3"),
            # Started again: the new process lists the tools it starts with.
            call("mcp__test__fresh", "c4", text="again"),
            "Done.",
        ]
    }
    async with testing.open_test_session(script, config=config(mcp_servers={"test": stdio()})) as t:
        await t.turns("go")
    requests = t.model.requests
    assert ["mcp__test__fresh" in offered(r) for r in requests] == [False, True, True, True, False]
    found = outputs(t.recorder)
    assert found["c1"] == "offered fresh" and found["c2"] == "from the new tool"
    assert found["c4"] == "error: MCP server 'test' no longer offers the tool 'fresh'"
    assert t.recorder.of_type(relay.SessionConfigured)[0].mcp_servers == {"test": TOOLS}
    assert warnings_of(t.recorder) == [
        ("sub-1", "MCP server 'test' now offers 14 tools (it offered 13): added mcp__test__fresh."),
        (
            "sub-1",
            "MCP server 'test' now offers 13 tools (it offered 14): removed mcp__test__fresh.",
        ),
    ]
    # Each warning comes with the request that first offers the new list: after the output of
    # the call that changed it, before the answer to that request.
    msgs = t.recorder.msgs
    first, second = [i for i, m in enumerate(msgs) if isinstance(m, relay.WarningEvent)]
    completed = [
        m.item.id
        for m in msgs[:first]
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ToolCallItem)
    ]
    assert completed == ["c1"]
    assert [
        m.item.id
        for m in msgs[first:second]
        if isinstance(m, relay.ItemCompleted) and isinstance(m.item, relay.ToolCallItem)
    ] == ["c2", "c3", "c4"]


# ------------------------------------------------------------------ masking and resume


@pytest.mark.slow
async def test_an_mcp_output_is_masked_and_recalled_as_it_was(tmp_path: Path) -> None:
    big = "line of the server's output\n" * 1_000
    script = {
        "responses": [
            call("mcp__test__echo", "m1", text=big),
            call("recall", "r1", reference=mask_reference("m1", big)),
            "Got it back.",
        ]
    }
    cfg = config(
        features=relay.Features(tool_output_masking=True),
        model_auto_compact_token_limit=100_000,
        mask_trigger_tokens=2_000,
        mask_keep_recent_tokens=0,
        mcp_servers={"test": stdio()},
    )
    async with testing.open_test_session(script, config=cfg) as t:
        await t.turns("go")
        masked = [
            item.output
            for item in t.session.history.items
            if isinstance(item, relay.FunctionCallOutput) and item.call_id == "m1"
        ]
    receipts = [
        m.item.receipt.backend
        for m in t.recorder.msgs
        if isinstance(m, relay.ItemCompleted)
        and isinstance(m.item, relay.ContextCompactionItem)
        and m.item.receipt is not None
    ]
    assert receipts and set(receipts) == {"masked"}
    assert masked != [big] and mask_reference("m1", big) in masked[0]
    assert outputs(t.recorder) == {"m1": big, "r1": big}


@pytest.mark.slow
async def test_a_resumed_session_starts_its_servers_again(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    cfg = config(rollout=relay.RolloutConfig(dir=str(sessions)), mcp_servers={"test": stdio()})
    first = {"responses": [call("mcp__test__echo", "c1", text="before"), "Done."]}
    async with testing.open_test_session(first, config=cfg) as t:
        await t.turns("go")
    (rollout,) = sessions.rglob("*.jsonl")
    model = testing.ScriptedModel(
        {"responses": [call("mcp__test__echo", "c2", text="after"), "Done again."]}
    )
    async with (
        relay.resume_session(rollout, cfg, model=model) as session,
        testing.recording(session) as recorder,
    ):
        await session.submit(relay.UserTurn(items=[relay.Text("And now?")]))
        await recorder.wait_for(relay.TurnComplete)
    configured = recorder.of_type(relay.SessionConfigured)[0]
    assert configured.resumed and configured.mcp_servers == {"test": TOOLS}
    assert outputs(recorder) == {"c2": "after"}
    assert "before" in str(model.requests[0]["input"])


# ------------------------------------------------------------------ streamable HTTP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """The test server over streamable HTTP on a free loopback port: its URL, its log and its
    process."""
    port = free_port()
    log = tmp_path / "http-server.log"
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port), "--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp", log, proc
    finally:
        proc.kill()
        proc.wait(timeout=DEADLINE)


async def listening(url: str) -> None:
    port = int(url.split(":")[2].split("/")[0])
    with anyio.fail_after(DEADLINE):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
            else:
                await stream.aclose()
                return


@pytest.mark.slow
async def test_the_model_calls_the_tools_of_an_http_server_with_a_bearer_token(
    http_server: tuple[str, Path, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _, _ = http_server
    token = "token-0123456789abcdef"
    monkeypatch.setenv("MCP_TEST_TOKEN", token)
    await listening(url)
    script = {
        "responses": [
            call("mcp__web__echo", "c1", text="over http"),
            call("mcp__web__fail", "c2", message="no"),
            call("mcp__web__auth", "c3"),
            "Done.",
        ]
    }
    servers = {"web": McpServerConfig(url=url, bearer_token_env_var="MCP_TEST_TOKEN")}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
    assert t.recorder.of_type(relay.SessionConfigured)[0].mcp_servers == {"web": TOOLS}
    assert outputs(t.recorder) == {
        "c1": "over http",
        "c2": "error: Error executing tool fail: no",
        # The token reached the server, and is kept out of what the session records.
        "c3": "Bearer [redacted]",
    }


@pytest.mark.slow
async def test_an_http_server_that_changes_its_tools_has_them_offered(
    http_server: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    url, _, _ = http_server
    await listening(url)
    script = {
        "responses": [
            call("mcp__web__offer", "c1", name="fresh"),
            call("mcp__web__fresh", "c2", text="over http"),
            call("mcp__web__withdraw", "c3", name="fresh"),
            "Done.",
        ]
    }
    servers = {"web": McpServerConfig(url=url)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
    requests = t.model.requests
    assert ["mcp__web__fresh" in offered(r) for r in requests] == [False, True, True, False]
    assert outputs(t.recorder)["c2"] == "over http"
    assert warnings_of(t.recorder) == [
        ("sub-1", "MCP server 'web' now offers 14 tools (it offered 13): added mcp__web__fresh."),
        ("sub-1", "MCP server 'web' now offers 13 tools (it offered 14): removed mcp__web__fresh."),
    ]


@pytest.mark.slow
async def test_a_list_changed_on_its_own_stream_is_offered_once_it_is_in(
    http_server: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    # Over HTTP, a notification the server sends on the connection's stream may come after the
    # call's answer: the list is offered by the first request after it came.
    url, _, _ = http_server
    await listening(url)
    script = {
        "responses": [
            call("mcp__web__offer", "c1", name="fresh", with_answer=False),
            "Offered.",
            call("mcp__web__fresh", "c2", text="next turn"),
            "Done.",
        ]
    }
    servers = {"web": McpServerConfig(url=url)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("offer")
        with anyio.fail_after(DEADLINE):
            # Another process sends it: nothing in the session to wait on but the registry.
            while "mcp__web__fresh" not in t.session.tools.names():  # noqa: ASYNC110
                await anyio.sleep(0.02)
        await t.turns("call it")
    assert "mcp__web__fresh" in offered(t.model.requests[2])
    assert outputs(t.recorder)["c2"] == "next turn"
    # Reported once, by whichever request offered it first: the first turn's second, or the
    # second turn's first.
    [(turn, message)] = warnings_of(t.recorder)
    assert message == "MCP server 'web' now offers 14 tools (it offered 13): added mcp__web__fresh."
    first = next(i for i, r in enumerate(t.model.requests) if "mcp__web__fresh" in offered(r))
    assert (turn, first) in {("sub-1", 1), ("sub-2", 2)}


@pytest.mark.slow
async def test_an_interrupt_cancels_an_http_call_and_the_server_is_told(
    http_server: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    url, log, _ = http_server
    await listening(url)
    script = {"responses": [call("mcp__web__slow", "c1", seconds=60, tag="h1"), "Done."]}
    servers = {"web": McpServerConfig(url=url)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turn("Take your time.")
        await logged(log, "slow h1 started")
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        await logged(log, "slow h1 cancelled")
        assert recorded(t.session) == {"c1": "aborted"}


@pytest.mark.slow
async def test_an_http_server_that_went_away_fails_the_call_with_a_clear_output(
    http_server: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    url, _, proc = http_server
    await listening(url)
    script = {
        "responses": [
            call("mcp__web__echo", "c1", text="up"),
            "Done.",
            call("mcp__web__echo", "c2", text="down"),
            call("mcp__web__echo", "c3", text="still down"),
            "Done again.",
        ]
    }
    servers = {"web": McpServerConfig(url=url, startup_timeout_sec=5)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turns("go")
        proc.kill()
        proc.wait(timeout=DEADLINE)
        await t.turns("again")
    found = outputs(t.recorder)
    assert found["c1"] == "up"
    # What the HTTP client says of a refused connection is its own.
    refused = r"ConnectError: [^\n]+"
    assert re.fullmatch(
        f"error: MCP server 'web' is unreachable: {refused} during the call; it is started "
        "again at the next call",
        found["c2"],
    )
    assert re.fullmatch(
        f"error: MCP server 'web' is unreachable: {refused} and did not start again: {refused}",
        found["c3"],
    )


@pytest.mark.slow
async def test_an_http_server_killed_during_a_call_fails_it_and_the_next_call_says_why(
    http_server: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    url, log, proc = http_server
    await listening(url)
    script = {
        "responses": [
            call("mcp__web__slow", "c1", seconds=60, tag="k1"),
            call("mcp__web__echo", "c2", text="anyone?"),
            "Done.",
        ]
    }
    servers = {"web": McpServerConfig(url=url, startup_timeout_sec=5)}
    async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
        await t.turn("go")
        await logged(log, "slow k1 started")
        proc.kill()
        proc.wait(timeout=DEADLINE)
        await t.wait_for(testing.turn_ended)
    found = outputs(t.recorder)
    assert found["c1"] == (
        "error: MCP server 'web' is unreachable: the connection closed during the call; it is "
        "started again at the next call"
    )
    assert found["c2"].startswith(
        "error: MCP server 'web' is unreachable: the connection closed and did not start "
        "again: ConnectError: "
    )


@asynccontextmanager
async def session_with(servers: dict[str, Any]) -> AsyncIterator[relay.Session]:
    async with relay.open_session(
        config(), model=testing.ScriptedModel({}), mcp_servers=servers
    ) as session:
        yield session


async def test_open_session_takes_plain_tables_and_checks_them() -> None:
    with pytest.raises(relay.ConfigError, match=r"mcp_servers\.x\.comand"):
        async with session_with({"x": {"comand": "server"}}):
            pass
    with pytest.raises(relay.ConfigError, match="neither of command and url"):
        async with session_with({"x": {}}):
            pass
    off = {"command": "/no/such/server", "enabled": False}
    async with session_with({"x": off}) as session:
        assert session.config.mcp_servers == {
            "x": McpServerConfig(command="/no/such/server", enabled=False)
        }


@pytest.mark.slow
def test_calls_cancellation_and_restarts_on_asyncio(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    script = {
        "responses": [
            call("mcp__test__echo", "c1", text="on asyncio"),
            call("mcp__test__crash", "c2"),
            call("mcp__test__slow", "c3", seconds=60, tag="a1"),
            "Never said.",
        ]
    }
    servers = {"test": stdio("--log", str(log))}

    async def main() -> testing.TestSession:
        async with testing.open_test_session(script, config=config(mcp_servers=servers)) as t:
            await t.turn("go")
            await logged(log, "slow a1 started")
            await t.submit(relay.Interrupt())
            await t.wait_for(relay.TurnAborted)
            await logged(log, "slow a1 cancelled")
        return t

    t = asyncio.run(main())
    found = recorded(t.session)
    assert found["c1"] == "on asyncio"
    assert found["c2"].startswith("error: MCP server 'test' stopped (exit status 3)")
    assert found["c3"] == "aborted"
