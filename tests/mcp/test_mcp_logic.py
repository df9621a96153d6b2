"""What MCP support decides without a server: tool names, what a result reads as, which tools
are offered, the ``[mcp_servers.NAME]`` tables, and a session without the ``mcp`` extra."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest

import relay
from relay import McpServerConfig, testing
from relay._base._codec import to_json
from relay._base._config import config_from_dict, load_config
from relay._core._tools import ToolRegistry
from relay._mcp._answers import Lines, Overlong, answer_ids, why_json, why_reported
from relay._mcp._names import qualified_name, qualify
from relay._mcp._results import is_error, result_text

# ------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("server", "tool", "name"),
    [
        # Codex's own cases.
        ("server1", "tool1", "mcp__server1__tool1"),
        ("server.one", "tool.two", "mcp__server_one__tool_two"),
        (
            "my_server",
            "extremely_lengthy_function_name_that_absolutely_surpasses_all_reasonable_limits",
            "mcp__my_server__extremel119a2b97664e41363932dc84de21e2ff1b93b3e9",
        ),
        (
            "my_server",
            "yet_another_extremely_lengthy_function_name_that_absolutely_surpasses_all_"
            "reasonable_limits",
            "mcp__my_server__yet_anot419a82a89325c1b477274a41f8c65ea5f3a7f341",
        ),
        ("docs", "search-pages", "mcp__docs__search-pages"),
        ("docs", "lire la page", "mcp__docs__lire_la_page"),
        ("docs", "café", "mcp__docs__caf_"),
    ],
)
def test_a_tool_is_named_as_codex_names_it(server: str, tool: str, name: str) -> None:
    assert qualified_name(server, tool) == name
    assert len(name) <= 64


def test_a_long_name_is_exactly_64_characters_and_two_long_names_stay_apart() -> None:
    a = qualified_name("server", "a" * 100)
    b = qualified_name("server", "a" * 101)
    assert len(a) == len(b) == 64 and a != b
    assert a.startswith("mcp__server__aaaaaaaaaaa")


def test_a_tool_whose_name_is_taken_is_left_out() -> None:
    named = list(qualify("docs", ["read.page", "read_page", "search"], taken=["mcp__docs__search"]))
    assert named == [
        ("read.page", "mcp__docs__read_page"),
        ("read_page", None),
        ("search", None),
    ]


def test_enabled_tools_then_disabled_tools_choose_the_offered_tools() -> None:
    every = McpServerConfig(command="x")
    some = McpServerConfig(command="x", enabled_tools=["a", "b"], disabled_tools=["b", "c"])
    none = McpServerConfig(command="x", enabled_tools=[])
    assert [t for t in "abcd" if every.offers(t)] == list("abcd")
    assert [t for t in "abcd" if some.offers(t)] == ["a"]
    assert [t for t in "abcd" if none.offers(t)] == []


# ------------------------------------------------------------------ results


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (
            {"content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]},
            "one\ntwo",
        ),
        (
            {"content": [{"type": "text", "text": "5"}], "structuredContent": {"result": 5}},
            "5",
        ),
        ({"content": [], "structuredContent": {"b": [1], "a": "é"}}, '{"a": "é", "b": [1]}'),
        (
            {"content": [{"type": "image", "data": b64(b"x" * 12_345), "mimeType": "image/png"}]},
            "[image: image/png, 12345 bytes]",
        ),
        (
            {"content": [{"type": "audio", "data": b64(b"xyz"), "mimeType": "audio/wav"}]},
            "[audio: audio/wav, 3 bytes]",
        ),
        (
            {
                "content": [
                    {
                        "type": "resource",
                        "resource": {"uri": "file:///a.txt", "text": "the file's text"},
                    },
                    {
                        "type": "resource",
                        "resource": {"uri": "file:///a.bin", "blob": b64(b"\0" * 10)},
                    },
                ]
            },
            "the file's text\n[resource: file:///a.bin, 10 bytes]",
        ),
        (
            {"content": [{"type": "resource_link", "name": "spec", "uri": "https://x/spec"}]},
            "[resource link: spec https://x/spec]",
        ),
        ({"content": [{"type": "image", "data": "not base64!"}]}, "[image]"),
        ({"content": [{"type": "hologram"}]}, "[hologram content]"),
        ({"content": []}, ""),
        ({}, ""),
    ],
    ids=[
        "texts",
        "text-and-structured",
        "structured-only",
        "image",
        "audio",
        "resources",
        "resource-link",
        "bad-image",
        "unknown-part",
        "empty",
        "no-content",
    ],
)
def test_what_a_result_reads_as(result: dict[str, Any], text: str) -> None:
    assert result_text(result) == text


def test_an_error_result_is_one_that_says_so() -> None:
    assert is_error({"content": [], "isError": True})
    assert not is_error({"content": []})


# ------------------------------------------------------------------ configuration


def test_a_configuration_file_gives_servers_in_codex_form_with_paths_relative_to_it(
    tmp_path: Path,
) -> None:
    file = tmp_path / "conf" / "relay.toml"
    file.parent.mkdir()
    file.write_text(
        """
