"""The protocol classes and their JSON codec (docs/protocol.md)."""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay._base import _protocol as p
from relay._base._codec import (
    DecodeError,
    decode_op,
    decode_response_item,
    encode_response_item,
    from_json,
    to_json,
    type_tag,
)
from relay._base._errors import ErrorCode, InvalidOpError

RECEIPT = p.CompactionReceipt(
    trigger=p.CompactionTrigger.MID_TURN,
    backend="local",
    tokens_before=120_000,
    tokens_after=9_000,
    duration_ms=42,
)
USAGE = p.TokenUsage(
    input_tokens=100,
    cached_input_tokens=40,
    output_tokens=20,
    reasoning_output_tokens=5,
    total_tokens=120,
)

RESPONSE_ITEMS: dict[type, Any] = {
    p.Message: p.Message(
        "user",
        (p.InputText("look"), p.InputImage("data:image/png;base64,AAAA")),
        id="msg-1",
        metadata={"origin": "cli", "n": 3},
    ),
    p.Reasoning: p.Reasoning(
        "rs-1",
        (p.SummaryText("thinking"),),
        (p.ReasoningText("raw thought"),),
        encrypted_content="gAAAA",
    ),
    p.FunctionCall: p.FunctionCall("read_file", '{"path": "a.txt"}', "call-1", id="fc-1"),
    p.FunctionCallOutput: p.FunctionCallOutput("call-1", "contents"),
    p.CustomToolCall: p.CustomToolCall("call-2", "apply_patch", "*** Begin Patch", id="ct-1"),
    p.CustomToolCallOutput: p.CustomToolCallOutput("call-2", "patched"),
    p.Compaction: p.Compaction("opaque-state", id="cmp-1"),
    p.GhostSnapshot: p.GhostSnapshot("0123abcd"),
    p.Other: p.Other({"type": "web_search_call", "id": "ws-1", "status": "completed"}),
}

CONTENT_PARTS: dict[type, Any] = {
    p.InputText: p.InputText("in"),
    p.OutputText: p.OutputText("out"),
    p.InputImage: p.InputImage("https://example.com/cat.png"),
}

INPUT_ITEMS: dict[type, Any] = {
    p.Text: p.Text("hello"),
    p.Image: p.Image("https://example.com/dog.png"),
    p.LocalImage: p.LocalImage("pics/dog.png"),
}

OPS: dict[type, Any] = {
    p.UserTurn: p.UserTurn(
        items=(p.Text("hi"), p.Image("https://example.com/x.png"), p.LocalImage("x.png")),
        model="gpt-5",
        cwd="/work",
        effort="high",
        on_busy=p.OnBusy.QUEUE,
        final_output_json_schema={
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
            "additionalProperties": False,
        },
    ),
    p.UserInput: p.UserInput(items=(p.Text("hi"),)),
    p.Compact: p.Compact(instructions="keep the file list"),
    p.Interrupt: p.Interrupt(),
    p.OverrideTurnContext: p.OverrideTurnContext(model="o3", cwd="/tmp", effort="low"),
    p.Unpin: p.Unpin("Always answer in French."),
    p.ExecApproval: p.ExecApproval("call_1", p.ReviewDecision.APPROVED_FOR_SESSION),
    p.PatchApproval: p.PatchApproval("call_2", p.ReviewDecision.DENIED),
    p.Shutdown: p.Shutdown(),
    p.CustomOp: p.CustomOp("review", {"path": "src/app.py", "depth": 2}, p.OnBusy.QUEUE),
}

