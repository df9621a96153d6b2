"""What relay reads of an MCP server's answers, against a server that writes them byte by byte
(``tests/mcp/mcp_raw_server.py``) over stdio and streamable HTTP: answers over the size bound
(``tool_output_max_bytes``), answers relay cannot read, and tool lists without end
(docs/tools.md).

The server needs the standard library alone and starts at once: these tests are in the fast
tier. A call that waits on a server is bounded by a ``tool_timeout_sec`` far longer than any of
them takes, so that a call left waiting fails on what it says, not on the clock.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import relay
from relay import McpServerConfig, testing
from relay._mcp._servers import MAX_PAGES, MAX_TOOLS
from tests.mcp.test_mcp import DEADLINE, call, config, free_port, listening, outputs

pytest.importorskip("mcp")

RAW = Path(__file__).resolve().parent / "mcp_raw_server.py"
#: Seconds a call may wait on the server before it is reported as timed out: long enough that
#: a call fails on what relay makes of the answer, never on this.
PATIENCE = 30.0


def raw(*args: str, **fields: Any) -> McpServerConfig:
    """The raw server over stdio."""
    fields.setdefault("tool_timeout_sec", PATIENCE)
    fields.setdefault("startup_timeout_sec", PATIENCE)
    return McpServerConfig(command=sys.executable, args=(str(RAW), *args), **fields)


@pytest.fixture
def raw_http() -> Iterator[Any]:
    """Start the raw server over HTTP (``start(*args)``); each is killed after the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> str:
        port = free_port()
        procs.append(
            subprocess.Popen(
                [sys.executable, str(RAW), "--http", str(port), *args],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=DEADLINE)


async def http(start: Any, *args: str, **fields: Any) -> McpServerConfig:
    url = start(*args)
    await listening(url)
    fields.setdefault("tool_timeout_sec", PATIENCE)
    fields.setdefault("startup_timeout_sec", PATIENCE)
    return McpServerConfig(url=url, **fields)


def unreadable(why: str) -> str:
    return f"error: the answer of MCP server 'raw' could not be read: {why}"


# ------------------------------------------------------------------ answers relay cannot read


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("latin1", r"it is not UTF-8 \(byte 0xe9 at offset \d+\)"),
        ("surrogate", r"it holds \\ud800, the escape of a lone surrogate, which is no character"),
        ("deep", r"it is JSON nested deeper than relay reads \(recursion limit exceeded at .+\)"),
        ("garbage", r"it is not JSON \(.+\)"),
    ],
)
async def test_an_answer_relay_cannot_read_fails_its_call_at_once_and_says_why(
    kind: str, why: str
) -> None:
    script = {
        "responses": [
            call("mcp__raw__pid", "p1"),
            call("mcp__raw__broken", "c1", kind=kind),
            call("mcp__raw__pid", "p2"),
            "Done.",
        ]
    }
    async with testing.open_test_session(script, config=config(mcp_servers={"raw": raw()})) as t:
        await t.turns("go")
    found = outputs(t.recorder)
    assert re.fullmatch(re.escape(unreadable("")) + why, found["c1"]), found["c1"]
    # The server was not taken for gone: the next call went to the same process.
    assert found["p1"] == found["p2"]
    assert t.recorder.of_type(relay.BackgroundEvent) == []


async def test_a_tool_list_relay_cannot_read_is_a_start_failure_that_says_why() -> None:
    servers = {"raw": raw("--list-answer", "latin1")}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    (warning,) = [w.message for w in t.recorder.of_type(relay.WarningEvent)]
    assert warning.startswith(
        "MCP server 'raw' did not start: its answer could not be read: it is not UTF-8 "
        "(byte 0xe9 at offset "
    )


