"""OpenTelemetry traces (docs/observability.md): the spans an embedded session makes, read
through the SDK's in-memory exporter on a tracer provider of the test's own (no global); the
key kept out of every span; a session without OpenTelemetry; the ``relay`` command's
``--otel``, to standard error and over OTLP/HTTP to a loopback receiver."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

import relay
from relay import testing
from relay._cli._transcript import render_transcript
from relay._otel import _names as n
from relay._otel._export import CONSOLE, OTLP, exporters, wanted
from relay._otel._values import (
    CAPTURE_CONTENT_VARIABLE,
    finish_reasons,
    mcp_server,
    messages_json,
    records_content,
)
from relay._rollout._lines import TraceLine
from relay._rollout._reader import parse_rollout, read_rollout
from relay._rollout._resume import reconstruct
from relay.testing import ScriptedModel
from tests.otlp import otlp_receiver

NO_ROLLOUT = relay.RolloutConfig(enabled=False)
CONTENT = (
    n.GEN_AI_INPUT_MESSAGES,
    n.GEN_AI_OUTPUT_MESSAGES,
    n.GEN_AI_SYSTEM_INSTRUCTIONS,
    n.GEN_AI_TOOL_CALL_ARGUMENTS,
    n.GEN_AI_TOOL_CALL_RESULT,
)


class Traced:
    """A tracer provider of the test's own, its finished spans kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span

    def parent_of(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        [parent] = [s for s in self.spans if s.context.span_id == span.parent.span_id]
        return parent

    def tree(self) -> list[str]:
        """The spans as an indented tree, children in start order."""
        spans = sorted(self.spans, key=lambda span: span.start_time or 0)
        lines: list[str] = []

        def walk(parent: int | None, depth: int) -> None:
            for span in spans:
                above = span.parent.span_id if span.parent is not None else None
                if above == parent:
                    lines.append("  " * depth + span.name)
                    walk(span.context.span_id, depth + 1)

        walk(None, 0)
        return lines


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@asynccontextmanager
async def traced_session(
    traced: Traced,
    script: Mapping[str, Any] | None = None,
    *,
    config: relay.Config | None = None,
    model: ScriptedModel | None = None,
    tools: Iterable[relay.Tool] = (),
    hooks: Iterable[relay.CompactHook] = (),
) -> AsyncIterator[testing.TestSession]:
    model = model or ScriptedModel(script)
    async with (
        relay.open_session(
            config or relay.Config(rollout=NO_ROLLOUT),
            model=model,
            tools=tools,
            hooks=hooks,
            clock=testing.fixed_clock,
            rng=random.Random(0),
            tracer_provider=traced.provider,
        ) as session,
        testing.recording(session) as recorder,
    ):
        yield testing.TestSession(session, model, recorder)


def constant_tool(name: str, output: str) -> relay.Tool:
    async def run(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
        del args, ctx
        return output

    return relay.Tool(name, "Answers a constant.", {"type": "object", "properties": {}}, run)


#: A turn that calls a tool whose long output (:data:`LONG_OUTPUT`) crosses the
#: auto-compaction limit: it is compacted mid-turn, then answers.
LONG_OUTPUT = "hatchling " + "x" * 8000
TOOL_AND_COMPACTION = {
    "responses": [
        {"function_call": {"name": "lookup", "arguments": {"key": "build"}, "call_id": "c1"}},
        {"text": "SUMMARY"},
        {"text": "done"},
    ]
}


async def test_a_turn_with_a_tool_call_and_a_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    config = relay.Config(model_auto_compact_token_limit=1000, rollout=NO_ROLLOUT)
    async with traced_session(
        traced, TOOL_AND_COMPACTION, config=config, tools=[constant_tool("lookup", LONG_OUTPUT)]
    ) as t:
        await t.turns("which build backend?")
    assert traced.tree() == [
        "relay.session",
        "  invoke_agent relay",
        "    chat scripted",
        "    execute_tool lookup",
        "    relay.compaction",
        "      chat scripted",
        "    chat scripted",
    ]
    assert len({span.context.trace_id for span in traced.spans}) == 1
    session = traced.one("relay.session")
    assert attributes(session) == {
        n.GEN_AI_AGENT_NAME: "relay",
        n.GEN_AI_CONVERSATION_ID: t.session.id,
        n.GEN_AI_PROVIDER_NAME: "scripted",
        n.GEN_AI_REQUEST_MODEL: "scripted",
        n.RELAY_SESSION_RESUMED: False,
        n.RELAY_VERSION: relay.__version__,
    }
    turn = traced.one("invoke_agent relay")
    assert attributes(turn) == {
        n.GEN_AI_OPERATION_NAME: "invoke_agent",
        n.GEN_AI_AGENT_NAME: "relay",
        n.GEN_AI_PROVIDER_NAME: "scripted",
        n.GEN_AI_CONVERSATION_ID: t.session.id,
        n.RELAY_TURN_ID: "sub-1",
        n.RELAY_TASK_KIND: "regular",
    }
    assert turn.status.status_code is StatusCode.UNSET
    first, summary, answer = sorted(traced.named("chat scripted"), key=lambda s: s.start_time or 0)
    assert {span.kind for span in (first, summary, answer)} == {SpanKind.CLIENT}
    response_id = attributes(first).pop(n.GEN_AI_RESPONSE_ID)
    assert isinstance(response_id, str) and response_id.startswith("resp-")
    assert {k: v for k, v in attributes(first).items() if k != n.GEN_AI_RESPONSE_ID} == {
        n.GEN_AI_OPERATION_NAME: "chat",
        n.GEN_AI_PROVIDER_NAME: "scripted",
        n.GEN_AI_SYSTEM: "scripted",
        n.GEN_AI_REQUEST_MODEL: "scripted",
        n.GEN_AI_CONVERSATION_ID: t.session.id,
        n.RELAY_PURPOSE: "turn",
        n.GEN_AI_RESPONSE_FINISH_REASONS: ("tool_calls",),
        n.GEN_AI_USAGE_INPUT_TOKENS: attributes(first)[n.GEN_AI_USAGE_INPUT_TOKENS],
        n.GEN_AI_USAGE_OUTPUT_TOKENS: attributes(first)[n.GEN_AI_USAGE_OUTPUT_TOKENS],
    }
    assert attributes(first)[n.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert attributes(summary)[n.RELAY_PURPOSE] == "compact"
    assert attributes(summary)[n.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes(answer)[n.RELAY_PURPOSE] == "turn"
    assert attributes(answer)[n.GEN_AI_USAGE_INPUT_TOKENS] > 0
    tool = traced.one("execute_tool lookup")
    assert tool.kind is SpanKind.INTERNAL
    assert attributes(tool) == {
        n.GEN_AI_OPERATION_NAME: "execute_tool",
        n.GEN_AI_TOOL_NAME: "lookup",
        n.GEN_AI_TOOL_CALL_ID: "c1",
        n.GEN_AI_TOOL_TYPE: "function",
    }
    compaction = attributes(traced.one("relay.compaction"))
    assert compaction == {
        n.RELAY_COMPACTION_INSTALLED: True,
        n.RELAY_COMPACTION_BACKEND: "local",
        n.RELAY_COMPACTION_TRIGGER: "mid_turn",
        n.RELAY_COMPACTION_TOKENS_BEFORE: compaction[n.RELAY_COMPACTION_TOKENS_BEFORE],
        n.RELAY_COMPACTION_TOKENS_AFTER: compaction[n.RELAY_COMPACTION_TOKENS_AFTER],
        n.RELAY_COMPACTION_COUNTED_BEFORE: True,
        n.RELAY_COMPACTION_BACKGROUND: False,
        n.RELAY_COMPACTION_CUT: False,
    }
    assert (
        compaction[n.RELAY_COMPACTION_TOKENS_BEFORE] > compaction[n.RELAY_COMPACTION_TOKENS_AFTER]
    )
    # Content is not recorded unless asked for.
    assert [key for span in traced.spans for key in attributes(span) if key in CONTENT] == []


async def test_a_session_opened_within_a_span_of_the_program_is_its_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    program = traced.provider.get_tracer("program")
    with program.start_as_current_span("handle request") as outer:
        async with traced_session(traced, {"responses": ["hi"]}) as t:
            await t.turns("hello")
    session = traced.one("relay.session")
    assert session.parent is not None
    assert session.parent.span_id == outer.get_span_context().span_id
    assert traced.parent_of(traced.one("invoke_agent relay")) == session


async def test_an_mcp_tool_span_names_its_server(autojump_clock: trio.testing.MockClock) -> None:
    traced = Traced()
    script = {
        "responses": [
            {"function_call": {"name": "mcp__files__read", "arguments": {}, "call_id": "c1"}},
            "read",
        ]
    }
    async with traced_session(
        traced, script, tools=[constant_tool("mcp__files__read", "contents")]
    ) as t:
        await t.turns("read it")
    tool = attributes(traced.one("execute_tool mcp__files__read"))
    assert tool[n.RELAY_MCP_SERVER] == "files"
    assert tool[n.GEN_AI_TOOL_NAME] == "mcp__files__read"


def test_the_mcp_server_of_a_tool_name() -> None:
    assert mcp_server("mcp__files__read") == "files"
    assert mcp_server("mcp__git__log__short") == "git"
    assert mcp_server("mcp__files") is None
    assert mcp_server("mcp____read") is None
    assert mcp_server("shell") is None


def test_finish_reasons() -> None:
    call = relay.FunctionCall("shell", "{}", "c1")
    answer = relay.assistant_message("done")
    assert finish_reasons(None, [answer]) == ("stop",)
    assert finish_reasons(None, [answer, call]) == ("tool_calls",)
    assert finish_reasons("max_output_tokens", [answer]) == ("length",)
    assert finish_reasons("content_filter", [answer]) == ("content_filter",)


async def test_a_failed_request_is_an_error_of_its_span_and_of_its_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    script = {"responses": [{"http_error": {"status": 400, "message": "the request is bad"}}]}
    async with traced_session(traced, script) as t:
        await t.turns("hello")
    request = traced.one("chat scripted")
    assert request.status.status_code is StatusCode.ERROR
    assert attributes(request)[n.ERROR_TYPE] == "bad_request"
    assert attributes(request)[n.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    turn = traced.one("invoke_agent relay")
    assert turn.status.status_code is StatusCode.ERROR
    assert attributes(turn)[n.ERROR_TYPE] == "bad_request"
    assert traced.one("relay.session").status.status_code is StatusCode.UNSET


#: What a model server said of a failed request, quoting the user's words.
QUOTED = "the message 'meet me at the old mill at nine' is not allowed"


@pytest.mark.parametrize("content", [False, True])
async def test_an_error_message_is_content_and_recorded_only_with_content(
    content: bool, autojump_clock: trio.testing.MockClock
) -> None:
    traced = Traced()
    config = relay.Config(rollout=NO_ROLLOUT, otel=relay.OtelConfig(record_content=content))
    script = {"responses": [{"http_error": {"status": 400, "message": QUOTED}}]}
    async with traced_session(traced, script, config=config) as t:
        await t.turns("meet me at the old mill at nine")
        # An op the session refuses, quoting it: an error of no turn, on the session's span.
        await t.submit(relay.Unpin(text="the old mill"))
        await t.wait_for(relay.ErrorEvent, 2)
    everything = "\n".join(span.to_json() for span in traced.spans)
    assert ("old mill" in everything) is content
    request, turn = traced.one("chat scripted"), traced.one("invoke_agent relay")
    for span in (request, turn):
        assert span.status.status_code is StatusCode.ERROR
        assert attributes(span)[n.ERROR_TYPE] == "bad_request"
    if content:
        assert QUOTED in (turn.status.description or "")
    else:
        left_out = "bad_request: the message is left out (content recording is off)"
        assert request.status.description == turn.status.description == left_out
    (event,) = traced.one("relay.session").events
    assert event.attributes is not None and event.attributes[n.ERROR_TYPE] == "invalid_op"


async def test_an_error_relay_words_itself_keeps_its_message_without_content(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    config = relay.Config(rollout=NO_ROLLOUT, max_steps_per_turn=1)
    call = {"function_call": {"name": "sleep", "arguments": {"seconds": 0}, "call_id": "c1"}}
    async with traced_session(traced, {"responses": [call, "never"]}, config=config) as t:
        await t.turns("go")
    turn = traced.one("invoke_agent relay")
    assert attributes(turn)[n.ERROR_TYPE] == "step_limit"
    assert (turn.status.description or "").startswith("The turn stopped after 1 model requests")


async def test_an_interrupted_turn_records_its_reason_and_is_no_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    script = {
        "responses": [
            {"function_call": {"name": "sleep", "arguments": {"seconds": 100}, "call_id": "c1"}},
            {"text": "one two three four", "stall_ms": 1000},
        ]
    }
    async with traced_session(traced, script) as t:
        await t.turn("wait")
        await t.wait_for(testing.tool_call_started)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted)
        await t.turn("stream slowly")
        await t.wait_for(relay.AgentMessageDelta)
        await t.submit(relay.Interrupt())
        await t.wait_for(relay.TurnAborted, 2)
    first, second = sorted(traced.named("invoke_agent relay"), key=lambda s: s.start_time or 0)
    for turn in (first, second):
        assert attributes(turn)[n.RELAY_ABORT_REASON] == "interrupted"
        assert turn.status.status_code is StatusCode.UNSET
    tool = traced.one("execute_tool sleep")
    assert attributes(tool)[n.RELAY_ABORT_REASON] == "interrupted"
    assert tool.status.status_code is StatusCode.UNSET
    cut = [s for s in traced.named("chat scripted") if traced.parent_of(s) == second]
    [request] = cut
    assert attributes(request)[n.RELAY_CANCELLED] is True
    assert attributes(request)[n.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert request.status.status_code is StatusCode.UNSET


async def test_a_turn_span_names_the_kind_of_its_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @attrs.frozen
    class Note(relay.SessionTask):
        @property
        def kind(self) -> str:
            return "note"

        async def run(self, ctx: relay.TaskContext) -> str | None:
            return "noted"

    traced = Traced()
    async with (
        relay.open_session(
            relay.Config(rollout=NO_ROLLOUT),
            model=ScriptedModel(None),
            tasks={"note": lambda op: Note()},
            tracer_provider=traced.provider,
        ) as session,
        testing.recording(session) as recorder,
    ):
        ops = (relay.UserTurn(items=[relay.Text("hi")]), relay.CustomOp("note"), relay.Compact())
        for done, op in enumerate(ops, start=1):
            await session.submit(op)
            await recorder.wait_for(relay.TurnComplete, done)
    turns = sorted(traced.named("invoke_agent relay"), key=lambda s: s.start_time or 0)
    assert [attributes(turn)[n.RELAY_TASK_KIND] for turn in turns] == ["regular", "note", "compact"]
    assert [m.kind for m in recorder.of_type(relay.TurnStarted)] == ["regular", "note", "compact"]


async def test_hooks_are_spans_of_their_turn(autojump_clock: trio.testing.MockClock) -> None:
    async def check(info: relay.HookInput) -> None:
        del info

    async def crash(info: relay.HookInput) -> None:
        raise RuntimeError("broken hook")

    hooks = [
        relay.CompactHook("pre_compact", check, name="check"),
        relay.CompactHook("post_compact", crash, name="crash"),
    ]
    traced = Traced()
    async with traced_session(traced, {"responses": ["a1", "SUMMARY"]}, hooks=hooks) as t:
        await t.turns("one")
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
    compact_turn = max(traced.named("invoke_agent relay"), key=lambda s: s.start_time or 0)
    spans = sorted(traced.named("relay.hook"), key=lambda s: s.start_time or 0)
    assert [attributes(s)[n.RELAY_HOOK_NAME] for s in spans] == ["check", "crash"]
    assert [attributes(s)[n.RELAY_HOOK_POINT] for s in spans] == ["pre_compact", "post_compact"]
    assert [attributes(s)[n.RELAY_HOOK_OUTCOME] for s in spans] == ["continue", "failed"]
    assert [traced.parent_of(s) for s in spans] == [compact_turn, compact_turn]
    assert spans[0].status.status_code is StatusCode.UNSET
    assert spans[1].status.status_code is StatusCode.ERROR
    assert attributes(spans[1])[n.ERROR_TYPE] == "failed"
    compaction = traced.one("relay.compaction")
    assert attributes(compaction)[n.RELAY_COMPACTION_TRIGGER] == "manual"
    assert traced.parent_of(compaction) == compact_turn


async def test_a_failed_compaction_is_an_error_and_not_installed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    script = {"responses": ["a1", {"http_error": {"status": 400, "message": "too much"}}]}
    async with traced_session(traced, script) as t:
        await t.turns("one")
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
    compaction = traced.one("relay.compaction")
    assert attributes(compaction)[n.RELAY_COMPACTION_INSTALLED] is False
    assert attributes(compaction)[n.ERROR_TYPE] == "bad_request"
    assert compaction.status.status_code is StatusCode.ERROR
    [summary] = [s for s in traced.named("chat scripted") if traced.parent_of(s) == compaction]
    assert summary.status.status_code is StatusCode.ERROR


async def test_a_background_compaction_is_the_sessions_and_its_install_a_turns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    traced = Traced()
    script = {
        "responses": [
            {"text": "a1", "total_tokens": 700},  # 70 % of the limit: background work starts
            {"text": "SUM", "delay_ms": 2000},  # the background summary
            {"text": "a2", "total_tokens": 1100},  # over the limit
            {"text": "a3"},
        ]
    }
    config = relay.Config(
        model_context_window=100_000,
        model_auto_compact_token_limit=1000,
        background_compact_threshold_percent=60,
        rollout=NO_ROLLOUT,
    )
    async with traced_session(traced, script, config=config) as t:
        await t.turns("one")
        await trio.sleep(3)
        await t.turns("two", "three")
    session = traced.one("relay.session")
    [summary] = [
        s for s in traced.named("chat scripted") if attributes(s)[n.RELAY_PURPOSE] == "compact"
    ]
    assert traced.parent_of(summary) == session
    compaction = traced.one("relay.compaction")
    parent = traced.parent_of(compaction)
    assert parent is not None and attributes(parent)[n.RELAY_TURN_ID] == "sub-3"
    receipt = attributes(compaction)
    assert receipt[n.RELAY_COMPACTION_BACKGROUND] is True
    assert receipt[n.RELAY_COMPACTION_INSTALLED] is True
    assert receipt[n.RELAY_COMPACTION_SNAPSHOT_AGE_MS] >= 3000


async def test_a_remote_compaction_request_is_a_chat_span_of_its_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    kept = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "one"}]}
    script = {"responses": ["a1"], "compact": [{"output": [kept]}]}
    config = relay.Config(
        model_providers={"scripted": relay.ProviderConfig(name="scripted", remote_compaction="v1")},
        rollout=NO_ROLLOUT,
    )
    traced = Traced()
    async with traced_session(traced, script, config=config) as t:
        await t.turns("one")
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
    compaction = traced.one("relay.compaction")
    assert attributes(compaction)[n.RELAY_COMPACTION_BACKEND] == "remote_v1"
    [request] = [s for s in traced.named("chat scripted") if traced.parent_of(s) == compaction]
    assert attributes(request)[n.RELAY_REMOTE_COMPACTION] is True
    assert attributes(request)[n.RELAY_PURPOSE] == "compact"
    assert request.kind is SpanKind.CLIENT


# ----------------------------------------------------------------------------- resume


def trace_lines(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["payload"] for line in lines if line["type"] == "trace"]


async def test_a_resumed_session_links_to_the_runs_of_its_rollout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = relay.Config(rollout=relay.RolloutConfig(dir=str(tmp_path)))
    runs: list[ReadableSpan] = []
    first = Traced()
    async with traced_session(first, {"responses": ["a1"]}, config=config) as t:
        await t.turns("one")
    runs.append(first.one("relay.session"))
    (path,) = tmp_path.rglob("*.jsonl")
    for answer in ("a2", "a3"):
        traced = Traced()
        model = ScriptedModel({"responses": [answer]})
        async with (
            relay.resume_session(path, config, model=model, tracer_provider=traced.provider) as s,
            testing.recording(s) as recorder,
        ):
            await testing.TestSession(s, model, recorder).turns("again")
        session = traced.one("relay.session")
        assert attributes(session)[n.RELAY_SESSION_RESUMED] is True
        assert [(link.context.trace_id, link.context.span_id) for link in session.links] == [
            (run.context.trace_id, run.context.span_id) for run in runs
        ]
        assert {dict(link.attributes or {})[n.RELAY_LINK] for link in session.links} == {
            "resumed_from"
        }
        runs.append(session)
    assert trace_lines(path) == [
        {"trace_id": f"{run.context.trace_id:032x}", "span_id": f"{run.context.span_id:016x}"}
        for run in runs
    ]
    rollout = read_rollout(path)
    assert rollout.notes == ()
    assert len([line for line in rollout.lines if isinstance(line, TraceLine)]) == 3
    assert len(reconstruct(read_rollout(path, for_resume=True)).spans) == 3


@pytest.mark.parametrize("sdk", [False, True], ids=["api-no-op", "sdk-sampled-out"])
async def test_an_untraced_session_records_nothing_and_writes_no_trace_line(
    sdk: bool, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    exporter = InMemorySpanExporter()
    provider: Any = NoOpTracerProvider()
    if sdk:
        provider = TracerProvider(sampler=ALWAYS_OFF)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = relay.Config(
        model_auto_compact_token_limit=1000, rollout=relay.RolloutConfig(dir=str(tmp_path))
    )
    model = ScriptedModel(TOOL_AND_COMPACTION)
    async with (
        relay.open_session(
            config,
            model=model,
            tools=[constant_tool("lookup", LONG_OUTPUT)],
            tracer_provider=provider,
        ) as s,
        testing.recording(s) as recorder,
    ):
        await testing.TestSession(s, model, recorder).turns("one")
    assert recorder.of_type(relay.TurnComplete)[0].last_agent_message == "done"
    assert exporter.get_finished_spans() == ()
    (path,) = tmp_path.rglob("*.jsonl")
    assert trace_lines(path) == []


META = '{"timestamp":"t","type":"session_meta","payload":{"id":"s1"}}'


def test_trace_lines_are_read_kept_for_a_resume_and_checked() -> None:
    good = '{"timestamp":"t","type":"trace","payload":{"trace_id":"%s","span_id":"%s"}}'
    lines = [
        META,
        good % ("1" * 32, "2" * 16),
        '{"timestamp":"t","type":"compacted","payload":{"message":"","replacement_history":[]}}',
        good % ("3" * 32, "4" * 16),
        good % ("3" * 32, "0" * 16),
        good % ("X" * 32, "4" * 16),
    ]
    rollout = parse_rollout("\n".join(lines) + "\n")
    assert [str(note).split(":")[0] for note in rollout.notes] == ["line 5", "line 6"]
    assert all("invalid trace" in note.message for note in rollout.notes)
    expected = (("1" * 32, "2" * 16), ("3" * 32, "4" * 16))
    assert reconstruct(rollout).spans == expected
    # A resume reads the trace lines from before the newest compaction too.
    assert reconstruct(parse_rollout("\n".join(lines) + "\n", for_resume=True)).spans == expected
    # A transcript shows nothing of them.
    assert not any("trace" in line for line in render_transcript(rollout))


# ----------------------------------------------------------------------------- the key


CANARY = "sk-canary-0123456789-RELAY-TRACE-KEY"


async def test_the_key_appears_in_no_span(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """Content recording on, the key in the user's input, the tool's arguments and output,
    the model's answers, a summary, a hook's name and an error message: it is nowhere."""
    monkeypatch.setenv("RELAY_CANARY_KEY", CANARY)
    config = relay.Config(
        model_provider="canary",
        model_providers={
            "canary": relay.ProviderConfig(
                name="canary", base_url="http://127.0.0.1:9/v1", env_key="RELAY_CANARY_KEY"
            )
        },
        otel=relay.OtelConfig(record_content=True),
        rollout=NO_ROLLOUT,
    )
    script = {
        "responses": [
            {
                "function_call": {
                    "name": "echo_key",
                    "arguments": {"text": CANARY},
                    "call_id": f"call-{CANARY}",
                }
            },
            f"The key is {CANARY}, and part of it: {CANARY[3:20]}.",
            f"Summary: the user's key is {CANARY}.",
            {"http_error": {"status": 400, "message": f"bad key {CANARY}"}},
        ]
    }

    async def hook(info: relay.HookInput) -> None:
        del info

    traced = Traced()
    async with traced_session(
        traced,
        script,
        config=config,
        tools=[constant_tool("echo_key", f"echo: {CANARY}")],
        hooks=[relay.CompactHook("pre_compact", hook, name=f"hook {CANARY}")],
    ) as t:
        await t.turns(f"remember {CANARY}")
        await t.submit(relay.Compact())
        await t.wait_for(testing.turn_ended, 2)
        await t.turns("and again")
    everything = "\n".join(span.to_json() for span in traced.spans)
    assert len(traced.spans) >= 8
    assert CANARY not in everything
    assert CANARY[3:20] not in everything
    assert "[redacted]" in everything
    recorded = [key for span in traced.spans for key in attributes(span) if key in CONTENT]
    assert set(recorded) == set(CONTENT)


# ----------------------------------------------------------------------------- content


async def test_content_is_recorded_when_asked_in_the_genai_shape(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    traced = Traced()
    async with traced_session(
        traced, TOOL_AND_COMPACTION, tools=[constant_tool("lookup", LONG_OUTPUT)]
    ) as t:
        await t.turns("which build backend?")
    first = min(traced.named("chat scripted"), key=lambda s: s.start_time or 0)
    sent = json.loads(attributes(first)[n.GEN_AI_INPUT_MESSAGES])
    assert sent[-1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "which build backend?"}],
    }
    assert json.loads(attributes(first)[n.GEN_AI_OUTPUT_MESSAGES]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": '{"key": "build"}'}
            ],
        }
    ]
    assert json.loads(attributes(first)[n.GEN_AI_SYSTEM_INSTRUCTIONS])[0]["type"] == "text"
    tool = attributes(traced.one("execute_tool lookup"))
    assert (tool[n.GEN_AI_TOOL_CALL_ARGUMENTS], tool[n.GEN_AI_TOOL_CALL_RESULT]) == (
        '{"key": "build"}',
        LONG_OUTPUT,
    )
    turn = attributes(traced.one("invoke_agent relay"))
    assert json.loads(turn[n.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "SUMMARY"


def test_content_is_recorded_by_the_config_or_the_variable() -> None:
    on = relay.Config(otel=relay.OtelConfig(record_content=True))
    assert not records_content(relay.Config(), {})
    assert records_content(on, {})
    assert records_content(relay.Config(), {CAPTURE_CONTENT_VARIABLE: "TRUE"})
    assert not records_content(relay.Config(), {CAPTURE_CONTENT_VARIABLE: "false"})
    assert relay.load_config(overrides=["otel.record_content=true"]) == on


def test_recorded_messages_keep_the_newest_within_the_limit() -> None:
    items = [relay.user_message(f"message {i} " + "x" * 90) for i in range(100)]
    text, cut = messages_json(items, limit=1000)
    kept = json.loads(text)
    assert cut and 1 <= len(kept) < 100 and len(text) <= 1000
    assert kept[-1]["parts"][0]["content"].startswith("message 99 ")
    huge, cut = messages_json([relay.user_message("y" * 5000)], limit=1000)
    assert cut and len(huge) < 1000
    assert messages_json(items[:2], limit=10_000) == (
        json.dumps(
            [
                {"role": "user", "parts": [{"type": "text", "content": items[0].text()}]},
                {"role": "user", "parts": [{"type": "text", "content": items[1].text()}]},
            ],
            separators=(",", ":"),
        ),
        False,
    )


# ----------------------------------------------------------------------------- robustness


class BrokenTracer:
    """A tracer whose every span fails to start."""

    def start_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the tracer is broken")

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the tracer is broken")


class BrokenProvider:
    def get_tracer(self, *args: Any, **kwargs: Any) -> BrokenTracer:
        return BrokenTracer()


async def test_a_broken_tracer_never_breaks_the_session(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel(TOOL_AND_COMPACTION)
    config = relay.Config(model_auto_compact_token_limit=1000, rollout=NO_ROLLOUT)
    async with (
        relay.open_session(
            config,
            model=model,
            tools=[constant_tool("lookup", LONG_OUTPUT)],
            tracer_provider=BrokenProvider(),  # type: ignore[arg-type]
        ) as session,
        testing.recording(session) as recorder,
    ):
        await testing.TestSession(session, model, recorder).turns("which build backend?")
    [complete] = recorder.of_type(relay.TurnComplete)
    assert complete.last_agent_message == "done"
    assert "tracing" in caplog.text


async def test_without_opentelemetry_a_session_has_no_tracer(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    model = ScriptedModel({"responses": ["hi"]})
    async with testing.open_test_session(model=model) as t:
        await t.turns("hello")
        assert t.session.model is model
    assert t.recorder.of_type(relay.TurnComplete)[0].last_agent_message == "hi"


@pytest.mark.slow
def test_a_session_sends_its_spans_to_the_global_provider(tmp_path: Path) -> None:
    """In a process of its own: the global provider can be set once, and every session of
    the process then writes trace lines."""
    code = (
        "import trio, relay\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
        "InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "async def main():\n"
        "    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))\n"
        "    async with relay.open_session(config) as s:\n"
        "        await s.ask('hello')\n"
        "trio.run(main)\n"
        "print(sorted(span.name for span in exporter.get_finished_spans()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['chat scripted', 'invoke_agent relay', 'relay.session']\n"


@pytest.mark.slow
def test_relay_runs_where_opentelemetry_cannot_be_imported(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import relay, trio\n"
        "async def main():\n"
        "    async with relay.open_session(relay.Config(rollout=relay.RolloutConfig("
        "enabled=False))) as s:\n"
        "        print((await s.ask('hello')).message)\n"
        "trio.run(main)\n"
        "print(sorted(m for m, v in sys.modules.items() if m.startswith('opentelemetry') and v))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["echo: hello", "[]"]


# ----------------------------------------------------------------------------- the command


def test_which_exporters_the_environment_asks_for() -> None:
    assert exporters({}) == (CONSOLE,)
    assert exporters({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) == (OTLP,)
    assert exporters({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h/v1/traces"}) == (OTLP,)
    assert exporters({"OTEL_TRACES_EXPORTER": "otlp"}) == (OTLP,)
    assert exporters({"OTEL_TRACES_EXPORTER": "console, otlp_proto_http"}) == (CONSOLE, OTLP)
    assert exporters({"OTEL_TRACES_EXPORTER": "none"}) == ()
    with pytest.raises(relay.ConfigError, match="OTLP over 'grpc' is not supported"):
        exporters({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(relay.ConfigError, match="'zipkin' is not an exporter relay has"):
        exporters({"OTEL_TRACES_EXPORTER": "zipkin"})
    assert wanted(True, {})
    assert not wanted(False, {})
    assert not wanted(False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert wanted(False, {"OTEL_TRACES_EXPORTER": "console"})
    assert not wanted(False, {"OTEL_TRACES_EXPORTER": "none"})
    assert not wanted(True, {"OTEL_SDK_DISABLED": "true"})


ONE_TURN = json.dumps({"op": {"type": "user_turn", "items": [{"type": "text", "text": "hi"}]}})


def relay_command(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``relay ARGS`` in a fresh process, without the OTEL variables of the test's own."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ.update(env or {})
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "relay"]
    return subprocess.run(
        command if code else [*command, *args],
        input=ONE_TURN + "\n",
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_relay_run_otel_writes_one_json_line_per_span_to_stderr(tmp_path: Path) -> None:
    result = relay_command(
        "run", "-", "--json", "--otel", "-c", "rollout.enabled=false", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    spans = [json.loads(line) for line in result.stderr.splitlines()]
    assert sorted(span["name"] for span in spans) == [
        "chat scripted",
        "invoke_agent relay",
        "relay.session",
    ]
    assert {span["resource"]["attributes"]["service.name"] for span in spans} == {"relay"}
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["msg"]["type"] == "shutdown_complete"
    assert all("msg" in event for event in events)


@pytest.mark.slow
def test_relay_exec_otel_keeps_stdout_the_answer(tmp_path: Path) -> None:
    result = relay_command(
        "exec",
        "hello",
        "--otel",
        "-c",
        "rollout.enabled=false",
        env={"OTEL_SERVICE_NAME": "my-agent"},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "echo: hello\n"
    spans = [json.loads(line) for line in result.stderr.splitlines()]
    assert {span["resource"]["attributes"]["service.name"] for span in spans} == {"my-agent"}


@pytest.mark.slow
def test_relay_run_otel_without_the_sdk_is_a_usage_error(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"
        "from relay._cli._main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = relay_command("run", "-", "--otel", cwd=tmp_path, code=code)
    assert result.returncode == 2
    assert result.stderr == (
        "relay: --otel needs the OpenTelemetry SDK: install opentelemetry-sdk "
        "(pip install 'relay-runtime[otel]' opentelemetry-sdk)\n"
    )
    assert result.stdout == ""
    asked = relay_command(
        "run", "-", cwd=tmp_path, code=code, env={"OTEL_TRACES_EXPORTER": "console"}
    )
    assert asked.returncode == 0
    assert asked.stderr.startswith("relay: warning: no traces: --otel needs the OpenTelemetry SDK")


@pytest.mark.slow
def test_relay_run_otel_exports_otlp_over_http(tmp_path: Path) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    with otlp_receiver() as (endpoint, bodies):
        result = relay_command(
            "run",
            "-",
            "--json",
            "--otel",
            "-c",
            "rollout.enabled=false",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "relay-otlp"},
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert bodies and {path for path, _ in bodies} == {"/v1/traces"}
    names: list[str] = []
    services: set[str] = set()
    for _, body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "relay"
                names += [span.name for span in scope_spans.spans]
    assert sorted(names) == ["chat scripted", "invoke_agent relay", "relay.session"]
    assert services == {"relay-otlp"}


class StuckProcessor(SimpleSpanProcessor):
    """A span processor whose flush waits until it is let go (a collector that does not
    answer)."""

    def __init__(self) -> None:
        super().__init__(InMemorySpanExporter())
        self.release = threading.Event()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.release.wait(60)


def test_the_command_waits_for_its_spans_a_bounded_time() -> None:
    from relay._otel._export import Export

    provider = TracerProvider()
    stuck = StuckProcessor()
    provider.add_span_processor(stuck)
    try:
        assert Export(provider).close(timeout=0.05) is False
    finally:
        stuck.release.set()
    flushed = TracerProvider()
    flushed.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    assert Export(flushed).close() is True


async def test_a_compaction_that_would_not_make_the_context_smaller_is_not_installed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Over a limit of 50 tokens from the first exchange; the summary is longer than the
    # conversation: the pre-turn compaction is not installed, its span says so, with no error.
    traced = Traced()
    script = {"responses": ["a1", "A summary. " * 400, "a2"]}
    config = relay.Config(rollout=NO_ROLLOUT, model_auto_compact_token_limit=50)
    async with traced_session(traced, script, config=config) as t:
        await t.turns("one", "two")
    said = [m.message for m in t.recorder.msgs if isinstance(m, relay.WarningEvent)]
    assert any(m.startswith("Nothing was changed") for m in said), said
    spans = traced.named("relay.compaction")
    unchanged = [s for s in spans if attributes(s)[n.RELAY_COMPACTION_INSTALLED] is False]
    assert unchanged, [attributes(s) for s in spans]
    assert all(s.status.status_code is StatusCode.UNSET for s in unchanged)