TURN_ITEMS: dict[type, Any] = {
    p.UserMessageItem: p.UserMessageItem("u-1", (p.Text("hi"), p.LocalImage("a.png"))),
    p.AgentMessageItem: p.AgentMessageItem("a-1", "hello"),
    p.ReasoningItem: p.ReasoningItem("r-1", ("first", "second")),
    p.ToolCallItem: p.ToolCallItem(
        "call-1",
        "shell",
        '{"command": ["ls"]}',
        output="a\n[exit code 0]",
        result=p.ToolResult(p.CallStatus.COMPLETED, 0, duration_ms=4, sandboxed=True, printed="a"),
    ),
    p.AgentCallItem: p.AgentCallItem(
        "call-9",
        p.AgentTool.WAIT,
        "s-1",
        '{"ids": ["a-1"]}',
        receiver_ids=("a-1",),
        states={"a-1": p.AgentState(p.AgentStatus.COMPLETED, "found it")},
        status=p.CallStatus.COMPLETED,
        output='{"status": {"a-1": {"completed": "found it"}}, "timed_out": false}',
        result=p.ToolResult(
            p.CallStatus.COMPLETED,
            agents=p.AgentCallOutcome(
                ("a-1",), {"a-1": p.AgentState(p.AgentStatus.COMPLETED, "found it")}
            ),
        ),
    ),
    p.ContextCompactionItem: p.ContextCompactionItem("c-1", RECEIPT),
}

CHANGE = p.FileChange("/work/a.py", p.ChangeKind.UPDATE, "@@ -1 +1 @@\n-a\n+b\n", "/work/b.py")

EVENTS: dict[type, Any] = {
    p.TurnStarted: p.TurnStarted("t1", 272_000, 1_700_000_000.5),
    p.TurnComplete: p.TurnComplete("t1", '{"done": [1]}', 1234, {"done": [1]}),
    p.TurnAborted: p.TurnAborted("t1", p.AbortReason.HOOK_STOPPED, 7),
    p.ItemStarted: p.ItemStarted("t1", p.ContextCompactionItem("c-1")),
    p.ItemCompleted: p.ItemCompleted("t1", p.ToolCallItem("call-1", "ls", "{}", output="x")),
    p.AgentMessageDelta: p.AgentMessageDelta("t1", "a-1", "hel"),
    p.AgentMessage: p.AgentMessage("hello"),
    p.UserMessage: p.UserMessage("hi"),
    p.TokenCount: p.TokenCount(p.TokenUsageInfo(USAGE, p.TokenUsage(total_tokens=7), None)),
    p.ContextCompacted: p.ContextCompacted(),
    p.WarningEvent: p.WarningEvent("long sessions are less accurate"),
    p.ErrorEvent: p.ErrorEvent("too long", ErrorCode.CONTEXT_WINDOW_EXCEEDED),
    p.StreamErrorEvent: p.StreamErrorEvent("Reconnecting... 1/5", "HTTP 503"),
    p.BackgroundEvent: p.BackgroundEvent("trimmed 2 older items"),
    p.HookStarted: p.HookStarted("notify", "pre_compact"),
    p.HookCompleted: p.HookCompleted("notify", "post_compact", "timeout", 10_000),
    p.SessionResumed: p.SessionResumed("host-0", "host-1", "t1", ("sub-2",), 40),
    p.WorkStateNoted: p.WorkStateNoted("read", "src/a.py (12 bytes, sha256 0123abcd)", "src/a.py"),
    p.ExecApprovalRequest: p.ExecApprovalRequest(
        "call_1", "sub_1", ("rm", "-r", "build"), "/work", "the command is not read-only"
    ),
    p.SessionConfigured: p.SessionConfigured(
        "s-1",
        "gpt-test",
        "scripted",
        128_000,
        "/work",
        "/tmp/r.jsonl",
        "1.0",
        resumed=True,
        mcp_servers={"docs": 4},
    ),
    p.ApplyPatchApprovalRequest: p.ApplyPatchApprovalRequest(
        "call_2", "t1", (CHANGE,), "outside the writable folders", "/work"
    ),
    p.PatchApplyBegin: p.PatchApplyBegin("call_2", "t1", (CHANGE,), auto_approved=True),
    p.PatchApplyEnd: p.PatchApplyEnd("call_2", "t1", True, (CHANGE,), "M a.py"),
    p.TurnDiff: p.TurnDiff("t1", "diff --git a/a.py b/a.py\n"),
    p.PlanUpdate: p.PlanUpdate(
        "t1", (p.PlanStep("read", p.StepStatus.COMPLETED), p.PlanStep("edit", "in_progress")), "go"
    ),
    p.ExecCommandOutputDelta: p.ExecCommandOutputDelta(
        "t1", "call_1", p.OutputStream.STDOUT, "é\n"
    ),
    p.ReasoningSummaryDelta: p.ReasoningSummaryDelta("t1", "r-1", "Thinking", 1),
    p.SubAgentSpawned: p.SubAgentSpawned(
        "a-1", "/root/1", "s-1", 1, "explorer", "gpt-test", "find it", "/tmp/a.jsonl"
    ),
    p.SubAgentEnded: p.SubAgentEnded("a-1", "/root/1", p.AgentStatus.ERRORED, "HTTP 500"),
    p.ShutdownComplete: p.ShutdownComplete(),
}

