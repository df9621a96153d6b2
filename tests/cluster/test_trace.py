"""The spans of ``relay cluster run --otel`` and the trace context a client sends with an open,
with the SDK's in-memory exporter. No Ray."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import relay
from relay._cluster._trace import (
    RunTracer,
    carrier,
    host_export,
    host_variables,
    within_context,
)


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def by_name(finished: Any) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        found.setdefault(span.name, []).append(span)
    return found


def event(seq: int, msg: relay.EventMsg) -> relay.Event:
    return relay.Event(f"e{seq}", seq, msg)


def test_a_run_is_a_span_and_each_session_a_span_within_it(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    tracer = RunTracer(provider)
    with tracer.run(2, "own"):
        with tracer.session("a.jsonl") as first:
            first.opened("s-1", "relay-host-0")
            first.saw(event(1, relay.TurnStarted("t1", None, 1.0)))
            first.saw(
                event(
                    2,
                    relay.SessionResumed(
                        lost_host="relay-host-0",
                        host="relay-host-1",
                        aborted_turn="t1",
                        unhandled=(),
                        downtime_ms=5,
                    ),
                )
            )
            first.saw(event(3, relay.TurnStarted("t2", None, 2.0)))
        with tracer.session("b.jsonl") as second:
            second.opened("s-2", "relay-host-1")
            second.failed("b.jsonl line 2: wait_for 'turn_complete' can no longer be met")
    found = by_name(exporter.get_finished_spans())
    (run,) = found["relay.cluster.run"]
    sessions = {
        span.attributes["relay.cluster.script"]: span for span in found["relay.cluster.session"]
    }  # type: ignore[index]
    assert set(sessions) == {"a.jsonl", "b.jsonl"}
    for span in sessions.values():
        assert span.parent is not None and span.parent.span_id == run.context.span_id
    assert dict(run.attributes or {}) == {
        "relay.cluster.scripts": 2,
        "relay.cluster.deployment": "own",
        "relay.version": relay.__version__,
        "relay.cluster.turns": 2,
        "relay.cluster.failovers": 1,
        "relay.cluster.failures": 1,
        "error.type": "script_failed",
    }
    assert run.status.status_code is StatusCode.ERROR
    first_span = sessions["a.jsonl"]
    assert dict(first_span.attributes or {}) == {
        "relay.cluster.script": "a.jsonl",
        "gen_ai.conversation.id": "s-1",
        "relay.cluster.host": "relay-host-1",
        "relay.cluster.turns": 2,
        "relay.cluster.failovers": 1,
        "relay.cluster.outcome": "completed",
    }
    assert [(e.name, dict(e.attributes or {})) for e in first_span.events] == [
        (
            "relay.cluster.moved",
            {"relay.cluster.lost_host": "relay-host-0", "relay.cluster.host": "relay-host-1"},
        )
    ]
    assert first_span.status.status_code is StatusCode.UNSET
    second_span = sessions["b.jsonl"]
    assert second_span.attributes is not None
    assert second_span.attributes["relay.cluster.outcome"] == "failed"
    assert second_span.status.description == (
        "b.jsonl line 2: wait_for 'turn_complete' can no longer be met"
    )


def test_a_session_opened_on_a_host_is_a_child_of_the_span_current_at_the_caller(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("caller"):
        sent = carrier()
    assert sent is not None and "traceparent" in sent
    # On the host, in another process: the session's span starts within what was sent.
    with within_context(sent), tracer.start_as_current_span("relay.session"):
        pass
    with within_context(None):
        assert not trace.get_current_span().get_span_context().is_valid
    found = by_name(exporter.get_finished_spans())
    (caller,) = found["caller"]
    (session,) = found["relay.session"]
    assert session.context.trace_id == caller.context.trace_id
    assert session.parent is not None and session.parent.span_id == caller.context.span_id
    assert carrier() is None  # nothing current: nothing to send


def test_hosts_get_the_runs_otel_variables_only_when_its_spans_go_over_otlp() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "PATH": "/bin"}
    assert host_variables({**endpoint, "OTEL_SERVICE_NAME": "mine"}) == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_SERVICE_NAME": "mine",
        "OTEL_TRACES_EXPORTER": "otlp",
    }
    assert host_variables({"OTEL_TRACES_EXPORTER": "console"}) == {}
    assert host_variables({}) == {}


def test_a_host_exports_only_when_its_environment_asks() -> None:
    assert host_export({}) is None
    assert host_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is None
    assert host_export({"OTEL_TRACES_EXPORTER": "none"}) is None
    made = host_export({"OTEL_TRACES_EXPORTER": "console"})
    assert made is not None
    assert made.close()