async def test_an_event_over_a_mebibyte_is_read_and_the_server_kept(raw_http: Any) -> None:
    server = await http(raw_http, "--sse")
    script = {
        "responses": [
            call("mcp__raw__pid", "p1"),
            call("mcp__raw__big", "c1", size=2 * 1024 * 1024),
            call("mcp__raw__pid", "p2"),
            "Done.",
        ]
    }
    async with testing.open_test_session(script, config=config(mcp_servers={"raw": server})) as t:
        await t.turns("go")
    found = outputs(t.recorder)
    # Read whole, then cut as any tool output is.
    assert found["c1"].startswith("x" * 1000) and "truncated" in found["c1"]
    assert found["p1"] == found["p2"]
    assert t.recorder.of_type(relay.BackgroundEvent) == []


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("latin1", "it is not UTF-8 (invalid unicode code point at line 1 column 72)"),
        ("surrogate", "it holds an escape that is no character (unexpected end of hex escape "),
        ("deep", "it is JSON nested deeper than relay reads (recursion limit exceeded at "),
        ("garbage", "it is not JSON (key must be a string at line 1 column 35)"),
    ],
)
@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
async def test_an_http_answer_relay_cannot_read_fails_its_call_and_says_why(
    kind: str, why: str, sse: bool, raw_http: Any
) -> None:
    server = await http(raw_http, *(["--sse"] if sse else []))
    script = {
        "responses": [
            call("mcp__raw__pid", "p1"),
            call("mcp__raw__broken", "c1", kind=kind),
            call("mcp__raw__pid", "p2"),
            "Done.",
        ]
    }
    async with testing.open_test_session(script, config=config(mcp_servers={"raw": server})) as t:
        await t.turns("go")
    found = outputs(t.recorder)
    if sse and kind == "latin1":
        # A stream is read as text: a byte that is not UTF-8 reads as U+FFFD.
        assert found["c1"] == "caf\ufffd"
    else:
        assert found["c1"].startswith(unreadable(why))
    assert found["p1"] == found["p2"]
    assert t.recorder.of_type(relay.BackgroundEvent) == []


# ------------------------------------------------------------------ the size bound


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
async def test_an_answer_over_tool_output_max_bytes_is_not_read_and_the_call_says_so(
    transport: str, raw_http: Any
) -> None:
    bound = {"tool_output_max_bytes": 65_536}
    if transport == "stdio":
        server = raw(**bound)
    else:
        server = await http(raw_http, *(["--sse"] if transport == "sse" else []), **bound)
    script = {
        "responses": [
            call("mcp__raw__pid", "p1"),
            call("mcp__raw__big", "c1", size=100_000),
            call("mcp__raw__big", "c2", size=60_000),
            call("mcp__raw__pid", "p2"),
            "Done.",
        ]
    }
    async with testing.open_test_session(script, config=config(mcp_servers={"raw": server})) as t:
        await t.turns("go")
    found = outputs(t.recorder)
    assert found["c1"] == unreadable("it is over 65,536 bytes (tool_output_max_bytes)")
    assert found["c2"].startswith("x" * 1000)
    assert found["p1"] == found["p2"]
    assert t.recorder.of_type(relay.BackgroundEvent) == []


# ------------------------------------------------------------------ tool lists


def own_tools(session: relay.Session) -> int:
    return sum(1 for name in session.tools.names() if not name.startswith("mcp__"))


async def test_the_tools_offered_are_capped_per_server_and_in_all() -> None:
    servers = {"raw": raw("--tools", "200"), "more": raw("--tools", "3")}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        offered = len(t.session.tools.names())
        room = MAX_TOOLS - own_tools(t.session)
    assert offered == MAX_TOOLS
    configured = t.recorder.of_type(relay.SessionConfigured)[0]
    assert configured.mcp_servers == {"raw": room, "more": 0}
    assert [w.message for w in t.recorder.of_type(relay.WarningEvent)] == [
        f"MCP server 'raw' offers more than {MAX_TOOLS} tools; the model is offered its first "
        f"{MAX_TOOLS}",
        f"MCP server 'raw': left out {MAX_TOOLS - room} of its tools: a session offers the "
        f"model at most {MAX_TOOLS} tools, its own included",
        f"MCP server 'more': left out 7 of its tools: a session offers the model at most "
        f"{MAX_TOOLS} tools, its own included",
    ]


async def test_a_server_that_pages_its_tools_without_end_is_read_up_to_the_page_cap() -> None:
    servers = {"raw": raw("--pages-forever")}
    async with testing.open_test_session({}, config=config(mcp_servers=servers)) as t:
        pass
    configured = t.recorder.of_type(relay.SessionConfigured)[0]
    assert configured.mcp_servers == {"raw": MAX_PAGES}
    assert [w.message for w in t.recorder.of_type(relay.WarningEvent)] == [
        f"MCP server 'raw' lists its tools over more than {MAX_PAGES} pages; the pages after "
        f"the first {MAX_PAGES} were not read"
    ]