UNIONS: dict[str, tuple[Any, dict[type, Any]]] = {
    "ResponseItem": (p.ResponseItem, RESPONSE_ITEMS),
    "ContentPart": (p.ContentPart, CONTENT_PARTS),
    "InputItem": (p.InputItem, INPUT_ITEMS),
    "Op": (p.Op, OPS),
    "TurnItem": (p.TurnItem, TURN_ITEMS),
    "EventMsg": (p.EventMsg, EVENTS),
}

ALL_SAMPLES: list[tuple[Any, Any]] = [
    (union, sample) for union, samples in UNIONS.values() for sample in samples.values()
]


def _sample_id(case: tuple[Any, Any]) -> str:
    return type(case[1]).__name__


def _through_text(data: Any) -> Any:
    """What a peer reading the JSON text would get back."""
    return json.loads(json.dumps(data))


# ------------------------------------------------------------------ every class has a sample


@pytest.mark.parametrize("name", sorted(UNIONS))
def test_every_union_member_has_a_sample(name: str) -> None:
    union, samples = UNIONS[name]
    members = set(typing.get_args(union))
    assert members, f"{name} is not a union"
    assert members == set(samples), f"{name}: samples differ from members"
    for cls, sample in samples.items():
        assert type(sample) is cls


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("case", ALL_SAMPLES, ids=_sample_id)
def test_round_trip_through_the_union(case: tuple[Any, Any]) -> None:
    union, sample = case
    data = to_json(sample)
    assert from_json(data, union) == sample
    assert from_json(_through_text(data), union) == sample


@pytest.mark.parametrize("case", ALL_SAMPLES, ids=_sample_id)
def test_round_trip_through_the_class(case: tuple[Any, Any]) -> None:
    _, sample = case
    assert from_json(_through_text(to_json(sample)), type(sample)) == sample


@pytest.mark.parametrize("case", ALL_SAMPLES, ids=_sample_id)
def test_json_form_is_an_object_with_a_type(case: tuple[Any, Any]) -> None:
    _, sample = case
    data = _through_text(to_json(sample))
    assert isinstance(data, dict)
    assert isinstance(data["type"], str)


def test_submission_envelope_round_trips() -> None:
    for op in OPS.values():
        submission = p.Submission("sub-7", op)
        data = _through_text(to_json(submission))
        assert data["id"] == "sub-7"
        tag = op.type if isinstance(op, p.CustomOp) else type_tag(type(op))
        assert data["op"]["type"] == tag
        assert from_json(data, p.Submission) == submission


def test_event_envelope_round_trips() -> None:
    for seq, msg in enumerate(EVENTS.values(), start=1):
        event = p.Event("t1", seq, msg)
        data = _through_text(to_json(event))
        assert (data["id"], data["seq"], data["msg"]["type"]) == ("t1", seq, type_tag(type(msg)))
        assert from_json(data, p.Event) == event


