"""relay's events as the app-server's notifications and items: plain functions, no event loop.
Every notification made is checked against Codex 0.169's schema too."""

from __future__ import annotations

import json
from typing import Any

import attrs

import relay
from relay._appserver import _params
from relay._appserver._notes import Translator
from relay._base import _protocol as p
from relay._base._errors import ErrorCode
from relay._codex import _items
from relay._codex._calls import shell_command

from .schema import check_message

THREAD = "thread-1"
TURN = "turn-1"
NOW = 1_800_000_000_000


def event(msg: p.EventMsg, id: str = TURN) -> p.Event:
    return p.Event(id=id, seq=1, msg=msg)


def run(translator: Translator, *msgs: p.EventMsg, step_ms: int = 10) -> list[dict[str, Any]]:
    """The notifications of ``msgs`` in order, the clock moving ``step_ms`` per event."""
    made = []
    for n, msg in enumerate(msgs):
        for message in translator.translate(event(msg), NOW + n * step_ms):
            check_message(message, {})
            made.append(message)
    return made


def mcp_tool(name: str) -> tuple[str, str] | None:
    """The session's MCP tools, as a test's: ``mcp__docs__search`` is ``docs``'s."""
    return {"mcp__docs__search": ("docs", "search")}.get(name)


def translator() -> Translator:
    return Translator(THREAD, "/work", mcp_tool)


def shell_call(output: str | None, argv: list[str] | None = None) -> p.ToolCallItem:
    arguments = json.dumps({"argv": argv or ["ls", "-l", "a b"]})
    return p.ToolCallItem("c1", "shell", arguments, output)


def started(item: p.TurnItem) -> p.ItemStarted:
    return p.ItemStarted(TURN, item)


def completed(item: p.TurnItem) -> p.ItemCompleted:
    return p.ItemCompleted(TURN, item)


def test_a_turn_with_a_command_is_started_items_and_completed() -> None:
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1_800_000_000.5),
        started(p.UserMessageItem("u1", [p.Text("list it"), p.Image("data:image/png;base64,AA")])),
        started(shell_call(None)),
        completed(
            attrs.evolve(
                shell_call("total 0\n[exit code 0]"),
                result=p.ToolResult(p.CallStatus.COMPLETED, 0, printed="total 0"),
            )
        ),
        p.AgentMessageDelta(TURN, "m1", "Done"),
        completed(p.AgentMessageItem("m1", "Done")),
        p.TurnComplete(TURN, "Done", duration_ms=60),
    )
    assert made == [
        {
            "method": "turn/started",
            "params": {
                "threadId": THREAD,
                "turn": {
                    "id": TURN,
                    "items": [],
                    "itemsView": "notLoaded",
                    "status": "inProgress",
                    "error": None,
                    "startedAt": 1_800_000_000,
                    "completedAt": None,
                    "durationMs": None,
                },
            },
        },
        {
            "method": "item/started",
            "params": {
                "item": {
                    "type": "userMessage",
                    "id": "u1",
                    "content": [
                        {"type": "text", "text": "list it", "text_elements": []},
                        {"type": "image", "url": "data:image/png;base64,AA"},
                    ],
                },
                "threadId": THREAD,
                "turnId": TURN,
                "startedAtMs": NOW + 10,
            },
        },
        {
            "method": "item/started",
            "params": {
                "item": {
                    "type": "commandExecution",
                    "id": "c1",
                    "command": "ls -l 'a b'",
                    "cwd": "/work",
                    "processId": None,
                    "source": "agent",
                    "status": "inProgress",
                    "commandActions": [{"type": "unknown", "command": "ls -l 'a b'"}],
                    "aggregatedOutput": None,
                    "exitCode": None,
                    "durationMs": None,
                },
                "threadId": THREAD,
                "turnId": TURN,
                "startedAtMs": NOW + 20,
            },
        },
        {
            "method": "item/completed",
            "params": {
                "item": {
                    "type": "commandExecution",
                    "id": "c1",
                    "command": "ls -l 'a b'",
                    "cwd": "/work",
                    "processId": None,
                    "source": "agent",
                    "status": "completed",
                    "commandActions": [{"type": "unknown", "command": "ls -l 'a b'"}],
                    "aggregatedOutput": "total 0",
                    "exitCode": 0,
                    "durationMs": 10,
                },
                "threadId": THREAD,
                "turnId": TURN,
                "completedAtMs": NOW + 30,
            },
        },
        {
            "method": "item/agentMessage/delta",
            "params": {"threadId": THREAD, "turnId": TURN, "itemId": "m1", "delta": "Done"},
        },
        {
            "method": "item/completed",
            "params": {
                "item": {"type": "agentMessage", "id": "m1", "text": "Done"},
                "threadId": THREAD,
                "turnId": TURN,
                "completedAtMs": NOW + 50,
            },
        },
        {
            "method": "turn/completed",
            "params": {
                "threadId": THREAD,
                "turn": {
                    "id": TURN,
                    "items": [{"type": "agentMessage", "id": "m1", "text": "Done"}],
                    "itemsView": "summary",
                    "status": "completed",
                    "error": None,
                    "startedAt": 1_800_000_000,
                    "completedAt": (NOW + 60) // 1000,
                    "durationMs": 60,
                },
            },
        },
    ]


