"""relay's events as Codex's ``exec --experimental-json`` events: the pure fold, no event loop."""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._errors import ErrorCode
from relay._cli._codex_stream import CodexExecStream
from relay._codex._calls import shell_command, split_mcp_name


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


SHELL = json.dumps({"command": ["sh", "-c", "echo hi; exit 3"]})
DONE = p.ToolResult(p.CallStatus.COMPLETED)
EXIT_3 = p.ToolResult(p.CallStatus.FAILED, 3, printed="hi\n")


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
        item(p.ItemCompleted, p.ToolCallItem("c1", "list_dir", '{"path": "."}', "a.txt", DONE)),
        item(p.ItemCompleted, p.ToolCallItem("c2", "shell", SHELL, "hi\n\n[exit code 3]", EXIT_3)),
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
        item(
            p.ItemCompleted,
            p.ToolCallItem(
                "c1",
                name,
                '{"q": "x"}',
                "error: MCP error -1: no",
                p.ToolResult(p.CallStatus.FAILED),
            ),
        ),
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


def test_a_commands_end_is_read_from_its_result_never_from_its_output() -> None:
    def ended(output: str, result: p.ToolResult | None) -> dict[str, Any]:
        call = p.ToolCallItem("c", "shell", SHELL, output, result)
        return fold(item(p.ItemCompleted, call))[0]["item"]

    # The output's last line says one thing, the result another: the result wins.
    made = ended("x\n[exit code 0]", p.ToolResult(p.CallStatus.FAILED, 7, printed="x"))
    assert (made["aggregated_output"], made["exit_code"], made["status"]) == ("x", 7, "failed")
    timed_out = p.ToolResult(p.CallStatus.FAILED, None, timed_out=True, printed="slow\n")
    made = ended("slow\n\n[timed out after 100 ms; process killed]", timed_out)
    assert (made["aggregated_output"], made["exit_code"], made["status"]) == (
        "slow\n",
        None,
        "failed",
    )
    # A call that never ran says so: declined, or failed with nothing printed.
    made = ended("denied: the user did not approve", p.ToolResult(p.CallStatus.DECLINED))
    assert (made["status"], made["exit_code"], made["aggregated_output"]) == ("declined", None, "")
    made = ended("error: command must be a list", p.ToolResult(p.CallStatus.FAILED))
    assert (made["status"], made["exit_code"], made["aggregated_output"]) == ("failed", None, "")
    assert shell_command('{"argv": ["ls", "a b"]}') == "ls 'a b'"
    assert shell_command('{"command": ["ls", "a b"]}') == "ls 'a b'"
    assert shell_command("not json") == "not json"
    assert shell_command('{"argv": "ls"}') == '{"argv": "ls"}'


@given(st.text(), st.integers(-255, 255))
def test_any_output_of_a_finished_command_is_given_back_whole(text: str, code: int) -> None:
    status = p.CallStatus.COMPLETED if code == 0 else p.CallStatus.FAILED
    call = p.ToolCallItem("c", "shell", SHELL, "ignored", p.ToolResult(status, code, printed=text))
    made = fold(item(p.ItemCompleted, call))[0]["item"]
    assert (made["aggregated_output"], made["exit_code"]) == (text, code)
    assert made["status"] == ("completed" if code == 0 else "failed")


def test_a_patch_is_a_file_change_and_the_plan_a_todo_list() -> None:
    change = p.FileChange("/w/a.py", p.ChangeKind.UPDATE, "@@ -1 +1 @@\n-a\n+b\n")
    added = p.FileChange("/w/new.py", p.ChangeKind.ADD, "+x\n")
    patch = p.ToolCallItem("c1", "apply_patch", '{"input": "..."}')
    plan = p.ToolCallItem("c2", "update_plan", "{}")
    first = [p.PlanStep("edit", p.StepStatus.IN_PROGRESS), p.PlanStep("test", "pending")]
    second = [p.PlanStep("edit", p.StepStatus.COMPLETED), p.PlanStep("test", "in_progress")]
    lines = fold(
        configured(),
        started(),
        item(p.ItemStarted, plan),
        ("t1", p.PlanUpdate("t1", first)),
        item(p.ItemCompleted, attrs.evolve(plan, output="Plan updated", result=DONE)),
        item(p.ItemStarted, patch),
        ("t1", p.PatchApplyBegin("c1", "t1", [change, added], auto_approved=True)),
        ("t1", p.PatchApplyEnd("c1", "t1", True, [change, added])),
        ("t1", p.TurnDiff("t1", "diff")),
        item(p.ItemCompleted, attrs.evolve(patch, output="Done", result=DONE)),
        ("t1", p.PlanUpdate("t1", second)),
        complete(),
    )
    changes = [{"path": "/w/a.py", "kind": "update"}, {"path": "/w/new.py", "kind": "add"}]
    todo_first = [{"text": "edit", "completed": False}, {"text": "test", "completed": False}]
    todo_second = [{"text": "edit", "completed": True}, {"text": "test", "completed": False}]
    assert lines[2:-1] == [
        {
            "type": "item.started",
            "item": {"id": "item_0", "type": "todo_list", "items": todo_first},
        },
        {
            "type": "item.started",
            "item": {
                "id": "item_1",
                "type": "file_change",
                "changes": changes,
                "status": "in_progress",
            },
        },
        {
            "type": "item.completed",
            "item": {
                "id": "item_1",
                "type": "file_change",
                "changes": changes,
                "status": "completed",
            },
        },
        {
            "type": "item.updated",
            "item": {"id": "item_0", "type": "todo_list", "items": todo_second},
        },
        {
            "type": "item.completed",
            "item": {"id": "item_0", "type": "todo_list", "items": todo_second},
        },
    ]
    assert lines[-1]["type"] == "turn.completed"


def test_mcp_names_split_by_the_servers_known_else_at_the_delimiter() -> None:
    assert split_mcp_name("mcp__a__b__c", ["a__b"]) == ("a__b", "c")
    assert split_mcp_name("mcp__a__b__c", []) == ("a", "b__c")
    assert split_mcp_name("mcp__a", []) is None
    assert split_mcp_name("read_file", ["x"]) is None


def test_a_declined_patch_is_a_failed_file_change_and_one_that_never_began_is_none() -> None:
    change = p.FileChange("/w/b.py", p.ChangeKind.ADD, "x\n")
    declined = p.ToolCallItem("c1", "apply_patch", "{}", "denied", p.ToolResult("declined"))
    broken = p.ToolCallItem("c2", "apply_patch", "{}", "error: no", p.ToolResult("failed"))
    lines = fold(
        configured(),
        started(),
        ("t1", p.ApplyPatchApprovalRequest("c1", "t1", [change], "untrusted")),
        item(p.ItemCompleted, declined),
        item(p.ItemCompleted, broken),
        complete(),
    )
    items = [(line["type"], line["item"]["status"]) for line in lines if "item" in line]
    assert items == [("item.started", "in_progress"), ("item.completed", "failed")]
    assert lines[2]["item"]["changes"] == [{"path": "/w/b.py", "kind": "add"}]