def test_event_json_form_is_exact() -> None:
    event = p.Event("t1", 3, p.ItemCompleted("t1", p.ContextCompactionItem("c-1", RECEIPT)))
    assert _through_text(to_json(event)) == {
        "id": "t1",
        "seq": 3,
        "msg": {
            "type": "item_completed",
            "turn_id": "t1",
            "item": {
                "type": "context_compaction",
                "id": "c-1",
                "receipt": {
                    "trigger": "mid_turn",
                    "backend": "local",
                    "tokens_before": 120_000,
                    "tokens_after": 9_000,
                    "duration_ms": 42,
                    "cut": False,
                    "counted_before": False,
                },
            },
        },
    }


def test_token_count_json_form_is_exact() -> None:
    msg = p.TokenCount(p.TokenUsageInfo(USAGE, USAGE, 128_000))
    usage = {
        "input_tokens": 100,
        "cached_input_tokens": 40,
        "output_tokens": 20,
        "reasoning_output_tokens": 5,
        "total_tokens": 120,
    }
    assert _through_text(to_json(msg)) == {
        "type": "token_count",
        "info": {
            "total_token_usage": usage,
            "last_token_usage": usage,
            "model_context_window": 128_000,
            "estimated": False,
        },
    }
    assert from_json({"type": "token_count", "info": None}, p.EventMsg) == p.TokenCount(None)


def test_context_compaction_item_without_receipt_round_trips() -> None:
    item = p.ContextCompactionItem("c-2")
    data = _through_text(to_json(item))
    assert data == {"type": "context_compaction", "id": "c-2", "receipt": None}
    assert from_json(data, p.TurnItem) == item


def test_compaction_summary_is_read_as_compaction() -> None:
    item = decode_response_item(
        {"type": "compaction_summary", "encrypted_content": "opaque", "id": "cs-1"}
    )
    assert item == p.Compaction("opaque", id="cs-1")
    assert to_json(item)["type"] == "compaction"


def test_unknown_response_item_type_is_kept_opaque() -> None:
    raw = {"type": "image_generation_call", "id": "ig-1", "result": {"nested": [1, 2]}}
    item = decode_response_item(raw)
    assert item == p.Other(raw)
    assert to_json(item) == raw


def test_wire_items_leave_out_unset_optional_fields() -> None:
    assert to_json(p.FunctionCall("ls", "{}", "c1")) == {
        "type": "function_call",
        "name": "ls",
        "arguments": "{}",
        "call_id": "c1",
    }
    assert to_json(p.assistant_message("hi")) == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}],
    }


def test_reasoning_wire_form_tags_its_parts() -> None:
    data = to_json(RESPONSE_ITEMS[p.Reasoning])
    assert data["summary"] == [{"type": "summary_text", "text": "thinking"}]
    assert data["content"] == [{"type": "reasoning_text", "text": "raw thought"}]


# ------------------------------------------------------------------ type tags

