"""relay's events as the app-server's notifications and items: plain functions, no event loop.
Every notification made is checked against Codex 0.169's schema too."""

from __future__ import annotations

import json
from typing import Any

import relay
from relay._appserver import _items, _params
from relay._appserver._notes import Translator
from relay._base import _protocol as p
from relay._base._errors import ErrorCode

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
        completed(shell_call("total 0\n[exit code 0]")),
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


def test_shell_outputs_read_as_exit_codes() -> None:
    assert _items.shell_outcome("out\n[exit code 3]") == ("out", 3, False)
    assert _items.shell_outcome("[exit code 0]") == ("", 0, True)
    assert _items.shell_outcome("x\n[timed out after 5 ms; process killed]") == ("x", None, False)
    assert _items.shell_outcome("error: argv must be a list") == (
        "error: argv must be a list",
        None,
        False,
    )
    assert _items.shell_command('{"argv": ["echo", "a;b"]}') == "echo 'a;b'"
    assert _items.shell_command("not json") == "not json"


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
        p.ToolCallItem("c", "read_file", "{}", "error: no such file: a"), cwd="/"
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