def test_an_error_fails_the_turn_and_a_retry_does_not() -> None:
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1.0),
        p.StreamErrorEvent("Reconnecting... 1/5", "connection reset"),
        p.ErrorEvent("the context window is full", ErrorCode.CONTEXT_WINDOW_EXCEEDED),
        p.TurnComplete(TURN, None, duration_ms=5),
    )
    assert [m["method"] for m in made] == ["turn/started", "error", "error", "turn/completed"]
    retry, error = made[1]["params"], made[2]["params"]
    assert retry["willRetry"] is True and retry["error"]["additionalDetails"] == "connection reset"
    assert error == {
        "error": {
            "message": "the context window is full",
            "codexErrorInfo": "contextWindowExceeded",
        },
        "threadId": THREAD,
        "turnId": TURN,
        "willRetry": False,
    }
    turn = made[3]["params"]["turn"]
    assert turn["status"] == "failed" and turn["error"] == error["error"]


def test_an_abort_ends_the_calls_it_cut_short_then_the_turn_interrupted() -> None:
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1.0),
        started(shell_call(None, ["sleep", "300"])),
        started(p.ToolCallItem("c2", "mcp__docs__search", '{"q": "x"}')),
        p.TurnAborted(TURN, p.AbortReason.INTERRUPTED, duration_ms=30),
    )
    assert [m["method"] for m in made] == [
        "turn/started",
        "item/started",
        "item/started",
        "item/completed",
        "item/completed",
        "turn/completed",
    ]
    command, search = (m["params"]["item"] for m in made[3:5])
    assert (command["id"], command["status"], command["exitCode"]) == ("c1", "failed", None)
    assert (search["type"], search["server"], search["tool"]) == ("mcpToolCall", "docs", "search")
    assert search["status"] == "failed" and search["error"] == {"message": "aborted"}
    assert made[-1]["params"]["turn"]["status"] == "interrupted"


def test_token_counts_and_warnings_are_the_thread_s() -> None:
    usage = p.TokenUsage(10, 2, 5, 1, 15)
    made = run(
        translator(),
        p.TokenCount(p.TokenUsageInfo(usage, usage, 1000)),
        p.TokenCount(None),
        p.WarningEvent("heads up"),
        p.AgentMessage("legacy mirror"),
    )
    breakdown = {
        "totalTokens": 15,
        "inputTokens": 10,
        "cachedInputTokens": 2,
        "outputTokens": 5,
        "reasoningOutputTokens": 1,
    }
    assert made == [
        {
            "method": "thread/tokenUsage/updated",
            "params": {
                "threadId": THREAD,
                "turnId": TURN,
                "tokenUsage": {"total": breakdown, "last": breakdown, "modelContextWindow": 1000},
            },
        },
        {"method": "warning", "params": {"threadId": THREAD, "message": "heads up"}},
    ]


def test_the_working_directory_of_commands_is_the_session_s() -> None:
    notes = translator()
    configured = p.SessionConfigured("s", "m", "scripted", None, "/elsewhere", None, "0")
    run(notes, configured)
    assert notes.cwd == "/elsewhere"


def test_a_commands_item_reads_how_it_ended_from_its_result() -> None:
    def command(output: str, result: p.ToolResult | None) -> dict[str, Any]:
        return _items.tool_call(
            shell_call(output)
            if result is None
            else attrs.evolve(shell_call(output), result=result),
            cwd="/",
        )

    made = command("out\n[exit code 0]", p.ToolResult(p.CallStatus.FAILED, 3, printed="out"))
    assert (made["aggregatedOutput"], made["exitCode"], made["status"]) == ("out", 3, "failed")
    made = command("x", p.ToolResult(p.CallStatus.COMPLETED, 0, duration_ms=7, printed="x"))
    assert (made["status"], made["durationMs"]) == ("completed", 7)
    made = command("denied", p.ToolResult(p.CallStatus.DECLINED))
    assert (made["status"], made["aggregatedOutput"], made["exitCode"]) == ("declined", None, None)
    made = command("error: command must be a list", p.ToolResult(p.CallStatus.FAILED))
    assert (made["status"], made["aggregatedOutput"]) == ("failed", None)
    assert shell_command('{"argv": ["echo", "a;b"]}') == "echo 'a;b'"
    assert shell_command('{"command": ["echo", "a;b"]}') == "echo 'a;b'"
    assert shell_command("not json") == "not json"