EXPECTED_TAGS: dict[type, str] = {
    p.Message: "message",
    p.Reasoning: "reasoning",
    p.FunctionCall: "function_call",
    p.FunctionCallOutput: "function_call_output",
    p.CustomToolCall: "custom_tool_call",
    p.CustomToolCallOutput: "custom_tool_call_output",
    p.Compaction: "compaction",
    p.GhostSnapshot: "ghost_snapshot",
    p.Other: "other",
    p.InputText: "input_text",
    p.OutputText: "output_text",
    p.InputImage: "input_image",
    p.Text: "text",
    p.Image: "image",
    p.LocalImage: "local_image",
    p.UserTurn: "user_turn",
    p.UserInput: "user_input",
    p.Compact: "compact",
    p.Interrupt: "interrupt",
    p.OverrideTurnContext: "override_turn_context",
    p.Shutdown: "shutdown",
    p.Unpin: "unpin",
    p.ExecApproval: "exec_approval",
    p.UserMessageItem: "user_message",
    p.AgentMessageItem: "agent_message",
    p.ReasoningItem: "reasoning",
    p.ToolCallItem: "tool_call",
    p.ContextCompactionItem: "context_compaction",
    p.TurnStarted: "turn_started",
    p.TurnComplete: "turn_complete",
    p.TurnAborted: "turn_aborted",
    p.ItemStarted: "item_started",
    p.ItemCompleted: "item_completed",
    p.AgentMessageDelta: "agent_message_delta",
    p.AgentMessage: "agent_message",
    p.UserMessage: "user_message",
    p.TokenCount: "token_count",
    p.ContextCompacted: "context_compacted",
    p.WarningEvent: "warning",
    p.ErrorEvent: "error",
    p.StreamErrorEvent: "stream_error",
    p.BackgroundEvent: "background_event",
    p.HookStarted: "hook_started",
    p.HookCompleted: "hook_completed",
    p.SessionResumed: "session_resumed",
    p.WorkStateNoted: "work_state_noted",
    p.ExecApprovalRequest: "exec_approval_request",
    p.SessionConfigured: "session_configured",
    p.ShutdownComplete: "shutdown_complete",
    # Codex's names of the same events and op.
    p.PatchApproval: "patch_approval",
    p.ApplyPatchApprovalRequest: "apply_patch_approval_request",
    p.PatchApplyBegin: "patch_apply_begin",
    p.PatchApplyEnd: "patch_apply_end",
    p.TurnDiff: "turn_diff",
    p.PlanUpdate: "plan_update",
    p.ExecCommandOutputDelta: "exec_command_output_delta",
    p.ReasoningSummaryDelta: "reasoning_summary_delta",
    p.SubAgentSpawned: "sub_agent_spawned",
    p.SubAgentEnded: "sub_agent_ended",
    p.AgentCallItem: "agent_call",
}


def test_expected_tags_cover_every_class() -> None:
    classes = {cls for _, samples in UNIONS.values() for cls in samples}
    # A custom op's tag is the type it was registered under.
    assert classes - {p.CustomOp} == set(EXPECTED_TAGS)


@pytest.mark.parametrize(
    ("cls", "tag"),
    [
        pytest.param(
            cls,
            tag,
            id=cls.__name__,
        )
        for cls, tag in EXPECTED_TAGS.items()
    ],
)
def test_type_tag(cls: type, tag: str) -> None:
    assert type_tag(cls) == tag
    assert re.fullmatch(r"[a-z]+(_[a-z]+)*", tag)
    if cls is not p.Other:
        sample = next(s for _, s in ALL_SAMPLES if type(s) is cls)
        assert to_json(sample)["type"] == tag


def test_tags_are_unique_within_each_union() -> None:
    for name, (union, _) in UNIONS.items():
        tags = [type_tag(cls) for cls in typing.get_args(union)]
        assert len(tags) == len(set(tags)), name


# ------------------------------------------------------------------ decoding errors


def test_unknown_op_type_is_an_invalid_op_naming_the_type() -> None:
    with pytest.raises(InvalidOpError, match="'launch_rockets'") as info:
        decode_op({"type": "launch_rockets"})
    assert "user_turn" in str(info.value)


@pytest.mark.parametrize(
    "data",
    [
        {"items": [{"type": "text", "text": "hi"}]},
        {"type": 7},
        "user_turn",
        ["user_turn"],
        None,
    ],
    ids=["no-type", "numeric-type", "string", "list", "null"],
)
def test_op_without_a_usable_type_is_invalid(data: Any) -> None:
    with pytest.raises(InvalidOpError):
        decode_op(data)


@pytest.mark.parametrize(
    ("union", "data"),
    [
        (p.EventMsg, {"type": "turn_exploded"}),
        (p.TurnItem, {"type": "web_search"}),
        (p.InputItem, {"type": "audio", "url": "x"}),
        (p.ContentPart, {"type": "input_audio"}),
    ],
    ids=["event", "turn-item", "input-item", "content-part"],
)
def test_unknown_type_outside_response_items_is_rejected(union: Any, data: Any) -> None:
    with pytest.raises(DecodeError, match=repr(data["type"])):
        from_json(data, union)


