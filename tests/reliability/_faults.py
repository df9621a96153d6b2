"""Faults of a model server, injected over a real loopback socket, and what a session makes of
them.

Each :class:`Fault` is a model script (and, for answers no model script can express, raw bytes
served by :mod:`tests.reliability._raw_server`) whose first answer to the faulted op is broken.
:func:`run_fault` runs one session against it through the real HTTP client (the openai SDK,
real sockets): the faulted op, then an ordinary turn, then ``shutdown``, and returns an
:class:`Observation`: the faulted op's events in short form, whether it still got its answer,
whether the next op worked, whether the rollout lost anything, and everything the session
wrote or sent (for the checks of ``test_faults.py`` and ``test_security.py``).

``tests/reliability/fault_table.py`` prints the table of docs/reliability.md from these
observations; ``test_faults.py`` asserts the expectations written here.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

import relay
from relay import testing
from relay._base._codec import to_json, type_tag
from relay._base._tokens import ApproxEstimator
from relay._models._mock_transport import SSE_HEADERS
from relay.testing import turn_ended
from tests.invariants import check_event_invariants
from tests.reliability._checks import check_rollout_matches, check_well_formed
from tests.reliability._raw_server import RawAnswer, open_raw_server, sse

#: The environment variable the provider reads its API key from.
KEY_ENV = "RELAY_FAULT_API_KEY"

#: The stream idle timeout of the provider; the stall fault stalls longer than this.
IDLE_MS = 1_500

#: Retries allowed by the provider (sampling and compaction requests).
STREAM_RETRIES = 2
#: The provider's bounds on what a server sends, small enough for a test to cross.
MAX_RETRY_AFTER_MS = 1_000
MAX_LINE_BYTES = 65_536
MAX_BODY_BYTES = 1024 * 1024
REQUEST_RETRIES = 1

#: Bound on a whole fault run; never reached when things work.
GUARD_S = 30

#: Events persisted to the rollout according to docs/rollout.md (the session's announcement, turn
#: lifecycle, messages, token counts, compactions, hook outcomes).
DOCUMENTED_PERSISTED = (
    relay.SessionConfigured,
    relay.TurnStarted,
    relay.TurnComplete,
    relay.TurnAborted,
    relay.UserMessage,
    relay.AgentMessage,
    relay.TokenCount,
    relay.ContextCompacted,
    relay.HookCompleted,
)


@attrs.frozen
class Fault:
    """A broken answer, and what the session must make of it."""

    name: str
    """Its row in the table."""
    responses: tuple[dict[str, Any], ...]
    """The model script's ``responses``; the faulted op gets the first one it asks for."""
    expected: tuple[str, ...]
    """The faulted op's events in short form (see :func:`summarize`)."""
    answered: bool
    """Whether the faulted op still gets its answer (the fault was retried away)."""
    compact: tuple[dict[str, Any], ...] = ()
    """The model script's ``compact`` replies."""
    raw: tuple[tuple[int, RawAnswer], ...] = ()
    """Requests (1-based) answered with raw bytes instead of the script."""
    op: Literal["turn", "compact"] = "turn"
    """The faulted op; ``compact`` runs after one ordinary turn."""
    remote: Literal["unsupported", "v1", "v2"] = "unsupported"
    """The provider's remote compaction."""
    min_duration_ms: int = 0
    """The faulted op takes at least this long (a server's retry-after is honoured)."""
    says: str = ""
    """Text the ``error`` (or the ``stream_error`` detail) names the fault with."""


RECOVERED = {"text": "Recovered answer."}

_HTML = (("content-type", "text/html; charset=utf-8"),)
_GZIP_SSE = (*SSE_HEADERS, ("content-encoding", "gzip"))

_CREATED = sse(json.dumps({"type": "response.created", "response": {"id": "r-raw"}}))


def first_stream_ends_with(
    event: dict[str, Any], name: str | None = None
) -> tuple[tuple[int, RawAnswer], ...]:
    """The first request is answered by a stream that starts and then sends ``event``."""
    return ((1, RawAnswer((_CREATED, sse(json.dumps(event), name)))),)