def test_tools_other_than_shell_and_mcp_are_dynamic_tool_calls() -> None:
    done = _items.tool_call(p.ToolCallItem("c", "read_file", '{"path": "a"}', "text"), cwd="/")
    assert done == {
        "type": "dynamicToolCall",
        "id": "c",
        "tool": "read_file",
        "arguments": {"path": "a"},
        "status": "completed",
        "contentItems": [{"type": "inputText", "text": "text"}],
        "success": True,
        "durationMs": None,
    }
    failed = _items.tool_call(
        p.ToolCallItem(
            "c", "read_file", "{}", "error: no such file: a", p.ToolResult(p.CallStatus.FAILED)
        ),
        cwd="/",
    )
    assert (failed["status"], failed["success"]) == ("failed", False)


def test_a_declined_command_ends_declined() -> None:
    notes = translator()
    notes.declined.add("c1")
    made = run(
        notes,
        p.TurnStarted(TURN, None, started_at=1.0),
        started(shell_call(None)),
        completed(shell_call("denied by the user")),
    )
    assert made[-1]["params"]["item"]["status"] == "declined"


def test_every_input_item_has_a_part() -> None:
    parts = [
        _items.input_part(item)
        for item in (relay.Text("a"), relay.Image("https://x/y.png"), relay.LocalImage("p.png"))
    ]
    assert parts == [
        {"type": "text", "text": "a", "text_elements": []},
        {"type": "image", "url": "https://x/y.png"},
        {"type": "localImage", "path": "p.png"},
    ]


def test_an_approval_request_is_a_server_request_until_resolved() -> None:
    notes = translator()
    tool = p.ToolInvocation("docs", "search", {"q": "x"})
    made = run(
        notes,
        p.TurnStarted(TURN, None, started_at=1.0),
        p.ExecApprovalRequest("c1", TURN, ("rm", "-r", "a b"), "/work", "not read-only"),
        p.ExecApprovalRequest("c2", TURN, tool, "/work"),
    )
    first, second = made[1], made[2]
    assert first == {
        "id": f"{THREAD}:approval-1",
        "method": "item/commandExecution/requestApproval",
        "params": {
            "threadId": THREAD,
            "turnId": TURN,
            "itemId": "c1",
            "startedAtMs": NOW + 10,
            "command": "rm -r 'a b'",
            "cwd": "/work",
            "reason": "not read-only",
            "commandActions": [{"type": "unknown", "command": "rm -r 'a b'"}],
        },
    }
    assert second["params"]["command"] == 'docs.search {"q": "x"}'
    resolved = notes.resolve(first["id"], declined=True)
    assert resolved == (
        "c1",
        {
            "method": "serverRequest/resolved",
            "params": {"threadId": THREAD, "requestId": first["id"]},
        },
    )
    assert notes.resolve(first["id"], declined=False) is None
    assert notes.declined == {"c1"}
    ended = run(notes, p.TurnAborted(TURN, p.AbortReason.INTERRUPTED, duration_ms=1))
    assert [m["method"] for m in ended] == ["serverRequest/resolved", "turn/completed"]
    assert ended[0]["params"]["requestId"] == second["id"] and notes.asked == {}


def test_the_client_s_decisions_are_relay_s() -> None:
    decide = _params.approval_decision
    assert decide({"decision": "accept"}, None) == (p.ReviewDecision.APPROVED, None)
    assert decide({"decision": "acceptForSession"}, None)[0] is (
        p.ReviewDecision.APPROVED_FOR_SESSION
    )
    assert decide({"decision": "decline"}, None)[0] is p.ReviewDecision.DENIED
    assert decide({"decision": "cancel"}, None)[0] is p.ReviewDecision.ABORT
    amended = {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}}
    assert decide(amended, None)[0] is p.ReviewDecision.APPROVED_FOR_SESSION
    for result, error in (({"decision": "maybe"}, None), (None, {"code": 1}), ("accept", None)):
        decision, wrong = decide(result, error)
        assert decision is p.ReviewDecision.DENIED and wrong


# ------------------------------------------------------------------- streams, patches, plan

CHANGE = p.FileChange(
    "/work/a.py", p.ChangeKind.UPDATE, "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n"
)
ADDED = p.FileChange(
    "/work/n.py", p.ChangeKind.ADD, "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n"
)


def methods(made: list[dict[str, Any]]) -> list[str]:
    return [m["method"] for m in made]