def test_user_input_alias_decodes_as_its_own_class() -> None:
    op = decode_op({"type": "user_input", "items": [{"type": "text", "text": "hi"}]})
    assert op == p.UserInput(items=(p.Text("hi"),))


def test_user_turn_defaults() -> None:
    op = decode_op({"type": "user_turn", "items": [{"type": "text", "text": "hi"}]})
    assert op == p.UserTurn(items=(p.Text("hi"),))
    assert isinstance(op, p.UserTurn)
    assert op.on_busy is p.OnBusy.STEER
    assert (op.model, op.cwd, op.effort) == (None, None, None)


def test_a_user_turn_without_an_output_schema_says_nothing_of_it() -> None:
    data = to_json(p.UserTurn(items=(p.Text("hi"),)))
    assert "final_output_json_schema" not in data
    assert decode_op({**data, "final_output_json_schema": None}) == p.UserTurn((p.Text("hi"),))


def test_a_turn_without_structured_output_ends_saying_nothing_of_it() -> None:
    assert to_json(p.TurnComplete("t1", "done", 5)) == {
        "type": "turn_complete",
        "turn_id": "t1",
        "last_agent_message": "done",
        "duration_ms": 5,
    }
    assert to_json(p.TurnComplete("t1", "[]", 5, [])) == {
        "type": "turn_complete",
        "turn_id": "t1",
        "last_agent_message": "[]",
        "duration_ms": 5,
        "output": [],
    }


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ([{"type": "string"}], "a schema is a JSON object, not an array"),
        ("string", "a schema is a JSON object, not a string"),
        ({"type": "text"}, "'text' is not valid under any of the given schemas (at $.type)"),
        ({"properties": {"n": {"minimum": "1"}}}, "'1' is not of type 'number' (at $."),
        ({"$schema": "https://example.com/mine"}, "$schema names no draft relay knows"),
    ],
    ids=["array", "string", "bad-type", "bad-keyword", "unknown-draft"],
)
def test_a_user_turn_refuses_an_output_schema_that_is_no_json_schema(schema: Any, why: str) -> None:
    data = {"type": "user_turn", "items": [{"type": "text", "text": "x"}]}
    expected = f"final_output_json_schema: not a JSON Schema: {why}"
    with pytest.raises(InvalidOpError, match=re.escape(expected)):
        decode_op({**data, "final_output_json_schema": schema})
    with pytest.raises(InvalidOpError, match=re.escape(expected)):
        p.UserTurn(items=(p.Text("x"),), final_output_json_schema=schema)


@pytest.mark.parametrize(
    "data",
    [
        {"type": "user_turn", "items": []},
        {"type": "user_turn", "items": [{"type": "text", "text": "x"}], "on_busy": "later"},
        {"type": "user_turn", "items": "hi"},
        {"type": "user_turn"},
        {"type": "compact", "instructions": 5},
        {"type": "override_turn_context", "model": ["gpt"]},
    ],
    ids=["empty-items", "bad-on-busy", "items-string", "items-missing", "int-str", "list-str"],
)
def test_invalid_field_values_are_invalid_ops(data: Any) -> None:
    with pytest.raises(InvalidOpError, match="invalid op"):
        decode_op(data)


@pytest.mark.parametrize(
    "case",
    # Other keeps every field of the item as it arrived, by design.
    [case for case in ALL_SAMPLES if not isinstance(case[1], (p.Other, p.CustomOp))],
    ids=_sample_id,
)
def test_unknown_fields_are_ignored(case: tuple[Any, Any]) -> None:
    union, sample = case
    data = _through_text(to_json(sample))
    data["zz_unknown"] = {"anything": [1, 2]}
    assert from_json(data, union) == sample


def test_a_custom_op_keeps_every_field_for_its_task() -> None:
    data = {"type": "review", "path": "a.py", "zz_unknown": {"anything": [1, 2]}}
    assert from_json(data, p.Op) == p.CustomOp(
        "review", {"path": "a.py", "zz_unknown": {"anything": [1, 2]}}
    )