[mcp_servers.docs]
command = "./bin/docs-server"
args = ["--root", "../data", "plain", "/abs"]
env = { DOCS_LANG = "en" }
env_vars = ["DOCS_TOKEN"]
cwd = "work"
startup_timeout_sec = 20
tool_timeout_sec = 1.5
enabled_tools = ["search", "read"]
disabled_tools = ["read"]

[mcp_servers.search]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "SEARCH_TOKEN"
http_headers = { "X-Team" = "docs" }
enabled = false

[mcp_servers.npx]
command = "npx"
args = ["-y", "some-server"]
""",
        encoding="utf-8",
    )
    servers = load_config(file).mcp_servers
    base = file.parent
    assert servers["docs"] == McpServerConfig(
        command=str(base / "bin/docs-server"),
        args=("--root", str(base / "../data"), "plain", "/abs"),
        env={"DOCS_LANG": "en"},
        env_vars=("DOCS_TOKEN",),
        cwd=str(base / "work"),
        startup_timeout_sec=20.0,
        tool_timeout_sec=1.5,
        enabled_tools=("search", "read"),
        disabled_tools=("read",),
    )
    assert servers["search"] == McpServerConfig(
        url="https://mcp.example.com/mcp",
        bearer_token_env_var="SEARCH_TOKEN",
        http_headers={"X-Team": "docs"},
        enabled=False,
    )
    assert servers["npx"] == McpServerConfig(command="npx", args=("-y", "some-server"))
    assert servers["npx"].startup_timeout_sec == 10 and servers["npx"].tool_timeout_sec == 60


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"comand": "x"},
            "unknown config key 'mcp_servers.s.comand' (did you mean 'mcp_servers.s.command'?)",
        ),
        (
            {"command": "x", "bearer_token": "abc"},
            "unknown config key 'mcp_servers.s.bearer_token' "
            "(did you mean 'mcp_servers.s.bearer_token_env_var'?)",
        ),
        (
            {},
            "mcp_servers.s has neither of command and url: give command for a server relay "
            "starts (stdio) or url for a streamable-HTTP server",
        ),
        ({"command": "x", "url": "http://h/mcp"}, "mcp_servers.s has both of command and url"),
        (
            {"url": "http://h/mcp", "cwd": "/tmp"},
            "mcp_servers.s.cwd is for a stdio server (command); this one has a url",
        ),
        (
            {"command": "x", "bearer_token_env_var": "T"},
            "mcp_servers.s.bearer_token_env_var is for an HTTP server (url); this one is stdio",
        ),
        ({"command": " "}, "mcp_servers.s.command is empty"),
        (
            {"url": "ftp://h/mcp"},
            "mcp_servers.s.url must start with http:// or https://, got 'ftp://h/mcp'",
        ),
        (
            {"command": "x", "tool_timeout_sec": 0},
            "mcp_servers.s.tool_timeout_sec must be a positive number of seconds, got 0.0",
        ),
        (
            {"command": "x", "startup_timeout_sec": -1},
            "mcp_servers.s.startup_timeout_sec must be a positive number of seconds, got -1.0",
        ),
        (
            {"command": "x", "startup_timeout_sec": True},
            "expected float @ $.mcp_servers['s'].startup_timeout_sec",
        ),
        (
            {"command": "x", "enabled_tools": "search"},
            "@ $.mcp_servers['s'].enabled_tools",
        ),
        (
            {"url": "http://h/mcp", "tool_output_max_bytes": 100},
            "mcp_servers.s.tool_output_max_bytes must be a number of bytes of at least 4096, "
            "got 100",
        ),
    ],
)
def test_a_wrong_table_is_an_error_naming_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(relay.ConfigError) as info:
        config_from_dict({"mcp_servers": {"s": table}})
    assert message in str(info.value)


def test_a_server_name_must_fit_in_a_tool_name() -> None:
    with pytest.raises(relay.ConfigError, match=r"mcp_servers\.my\.server: a server's name"):
        config_from_dict({"mcp_servers": {"my.server": {"command": "x"}}})


def test_session_configured_says_nothing_of_servers_when_there_is_none() -> None:
    base = ("s-1", "m", "scripted", None, "/w", None, "1.0")
    assert "mcp_servers" not in to_json(relay.SessionConfigured(*base))
    with_servers = relay.SessionConfigured(*base, mcp_servers={"docs": 3})
    assert to_json(with_servers)["mcp_servers"] == {"docs": 3}


# ------------------------------------------------------------------ answers


def test_lines_are_cut_at_the_bound_and_an_overlong_one_is_skipped_to_its_end() -> None:
    lines = Lines(8)
    fed = [list(lines.feed(chunk)) for chunk in (b"ab\ncd", b"ef\n0123", b"456789", b"xyz\nok\n")]
    assert fed == [[b"ab"], [b"cdef"], [Overlong(b"0123456789")], [b"ok"]]
    # A line that passes the bound and ends in the same chunk.
    assert list(Lines(4).feed(b"12345678\nab\n")) == [Overlong(b"12345678"), b"ab"]
    assert list(Lines(4).feed(b"1234\n")) == [b"1234"]


def test_the_ids_an_answer_names_are_read_from_its_bytes() -> None:
    head = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"id": "x\\"y"}, {"id" : -3}]}}'
    assert answer_ids(head) == [7, 'x\\"y', -3]
    assert answer_ids(b'{"id":1.5}{"id":12345678901234567890}') == []


@pytest.mark.parametrize(
    ("detail", "line", "why"),
    [
        (None, b'{"a":1}', "it is not a JSON-RPC message"),
        ("x", b'{"t":"caf\xe9"}', "it is not UTF-8 (byte 0xe9 at offset 9)"),
        ("unexpected end of hex escape", b'"\\udc00"', "it holds \\udc00, the escape"),
        ("unexpected end of hex escape", b'"\\ud800\\udc00\\ud801"', "it holds \\ud801,"),
        ("recursion limit exceeded at 1", b"[[", "it is JSON nested deeper than relay reads"),
        ("expected value at line 1 column 1", b"hello", "it is not JSON (expected value"),
    ],
)
def test_why_an_answer_cannot_be_read(detail: str | None, line: bytes, why: str) -> None:
    assert why_json(detail, line).startswith(why)


def test_why_an_http_answer_cannot_be_read_is_read_from_the_transports_message() -> None:
    message = (
        "Failed to parse JSON response: 1 validation error for union[...]\n  Invalid JSON: "
        "invalid unicode code point at line 1 column 72 [type=json_invalid, input_value=b'']"
    )
    assert why_reported(message) == (
        "it is not UTF-8 (invalid unicode code point at line 1 column 72)"
    )
    assert why_reported("Failed to parse SSE message: 2 validation errors") == (
        "it is not a JSON-RPC message"
    )


# ------------------------------------------------------------------ without the extra


async def test_without_the_mcp_extra_a_configured_server_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    config = relay.Config(
        rollout=relay.RolloutConfig(enabled=False),
        mcp_servers={"docs": McpServerConfig(command="docs-server")},
    )
    with pytest.raises(relay.ConfigError) as info:
        async with testing.open_test_session({}, config=config):
            pass
    assert str(info.value) == (
        "MCP servers are configured (docs) and the mcp package is not installed (mcp is "
        "missing): pip install 'relay-runtime[mcp]'"
    )
    # A server that is switched off needs nothing.
    off = {"docs": McpServerConfig(command="docs-server", enabled=False)}
    async with testing.open_test_session({}, config=relay.Config(mcp_servers=off)) as t:
        assert t.session.config.mcp_servers == off


# ------------------------------------------------------------------ a server's list changes


def test_what_a_new_list_changed_is_one_sentence_or_nothing() -> None:
    listing = pytest.importorskip("relay._mcp._listing")
    before = {"mcp__s__a": 1, "mcp__s__b": 2, "mcp__s__c": 3}
    assert listing.tools_changed("s", before, dict(before)) is None
    assert listing.tools_changed("s", before, dict(before), ["x"]) is None
    after = {"mcp__s__a": 1, "mcp__s__c": 30, "mcp__s__d": 4, "mcp__s__e": 5}
    assert listing.tools_changed("s", before, after, ["x"]) == (
        "MCP server 's' now offers 4 tools (it offered 3): added mcp__s__d, mcp__s__e; "
        "removed mcp__s__b; changed mcp__s__c; left out 'x', whose names another tool has."
    )
    assert listing.tools_changed("s", {"mcp__s__a": 1}, {}) == (
        "MCP server 's' now offers 0 tools (it offered 1): removed mcp__s__a."
    )
    assert listing.tools_changed("s", {}, {"mcp__s__a": 1}) == (
        "MCP server 's' now offers 1 tool (it offered 0): added mcp__s__a."
    )


class _Server:
    """A server as the offer sees it: its names for its tools."""

    def __init__(self, name: str, tools: list[str], description: str = "") -> None:
        self.name = name
        self.names = tools
        self.description = description

    def tools(self, taken: Any) -> tuple[list[Any], list[str]]:
        async def handler(args: Any, ctx: Any) -> str:
            return ""

        made, skipped = [], []
        for tool, name in qualify(self.name, self.names, taken):
            if name is None:
                skipped.append(tool)
            else:
                made.append(relay.Tool(name, self.description, {}, handler))
        return made, skipped


def test_a_new_list_takes_the_old_ones_place_in_the_registry_with_one_notice() -> None:
    listing = pytest.importorskip("relay._mcp._listing")

    async def handler(args: Any, ctx: Any) -> str:
        return ""

    registry = ToolRegistry({"shell": relay.Tool("shell", "", {}, handler)})
    offer = listing.Offer(registry)
    server = _Server("s", ["a", "b", "c"])
    assert offer.first(server) == (3, [], 0)
    specs = registry.specs()
    # The same list again changes nothing: the requests keep the same tools, and nothing is
    # reported.
    offer.relisted(server)
    assert registry.specs() is specs and registry.take_notices() == []
    # A tool that stays keeps its place; a new one comes last.
    server.names = ["c", "a", "d"]
    offer.relisted(server)
    assert registry.names() == ["shell", "mcp__s__a", "mcp__s__c", "mcp__s__d"]
    assert registry.take_notices() == [
        "MCP server 's' now offers 3 tools (it offered 3): added mcp__s__d; removed mcp__s__b."
    ]
    assert registry.take_notices() == []
    # A server not offered yet (still starting) is left to its first listing.
    offer.relisted(_Server("late", ["x"]))
    assert "mcp__late__x" not in registry.names() and registry.take_notices() == []