def test_deltas_stream_as_their_notifications() -> None:
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1.0),
        p.ReasoningSummaryDelta(TURN, "r1", "Think", summary_index=1),
        p.ExecCommandOutputDelta(TURN, "c1", p.OutputStream.STDOUT, "line\n"),
    )
    assert made[1]["method"] == "item/reasoning/summaryPartAdded"
    assert made[2]["method"] == "item/reasoning/summaryTextDelta"
    assert made[2]["params"] == {
        "threadId": THREAD,
        "turnId": TURN,
        "itemId": "r1",
        "delta": "Think",
        "summaryIndex": 1,
    }
    assert made[3]["method"] == "item/commandExecution/outputDelta"
    assert made[3]["params"] == {
        "threadId": THREAD,
        "turnId": TURN,
        "itemId": "c1",
        "delta": "line\n",
    }


def test_a_patch_is_a_file_change_item_and_the_turn_s_diff_follows() -> None:
    patch = p.ToolCallItem("c1", "apply_patch", '{"input": "*** Begin Patch"}')
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1.0),
        started(patch),
        p.PatchApplyBegin("c1", TURN, [CHANGE, ADDED], auto_approved=True),
        p.PatchApplyEnd("c1", TURN, True, [CHANGE, ADDED], "Done"),
        p.TurnDiff(TURN, "the diff"),
        completed(attrs.evolve(patch, output="Done", result=p.ToolResult(p.CallStatus.COMPLETED))),
    )
    assert methods(made) == ["turn/started", "item/started", "item/completed", "turn/diff/updated"]
    item = made[2]["params"]["item"]
    assert item == {
        "type": "fileChange",
        "id": "c1",
        "status": "completed",
        "changes": [
            {
                "path": "/work/a.py",
                "kind": {"type": "update", "move_path": None},
                "diff": CHANGE.diff,
            },
            {"path": "/work/n.py", "kind": {"type": "add"}, "diff": ADDED.diff},
        ],
    }
    assert made[3]["params"] == {"threadId": THREAD, "turnId": TURN, "diff": "the diff"}


def test_a_patch_that_asks_starts_its_item_and_a_declined_one_ends_declined() -> None:
    notes = translator()
    patch = p.ToolCallItem("c1", "apply_patch", "{}")
    asked = p.ApplyPatchApprovalRequest("c1", TURN, [CHANGE], reason="outside", grant_root=None)
    made = run(notes, p.TurnStarted(TURN, None, started_at=1.0), started(patch), asked)
    assert methods(made) == ["turn/started", "item/started", "item/fileChange/requestApproval"]
    request_id = made[2]["id"]
    assert made[2]["params"]["itemId"] == "c1" and made[2]["params"]["reason"] == "outside"
    found = notes.resolve(request_id, declined=True)
    assert found is not None and found[0] == "c1"
    assert notes.decision_op("c1", p.ReviewDecision.DENIED) == p.PatchApproval("c1", "denied")
    assert notes.decision_op("c9", p.ReviewDecision.DENIED) == p.ExecApproval("c9", "denied")
    declined = attrs.evolve(patch, output="denied", result=p.ToolResult(p.CallStatus.DECLINED))
    ended = run(notes, completed(declined))
    assert methods(ended) == ["item/completed"]
    assert ended[0]["params"]["item"]["status"] == "declined"
    assert ended[0]["params"]["item"]["changes"][0]["path"] == "/work/a.py"


def test_a_patch_that_never_began_has_no_item_as_in_codex() -> None:
    patch = p.ToolCallItem("c1", "apply_patch", '{"input": "nonsense"}')
    failed = attrs.evolve(
        patch, output="error: not a patch", result=p.ToolResult(p.CallStatus.FAILED)
    )
    made = run(
        translator(), p.TurnStarted(TURN, None, started_at=1.0), started(patch), completed(failed)
    )
    assert methods(made) == ["turn/started"]


def test_the_plan_is_turn_plan_updated_and_its_call_has_no_item() -> None:
    call = p.ToolCallItem("c2", "update_plan", "{}")
    steps = [
        p.PlanStep("read", "completed"),
        p.PlanStep("edit", "in_progress"),
        p.PlanStep("test", "pending"),
    ]
    made = run(
        translator(),
        p.TurnStarted(TURN, None, started_at=1.0),
        started(call),
        p.PlanUpdate(TURN, steps, "because"),
        completed(attrs.evolve(call, output="Plan updated")),
    )
    assert methods(made) == ["turn/started", "turn/plan/updated"]
    assert made[1]["params"] == {
        "threadId": THREAD,
        "turnId": TURN,
        "explanation": "because",
        "plan": [
            {"step": "read", "status": "completed"},
            {"step": "edit", "status": "inProgress"},
            {"step": "test", "status": "pending"},
        ],
    }