def test_unknown_nested_fields_are_ignored() -> None:
    data = {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
    }
    assert decode_response_item(data) == p.assistant_message("hi")
    event = {
        "id": "t",
        "seq": 1,
        "extra": True,
        "msg": {
            "type": "item_started",
            "turn_id": "t",
            "item": {"type": "agent_message", "id": "a", "text": "", "phase": 1},
        },
    }
    assert from_json(event, p.Event) == p.Event(
        "t", 1, p.ItemStarted("t", p.AgentMessageItem("a", ""))
    )


@pytest.mark.parametrize(
    ("union", "data"),
    [
        (p.InputItem, {"type": "text", "text": 5}),
        (p.ResponseItem, {"type": "function_call", "name": 1, "arguments": "{}", "call_id": "c"}),
        (p.ResponseItem, {"type": "function_call_output", "call_id": 12, "output": "x"}),
        (
            p.ResponseItem,
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": 1.5}]},
        ),
        (p.EventMsg, {"type": "agent_message", "message": 3}),
        (p.EventMsg, {"type": "warning", "message": True}),
        (
            p.EventMsg,
            {"type": "turn_started", "turn_id": 1, "model_context_window": None, "started_at": 0},
        ),
        (p.Submission, {"id": 1, "op": {"type": "interrupt"}}),
    ],
    ids=["text", "call-name", "call-id", "content-text", "agent-msg", "bool", "turn-id", "sub-id"],
)
def test_strings_are_not_coerced_from_numbers(union: Any, data: Any) -> None:
    with pytest.raises(DecodeError, match="expected str"):
        from_json(data, union)


def test_numbers_are_not_coerced_from_strings_or_booleans() -> None:
    with pytest.raises(DecodeError, match="expected int"):
        from_json({"id": "t", "seq": "1", "msg": {"type": "shutdown_complete"}}, p.Event)
    with pytest.raises(DecodeError, match="expected int"):
        from_json(
            {
                "type": "turn_complete",
                "turn_id": "t",
                "last_agent_message": None,
                "duration_ms": True,
            },
            p.EventMsg,
        )


def test_an_integer_is_accepted_where_a_float_is_expected() -> None:
    msg = from_json(
        {"type": "turn_started", "turn_id": "t", "model_context_window": None, "started_at": 3},
        p.EventMsg,
    )
    assert msg == p.TurnStarted("t", None, 3.0)
    assert isinstance(msg, p.TurnStarted)
    assert type(msg.started_at) is float


def test_invalid_literal_values_are_rejected() -> None:
    with pytest.raises(DecodeError, match="robot"):
        decode_response_item({"type": "message", "role": "robot", "content": []})
    with pytest.raises(DecodeError, match="mid_compact"):
        from_json({"type": "hook_started", "hook": "h", "event": "mid_compact"}, p.EventMsg)
    with pytest.raises(DecodeError, match="meh"):
        from_json(
            {
                "type": "hook_completed",
                "hook": "h",
                "event": "pre_compact",
                "outcome": "meh",
                "duration_ms": 1,
            },
            p.EventMsg,
        )


@pytest.mark.parametrize(
    ("union", "data"),
    [
        (p.EventMsg, {"type": "error", "message": "m", "code": "kaboom"}),
        (p.EventMsg, {"type": "turn_aborted", "turn_id": "t", "reason": "bored", "duration_ms": 1}),
        (
            p.TurnItem,
            {
                "type": "context_compaction",
                "id": "c",
                "receipt": {
                    "trigger": "whenever",
                    "backend": "local",
                    "tokens_before": 1,
                    "tokens_after": 1,
                    "duration_ms": 1,
                },
            },
        ),
    ],
    ids=["error-code", "abort-reason", "compaction-trigger"],
)
def test_invalid_enum_values_are_rejected(union: Any, data: Any) -> None:
    with pytest.raises(DecodeError):
        from_json(data, union)


