"""relay's events as Codex's ``exec --experimental-json`` events: the pure fold, no event loop."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._errors import ErrorCode
from relay._cli._codex_stream import (
    CodexExecStream,
    command_result,
    shell_command,
    split_mcp_name,
)


def fold(*msgs: tuple[str, p.EventMsg]) -> list[dict[str, Any]]:
    stream = CodexExecStream()
    lines: list[dict[str, Any]] = []
    for seq, (event_id, msg) in enumerate(msgs, start=1):
        lines += stream.translate(p.Event(event_id, seq, msg))
    return lines


def configured(*servers: str) -> tuple[str, p.EventMsg]:
    return "session", p.SessionConfigured(
        session_id="s-1",
        model="m",
        model_provider="scripted",
        model_context_window=None,
        cwd="/w",
        rollout_path=None,
        relay_version="0",
        mcp_servers=dict.fromkeys(servers, 1),
    )


def started(turn: str = "t1") -> tuple[str, p.EventMsg]:
    return turn, p.TurnStarted(turn_id=turn, model_context_window=None, started_at=0.0)


def item(
    kind: type[p.ItemStarted] | type[p.ItemCompleted], what: p.TurnItem
) -> tuple[str, p.EventMsg]:
    return "t1", kind(turn_id="t1", item=what)


def usage(inp: int, cached: int, out: int, reasoning: int = 0) -> p.TokenUsage:
    return p.TokenUsage(inp, cached, out, reasoning, inp + out)


def count(total: p.TokenUsage, last: p.TokenUsage) -> tuple[str, p.EventMsg]:
    return "t1", p.TokenCount(p.TokenUsageInfo(total, last, None))


def complete(turn: str = "t1") -> tuple[str, p.EventMsg]:
    return turn, p.TurnComplete(turn_id=turn, last_agent_message=None, duration_ms=1)


SHELL = json.dumps({"argv": ["sh", "-c", "echo hi; exit 3"]})


def test_a_turn_with_reasoning_tools_and_an_answer_is_codexs_stream() -> None:
    lines = fold(
        configured(),
        started(),
        item(p.ItemStarted, p.UserMessageItem("user-1", [p.Text("go")])),
        item(p.ItemCompleted, p.UserMessageItem("user-1", [p.Text("go")])),
        ("t1", p.UserMessage("go")),
        item(p.ItemStarted, p.ReasoningItem("rs-1", ["I will list."])),
        item(p.ItemCompleted, p.ReasoningItem("rs-1", ["I will list.", "Then run."])),
        count(usage(100, 40, 10, 4), usage(100, 40, 10, 4)),
        item(p.ItemStarted, p.ToolCallItem("c1", "list_dir", '{"path": "."}')),
        item(p.ItemStarted, p.ToolCallItem("c2", "shell", SHELL)),
        item(p.ItemCompleted, p.ToolCallItem("c1", "list_dir", '{"path": "."}', "a.txt")),
        item(p.ItemCompleted, p.ToolCallItem("c2", "shell", SHELL, "hi\n\n[exit code 3]")),
        item(p.ItemStarted, p.AgentMessageItem("m1", "")),
        ("t1", p.AgentMessageDelta("t1", "m1", "done")),
        item(p.ItemCompleted, p.AgentMessageItem("m1", "done")),
        ("t1", p.AgentMessage("done")),
        count(usage(300, 190, 15, 4), usage(200, 150, 5)),
        complete(),
        ("sub-2", p.ShutdownComplete()),
    )
    relay_tool = {"server": "relay", "tool": "list_dir", "arguments": {"path": "."}}
    assert lines == [
        {"type": "thread.started", "thread_id": "s-1"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "reasoning", "text": "I will list.\nThen run."},
        },
        {
            "type": "item.started",
            "item": {
                "id": "item_1",
                "type": "mcp_tool_call",
                **relay_tool,
                "result": None,
                "error": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.started",
            "item": {
                "id": "item_2",
                "type": "command_execution",
                "command": "sh -c 'echo hi; exit 3'",
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "mcp_tool_call",
                **relay_tool,
                "result": {
                    "content": [{"type": "text", "text": "a.txt"}],
                    "structured_content": None,
                },
                "error": None,
                "status": "completed",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_2",
                "type": "command_execution",
                "command": "sh -c 'echo hi; exit 3'",
                "aggregated_output": "hi\n",
                "exit_code": 3,
                "status": "failed",
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "item_3", "type": "agent_message", "text": "done"},
        },
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 300,
                "cached_input_tokens": 190,
                "cache_write_input_tokens": 0,
                "output_tokens": 15,
                "reasoning_output_tokens": 4,
            },
        },
    ]


def test_an_mcp_servers_tool_names_its_server_and_a_failed_call_its_error() -> None:
    name = "mcp__docs_v2__search__deep"
    lines = fold(
        configured("docs.v2", "docs"),
        started(),
        item(p.ItemStarted, p.ToolCallItem("c1", name, '{"q": "x"}')),
        item(p.ItemCompleted, p.ToolCallItem("c1", name, '{"q": "x"}', "error: MCP error -1: no")),
    )
    assert lines[2:] == [
        {
            "type": "item.started",
            "item": {
                "id": "item_0",
                "type": "mcp_tool_call",
                "server": "docs.v2",
                "tool": "search__deep",
                "arguments": {"q": "x"},
                "result": None,
                "error": None,
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "mcp_tool_call",
                "server": "docs.v2",
                "tool": "search__deep",
                "arguments": {"q": "x"},
                "result": None,
                "error": {"message": "MCP error -1: no"},
                "status": "failed",
            },
        },
    ]


def test_a_failed_turn_carries_its_first_errors_message() -> None:
    lines = fold(
        configured(),
        started(),
        ("t1", p.StreamErrorEvent("Reconnecting... 1/5", "server_error: overloaded")),
        ("t1", p.WarningEvent("the model repeated a call")),
        ("t1", p.ErrorEvent("the request was refused", ErrorCode.BAD_REQUEST)),
        ("t1", p.ErrorEvent("and something else", ErrorCode.INTERNAL)),
        complete(),
    )
    assert lines == [
        {"type": "thread.started", "thread_id": "s-1"},
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/5 (server_error: overloaded)"},
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "error", "message": "the model repeated a call"},
        },
        {"type": "error", "message": "the request was refused"},
        {"type": "error", "message": "and something else"},
        {"type": "turn.failed", "error": {"message": "the request was refused"}},
    ]


def test_an_aborted_turn_ends_failed_and_usage_before_any_count_is_zero() -> None:
    aborted = p.TurnAborted(turn_id="t2", reason=p.AbortReason.SHUTDOWN, duration_ms=3)
    lines = fold(configured(), started(), complete(), started("t2"), ("t2", aborted))
    assert lines[2:] == [
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": 0,
                "cached_input_tokens": 0,
                "cache_write_input_tokens": 0,
                "output_tokens": 0,
                "reasoning_output_tokens": 0,
            },
        },
        {"type": "turn.started"},
        {"type": "turn.failed", "error": {"message": "the turn was aborted (shutdown)"}},
    ]


def test_empty_reasoning_and_events_without_a_counterpart_write_nothing() -> None:
    compaction = p.ContextCompactionItem("cc-1")
    assert (
        fold(
            item(p.ItemCompleted, p.ReasoningItem("rs-1", [" "])),
            item(p.ItemStarted, compaction),
            item(p.ItemCompleted, compaction),
            ("t1", p.ContextCompacted()),
            ("t1", p.BackgroundEvent("compacting")),
            ("t1", p.TokenCount(None)),
            ("t1", p.WorkStateNoted("read", "a.txt")),
        )
        == []
    )


def test_shell_outputs_read_as_exit_codes_and_statuses() -> None:
    assert command_result("a\n\n[exit code 0]") == ("a\n", 0, "completed")
    assert command_result("x\n[output truncated at 65536 bytes of 99999]\n[exit code 1]") == (
        "x\n[output truncated at 65536 bytes of 99999]",
        1,
        "failed",
    )
    assert command_result("slow\n\n[timed out after 100 ms; process killed]") == (
        "slow\n",
        None,
        "failed",
    )
    assert command_result("error: cannot start 'nope': No such file or directory") == (
        "cannot start 'nope': No such file or directory",
        None,
        "failed",
    )
    assert command_result("aborted") == ("", None, "failed")
    assert shell_command('{"argv": ["ls", "a b"]}') == "ls 'a b'"
    assert shell_command("not json") == "not json"
    assert shell_command('{"argv": "ls"}') == '{"argv": "ls"}'


@given(st.text(), st.integers(-255, 255))
def test_any_output_of_a_finished_command_is_given_back_whole(text: str, code: int) -> None:
    output, exit_code, status = command_result(f"{text}\n[exit code {code}]")
    assert (output, exit_code) == (text, code)
    assert status == ("completed" if code == 0 else "failed")


def test_mcp_names_split_by_the_servers_known_else_at_the_delimiter() -> None:
    assert split_mcp_name("mcp__a__b__c", ["a__b"]) == ("a__b", "c")
    assert split_mcp_name("mcp__a__b__c", []) == ("a", "b__c")
    assert split_mcp_name("mcp__a", []) is None
    assert split_mcp_name("read_file", ["x"]) is None