FAULTS: tuple[Fault, ...] = (
    Fault(
        "HTTP 500",
        ({"http_error": {"status": 500, "message": "internal failure"}}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        says="internal failure",
    ),
    Fault(
        "HTTP 503",
        ({"http_error": {"status": 503, "message": "overloaded"}}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        says="overloaded",
    ),
    Fault(
        "HTTP 429 with retry-after 0.5 s",
        ({"http_error": {"status": 429, "message": "slow down", "retry_after": 0.5}}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        min_duration_ms=500,
        says="slow down",
    ),
    Fault(
        "HTTP 429 with retry-after 3600 s (cap 1 s)",
        ({"http_error": {"status": 429, "message": "slow down", "retry_after": 3600}}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        min_duration_ms=MAX_RETRY_AFTER_MS,
        says="the server asked to wait 3600 s, more than the provider's max_retry_after_ms "
        "of 1 s); retrying in 1 s",
    ),
    Fault(
        "HTML page with status 200",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=((1, RawAnswer((b"<html><body>Sign in</body></html>",), 200, _HTML)),),
        says="the model server answered with text/html instead of an event stream (HTTP 200)",
    ),
    Fault(
        "SSE line past the bound (64 KiB)",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=((1, RawAnswer((_CREATED, b"data: " + b"x" * 100_000))),),
        says="the model server sent a line longer than 65536 bytes",
    ),
    Fault(
        "gzip bomb past the body bound (1 MiB)",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=((1, RawAnswer((gzip.compress(b": keep-alive\n" * 400_000),), 200, _GZIP_SSE)),),
        says="larger than 1048576 bytes once decompressed",
    ),
    Fault(
        "event with NaN",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=first_stream_ends_with({"type": "response.output_text.delta", "n": math.nan}),
        says="NaN is not a JSON number",
    ),
    Fault(
        "HTTP 429 quota exceeded",
        (
            {
                "http_error": {
                    "status": 429,
                    "code": "insufficient_quota",
                    "type": "insufficient_quota",
                    "message": "You exceeded your current quota.",
                }
            },
        ),
        ("turn_started", "error{quota_exceeded}", "turn_complete"),
        answered=False,
        says="exceeded your current quota",
    ),
    Fault(
        "HTTP 401",
        ({"http_error": {"status": 401, "code": "invalid_api_key", "message": "bad key"}},),
        ("turn_started", "error{unauthorized}", "turn_complete"),
        answered=False,
        says="bad key",
    ),
    Fault(
        "HTTP 400 context length",
        (
            {
                "http_error": {
                    "status": 400,
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model.",
                }
            },
        ),
        ("turn_started", "token_count", "error{context_window_exceeded}", "turn_complete"),
        answered=False,
        says="no longer fits the model's context window",
    ),
    Fault(
        "in-stream `error` event",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=first_stream_ends_with(
            {"type": "error", "code": "server_error", "message": "oops"}, "error"
        ),
        says="oops",
    ),
    Fault(
        "in-stream `error` event, context length",
        (),
        ("turn_started", "token_count", "error{context_window_exceeded}", "turn_complete"),
        answered=False,
        raw=first_stream_ends_with(
            {
                "type": "error",
                "code": "context_length_exceeded",
                "message": "too long",
            },
            "error",
        ),
        says="no longer fits the model's context window",
    ),
    Fault(
        "`response.failed`",
        (
            {"text": "lost", "stream_error": {"code": "server_error", "message": "failed"}},
            RECOVERED,
        ),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        says="failed",
    ),
    Fault(
        "`response.incomplete`",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=first_stream_ends_with(
            {
                "type": "response.incomplete",
                "response": {
                    "id": "r-raw",
                    "incomplete_details": {"reason": "content_filter"},
                },
            }
        ),
        says="incomplete response: content_filter",
    ),
    Fault(
        "connection cut mid-stream",
        ({"text": "cut short", "cut_after_events": 2}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        says="peer closed connection",
    ),
    Fault(
        f"stall past the idle timeout ({IDLE_MS} ms)",
        ({"text": "too slow", "stall_ms": 6_000}, RECOVERED),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        min_duration_ms=IDLE_MS,
        says="idle timeout: no event from the model server",
    ),
    Fault(
        "invalid SSE JSON",
        (RECOVERED,),
        ("turn_started", "stream_error(1/2)", "token_count", "turn_complete"),
        answered=True,
        raw=((1, RawAnswer((_CREATED, sse("{not json", "response.output_text.delta")))),),
        says="malformed event from the model server (invalid JSON)",
    ),
    Fault(
        "stream that fails on every retry",
        tuple({"http_error": {"status": 503, "message": "down"}} for _ in range(3)),
        (
            "turn_started",
            "stream_error(1/2)",
            "stream_error(2/2)",
            "error{server_error}",
            "turn_complete",
        ),
        answered=False,
        says="down",
    ),
    Fault(
        "compaction endpoint: not a JSON object",
        (),
        ("turn_started", "item_started{compaction}", "error{server_error}", "turn_complete"),
        answered=False,
        op="compact",
        remote="v1",
        compact=({"raw": "garbage"},),
        says="Error running remote compact task: the answer is not a JSON object (it is a string)",
    ),
    Fault(
        "compaction endpoint: output not a list",
        (),
        ("turn_started", "item_started{compaction}", "error{server_error}", "turn_complete"),
        answered=False,
        op="compact",
        remote="v1",
        compact=({"raw": {"output": {"type": "compaction"}}},),
        says="Error running remote compact task: output is not a list (it is an object)",
    ),
    Fault(
        "compaction endpoint: malformed item",
        (),
        ("turn_started", "item_started{compaction}", "error{server_error}", "turn_complete"),
        answered=False,
        op="compact",
        remote="v1",
        compact=({"raw": {"output": [{"type": "message", "role": 7}]}},),
        says="Error running remote compact task: output[0] is not a valid item",
    ),
    Fault(
        "compaction endpoint: body not JSON",
        (),
        ("turn_started", "item_started{compaction}", "error{server_error}", "turn_complete"),
        answered=False,
        op="compact",
        remote="v1",
        raw=(
            (
                2,
                RawAnswer(
                    (b"<html>502 Bad Gateway</html>",),
                    headers=(("content-type", "text/html"),),
                ),
            ),
        ),
        says="Error running remote compact task: the answer is not a JSON object",
    ),
    Fault(
        "compaction endpoint: HTTP 500 twice",
        (),
        (
            "turn_started",
            "item_started{compaction}",
            "error{server_error}",
            "turn_complete",
        ),
        answered=False,
        op="compact",
        remote="v1",
        compact=({"http_error": {"status": 500}}, {"http_error": {"status": 500}}),
        says="Error running remote compact task: scripted HTTP 500",
    ),
    Fault(
        "V2 compaction stream without a compaction item",
        ({"text": "warmed up"}, {"text": "no compaction here"}),
        ("turn_started", "item_started{compaction}", "error{server_error}", "turn_complete"),
        answered=False,
        op="compact",
        remote="v2",
        says="expected exactly one compaction item, got 0 compaction items of 1 output item",
    ),
    Fault(
        "local compaction: summary request cut twice, then answered",
        (
            {"text": "warmed up"},
            {"text": "cut", "cut_after_events": 1},
            {"text": "cut", "cut_after_events": 1},
            {"text": "The summary."},
        ),
        (
            "turn_started",
            "item_started{compaction}",
            "stream_error(1/2)",
            "stream_error(2/2)",
            "token_count",
            "item_completed{compaction}",
            "context_compacted",
            "warning",
            "turn_complete",
        ),
        answered=True,
        op="compact",
        says="peer closed connection",
    ),
)


@attrs.frozen
class Observation:
    """What a session did with a fault."""

    fault: Fault
    summary: tuple[str, ...]
    """The faulted op's events in short form."""
    answered: bool
    """The faulted op ended with an answer (a turn's agent message, or an installed
    compaction) and no ``error``."""
    next_ok: bool
    """The next op (an ordinary turn) completed with its answer and no error."""
    rollout_problem: str | None
    """Why the rollout does not hold everything the session did, or None."""
    invariant_problem: str | None
    """Why an invariant of docs/reliability.md or the history's shape does not hold, or None."""
    history_changed: bool
    """A failed compaction changed the history (never expected)."""
    duration_ms: int
    """The faulted op's ``duration_ms``."""
    events: tuple[relay.Event, ...]
    server_log: tuple[dict[str, Any], ...]
    rollout_text: str

    @property
    def recovered(self) -> bool:
        """The session keeps working and lost nothing."""
        return (
            self.next_ok
            and self.rollout_problem is None
            and self.invariant_problem is None
            and not self.history_changed
        )


def summarize(events: list[relay.Event], turn_id: str) -> tuple[str, ...]:
    """The events of one turn in short form: lifecycle, retries, errors, token counts and
    compaction items (messages, deltas, other items and work-state notes left out)."""
    out: list[str] = []
    for event in events:
        if event.id != turn_id:
            continue
        msg = event.msg
        match msg:
            case relay.ErrorEvent(code=code):
                out.append(f"error{{{code}}}")
            case relay.StreamErrorEvent(message=message):
                out.append(f"stream_error({message.removeprefix('Reconnecting... ')})")
            case relay.ItemStarted(item=relay.ContextCompactionItem()):
                out.append("item_started{compaction}")
            case relay.ItemCompleted(item=relay.ContextCompactionItem()):
                out.append("item_completed{compaction}")
            case (
                relay.ItemStarted()
                | relay.ItemCompleted()
                | relay.AgentMessageDelta()
                | relay.AgentMessage()
                | relay.UserMessage()
                | relay.WorkStateNoted()
            ):
                pass
            case _:
                out.append(type_tag(type(msg)))
    return tuple(out)


@contextmanager
def api_key_in_env(key: str) -> Iterator[None]:
    """``KEY_ENV`` set to ``key`` for the duration."""
    old = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = key
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = old


@asynccontextmanager
async def serve(fault: Fault) -> AsyncIterator[Any]:
    """The relay mock server for the fault's script, or the raw server when bytes are needed."""
    script = {"responses": list(fault.responses), "compact": list(fault.compact)}
    if fault.raw:
        async with open_raw_server(script, dict(fault.raw)) as server:
            yield server
    else:
        async with testing.open_mock_server(script) as server:
            yield server


def fault_config(fault: Fault, base_url: str, workdir: Path) -> relay.Config:
    provider = relay.ProviderConfig(
        name="faulty",
        base_url=base_url,
        env_key=KEY_ENV,
        remote_compaction=fault.remote,
        stream_max_retries=STREAM_RETRIES,
        request_max_retries=REQUEST_RETRIES,
        stream_idle_timeout_ms=IDLE_MS,
        max_retry_after_ms=MAX_RETRY_AFTER_MS,
        stream_max_line_bytes=MAX_LINE_BYTES,
        max_response_bytes=MAX_BODY_BYTES,
    )
    return relay.Config(
        model="gpt-test",
        model_provider="faulty",
        model_providers={"faulty": provider},
        features=relay.Features(remote_compaction_v2=fault.remote == "v2"),
        base_instructions="Answer briefly.",
        cwd=str(workdir),
        rollout=relay.RolloutConfig(enabled=True, dir=str(workdir / "sessions")),
    )


def _problem(check: Any) -> str | None:
    try:
        check()
    except AssertionError as exc:
        return str(exc) or repr(exc)
    return None


def check_nothing_lost(events: list[relay.Event], rollout_text: str) -> None:
    """Every event docs/rollout.md persists is in the rollout, in order; none is made up."""
    lines = [json.loads(line) for line in rollout_text.splitlines()]
    persisted = [line["payload"] for line in lines if line["type"] == "event_msg"]
    wanted = [to_json(e.msg) for e in events if isinstance(e.msg, DOCUMENTED_PERSISTED)]
    position = 0
    for payload in persisted:
        if position < len(wanted) and payload == wanted[position]:
            position += 1
    assert position == len(wanted), f"not in the rollout: {wanted[position]}"
    emitted = [to_json(e.msg) for e in events]
    for payload in persisted:
        assert payload in emitted, f"rollout event never emitted: {payload}"


async def run_fault(fault: Fault, workdir: Path, *, api_key: str) -> Observation:
    """Run the faulted op, an ordinary turn and ``shutdown`` in one session over loopback."""
    workdir.mkdir(parents=True, exist_ok=True)
    recorder = testing.EventRecorder()
    with trio.fail_after(GUARD_S), api_key_in_env(api_key):
        async with serve(fault) as server:
            config = fault_config(fault, server.base_url, workdir)
            async with (
                relay.open_session(
                    config,
                    clock=testing.fixed_clock,
                    rng=random.Random(0),
                    estimator=ApproxEstimator(),
                ) as session,
                testing.recording(session) as recorder,
            ):
                done = 0
                before: list[relay.ResponseItem] = []
                if fault.op == "compact":
                    await session.submit(relay.UserTurn(items=[relay.Text("warm up")]))
                    done += 1
                    await recorder.wait_for(turn_ended, done)
                    before = list(session.history.items)
                    faulted = await session.submit(relay.Compact())
                else:
                    faulted = await session.submit(
                        relay.UserTurn(items=[relay.Text("first request")])
                    )
                done += 1
                await recorder.wait_for(turn_ended, done)
                after_fault = list(session.history.items)
                following = await session.submit(
                    relay.UserTurn(items=[relay.Text("after the fault")])
                )
                done += 1
                await recorder.wait_for(turn_ended, done)
                await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)
            log = tuple(server.requests)
    events = recorder.events
    msgs = {sub: [e.msg for e in events if e.id == sub] for sub in (faulted, following)}
    errors = [m for m in msgs[faulted] if isinstance(m, relay.ErrorEvent)]
    end = msgs[faulted][-1]
    assert isinstance(end, relay.TurnComplete | relay.TurnAborted)
    if fault.op == "compact":
        answered = not errors and any(isinstance(m, relay.ContextCompacted) for m in msgs[faulted])
    else:
        answered = (
            not errors
            and isinstance(end, relay.TurnComplete)
            and end.last_agent_message is not None
        )
    last = msgs[following][-1]
    next_ok = (
        isinstance(last, relay.TurnComplete)
        and last.last_agent_message is not None
        and not any(isinstance(m, relay.ErrorEvent) for m in msgs[following])
    )
    assert session.rollout is not None
    path = session.rollout.path
    rollout_text = path.read_text(encoding="utf-8")

    def invariants() -> None:
        check_event_invariants(events, finished=True)
        check_well_formed(session.history.items, settled=True)

    def rollout() -> None:
        check_rollout_matches(session, path)
        check_nothing_lost(events, rollout_text)
        if fault.op == "compact" and not answered:
            assert '"type":"compacted"' not in rollout_text, "a failed compaction was recorded"

    return Observation(
        fault=fault,
        summary=summarize(events, faulted),
        answered=answered,
        next_ok=next_ok,
        rollout_problem=_problem(rollout),
        invariant_problem=_problem(invariants),
        history_changed=fault.op == "compact" and not answered and after_fault != before,
        duration_ms=end.duration_ms,
        events=tuple(events),
        server_log=log,
        rollout_text=rollout_text,
    )


def table(observations: list[Observation]) -> str:
    """The fault table of docs/reliability.md (Markdown), from what was observed."""
    return _table(
        (
            seen.fault.name,
            seen.summary,
            seen.answered,
            seen.next_ok,
            seen.rollout_problem is None,
            seen.recovered,
        )
        for seen in observations
    )


def expected_table() -> str:
    """The same table from what the faults expect (what ``test_faults.py`` asserts)."""
    return _table(
        (fault.name, fault.expected, fault.answered, True, True, True) for fault in FAULTS
    )


def _table(rows: Iterable[tuple[str, tuple[str, ...], bool, bool, bool, bool]]) -> str:
    lines = [
        "| fault | events of the faulted op | op answered | next op works | rollout complete "
        "| recovered |",
        "|---|---|---|---|---|---|",
    ]
    for name, summary, answered, next_ok, rollout_ok, recovered in rows:
        lines.append(
            f"| {name} | {', '.join(f'`{e}`' for e in summary)} | {_yes(answered)} "
            f"| {_yes(next_ok)} | {_yes(rollout_ok)} | {_yes(recovered)} |"
        )
    return "\n".join(lines)


def _yes(value: bool) -> str:
    return "yes" if value else "no"