def test_enum_fields_decode_as_enum_members() -> None:
    msg = from_json(
        {"type": "turn_aborted", "turn_id": "t", "reason": "replaced", "duration_ms": 1},
        p.EventMsg,
    )
    assert isinstance(msg, p.TurnAborted)
    assert type(msg.reason) is p.AbortReason
    error = from_json({"type": "error", "message": "m", "code": "hook"}, p.EventMsg)
    assert isinstance(error, p.ErrorEvent)
    assert type(error.code) is ErrorCode


def test_decoding_a_non_object_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="JSON object"):
        from_json("text", p.EventMsg)


# ------------------------------------------------------------------ harness-only fields


def test_encode_response_item_drops_metadata() -> None:
    message = p.user_message("hi", metadata={"source": "compaction", "keep": True})
    assert to_json(message)["metadata"] == {"source": "compaction", "keep": True}
    assert encode_response_item(message) == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "hi"}],
    }


def test_encode_response_item_keeps_everything_else() -> None:
    for cls, item in RESPONSE_ITEMS.items():
        wire = encode_response_item(item)
        assert "metadata" not in wire
        if cls is not p.Message:
            assert wire == to_json(item)


# ------------------------------------------------------------------ properties

_json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json_value = st.recursive(
    _json_leaf | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
# Texts are bounded: a round trip treats a long text as a short one, and the examples stay
# quick to make.
_text = st.text(max_size=64)
_content_part = st.one_of(
    st.builds(p.InputText, _text),
    st.builds(p.OutputText, _text),
    st.builds(p.InputImage, _text),
)
_messages = st.builds(
    p.Message,
    role=st.sampled_from(p.ROLES),
    content=st.lists(_content_part, max_size=4).map(tuple),
    id=st.none() | st.text(max_size=10),
    metadata=st.none() | st.dictionaries(st.text(max_size=6), _json_value, max_size=3),
)
_function_calls = st.builds(
    p.FunctionCall,
    name=_text,
    arguments=_text,
    call_id=_text,
    id=st.none() | st.text(max_size=10),
)
_usages = st.builds(
    p.TokenUsage,
    st.integers(min_value=0),
    st.integers(min_value=0),
    st.integers(min_value=0),
    st.integers(min_value=0),
    st.integers(min_value=0),
)


@given(_messages | _function_calls)
def test_response_items_round_trip(item: p.Message | p.FunctionCall) -> None:
    data = _through_text(to_json(item))
    assert data["type"] == type_tag(type(item))
    assert from_json(data, p.ResponseItem) == item
    assert decode_response_item(_through_text(encode_response_item(item))) == (
        p.Message(item.role, item.content, id=item.id) if isinstance(item, p.Message) else item
    )


@given(_usages, _usages, st.none() | st.integers(min_value=1))
def test_token_usage_round_trips(
    total: p.TokenUsage, last: p.TokenUsage, window: int | None
) -> None:
    assert from_json(_through_text(to_json(total)), p.TokenUsage) == total
    msg = p.TokenCount(p.TokenUsageInfo(total, last, window))
    assert from_json(_through_text(to_json(msg)), p.EventMsg) == msg


@given(_usages, _usages)
def test_token_usage_adds_field_by_field(a: p.TokenUsage, b: p.TokenUsage) -> None:
    total = to_json(a + b)
    assert total == {key: to_json(a)[key] + to_json(b)[key] for key in to_json(a)}


@pytest.mark.parametrize(
    ("data", "got"),
    [
        ({"type": "user_turn", "items": "not a string list"}, "str"),
        ({"type": "user_turn", "items": {"type": "text", "text": "hi"}}, "object"),
        ({"type": "user_input", "items": "hi"}, "str"),
    ],
    ids=["string", "object", "user-input-string"],
)
def test_a_string_or_object_where_a_list_belongs_is_one_error(
    data: dict[str, Any], got: str
) -> None:
    with pytest.raises(InvalidOpError) as info:
        decode_op(data)
    message = str(info.value)
    assert message.count(" @ ") == 1, message
    assert f"expected a list, got {got} @ $.items" in message
