"""The whole runtime under random ops, model scripts and backends, in virtual time.

Each example opens a session with a compaction backend chosen among every branch of the
selection (local, remote V1, remote V2, token budget, and the fallbacks between them), an
auto-compaction limit or none, rollout on, hooks that sometimes stop a compaction before or
after it installs, and a model script of random replies: texts, tool calls, usage over the
limit, delays, stalls, HTTP errors, in-stream failures, cut connections, unknown items and
malformed compaction answers. It then submits a random sequence of user turns (every
``on_busy``, with model and cwd changes), ``compact``, ``interrupt``, ``override_turn_context``,
waits and ``shutdown``. After every step:

- the event-stream invariants of docs/reliability.md hold (``tests/invariants.py``);
- the history is well-formed: every call has exactly one output after it (once settled);
- no ``error{internal}`` was reported (a task never crashes);
- a compaction that failed changed nothing: the window is the one it started in and the
  history still begins with what it was when the compaction started;
- at rest (no task running), the rollout reconstructs the live session.

Background compaction is on in every example (at a random share of the limit), and post-turn
compaction in some: the same random scripts make its backend slow, failing or stalled, and
the probe's hooks stop some of its installs. Every install of a background result is checked
against the install rule as the session saw it: the live history began with the snapshot, in
the snapshot's window (a stale result is never installed), and what it installed ends with
exactly the items recorded since the snapshot (nothing lost, nothing twice). When the session
is closed, no background job is left running.

At the end: the same, and every compaction the rollout records has the shape its backend
promises (summary or compaction item last, or a fresh window), is one of the installed
compactions, and was made by the backend docs/compaction.md selects; nothing but events, input
and context lies in the rollout between a failed compaction and its turn's end.

The tools the scripts call (``sleep``, refused paths, unknown tools) never touch a worker
thread: under the autojump clock, a thread's real duration would let virtual time jump, and
the examples would stop being reproducible.

It runs 2,000 examples, scaled by the Hypothesis profile (``tests/hypothesis_profiles.py``).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import hypothesis
import hypothesis.strategies as st
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings

import relay
from relay import testing
from relay._base._rollout_lines import Compacted
from relay._base._tokens import ApproxEstimator
from relay._core._summary import is_summary
from relay._rollout._reader import read_rollout
from relay._rollout._resume import INTERRUPTED_OUTPUT, reconstruct
from relay.tasks.compaction import Compactor
from relay.tasks.compaction import _background as background_module
from relay.tasks.compaction._history import WORK_STATE_MARKER
from tests.hypothesis_profiles import examples
from tests.invariants import check_event_invariants
from tests.reliability._checks import (
    check_compacted_part,
    check_rollout_matches,
    check_well_formed,
    compacted_lines,
    expected_backend,
)

#: The install as the compactor computes it, kept before the probe stands in for it.
INSTALLED_HISTORY = background_module.installed_history

EXAMPLES = examples(2000)

#: The auto-compaction limit when one is configured; usage values are drawn around it.
LIMIT = 3_000

#: Models: no known window, a large window, a smaller one (a switch to it is a downshift).
MODELS = ("scripted", "gpt-4.1", "gpt-4o")

# ----------------------------------------------------------------------------- model scripts

usages = st.sampled_from([None, 60, LIMIT - 100, LIMIT + 500, LIMIT + 500, 140_000])


def _with(reply: dict[str, Any], usage: int | None, delay: int, stall: int) -> dict[str, Any]:
    if usage is not None:
        reply["total_tokens"] = usage
    if delay:
        reply["delay_ms"] = delay
    if stall:
        reply["stall_ms"] = stall
    return reply


def _call(name: str, arguments: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments}}


streamed = st.sampled_from(
    [
        {"text": "Done."},
        {"text": "A longer answer, " * 8},
        # As a summary, this one leaves usage over the limit: the loop guard escalates.
        {"text": "A summary that shrinks nothing. " * 500},
        _call("sleep", {"seconds": 0}),
        _call("sleep", {"seconds": 0.05}),
        _call("sleep", {"seconds": 30}),
        _call("read_file", {"path": "../outside.txt"}),
        _call("read_file", "not json"),
        _call("gated", {"target": "a"}),
        _call("gated", {"target": "b"}),
        _call("no_such_tool", {}),
        {"compaction": "ENC-SCRIPTED"},
        {"output": [{"type": "mystery_item", "detail": 1}]},
        {
            "output": [
                {"type": "reasoning", "id": "rs-1", "summary": []},
                {"type": "message", "role": "assistant", "content": []},
            ]
        },
        {
            "output": [
                {"type": "compaction", "encrypted_content": "A"},
                {"type": "compaction", "encrypted_content": "B"},
            ]
        },
        {"text": "failed", "stream_error": {"code": "server_error", "message": "overloaded"}},
        {"text": "failed", "stream_error": {"code": "context_length_exceeded"}},
        {"text": "cut short", "cut_after_events": 2},
        {"text": "cut at once", "cut_after_events": 0},
    ]
)

http_errors = st.sampled_from(
    [
        {"http_error": {"status": 500, "message": "boom"}},
        {"http_error": {"status": 503, "message": "busy"}},
        {"http_error": {"status": 429, "message": "slow down", "retry_after": 1.5}},
        {"http_error": {"status": 429, "code": "insufficient_quota", "message": "no quota"}},
        {"http_error": {"status": 401, "message": "bad key"}},
        {"http_error": {"status": 400, "code": "context_length_exceeded", "message": "long"}},
    ]
)

shaped = st.builds(
    _with,
    streamed.map(dict),
    usages,
    st.sampled_from([0, 0, 5, 400]),
    st.sampled_from([0, 0, 3, 250]),
)
#: One reply in five is an HTTP error.
replies = st.one_of(shaped, shaped, shaped, shaped, http_errors.map(dict))

compact_replies = st.sampled_from(
    [
        {
            "output": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "u"}],
                },
                {"type": "compaction", "encrypted_content": "ENC-V1"},
            ]
        },
        {
            "output": [
                {"type": "message", "role": "developer", "content": []},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "<environment_context>x"}],
                },
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "so far"}],
                },
                {"type": "function_call", "name": "sleep", "arguments": "{}", "call_id": "c-x"},
                {"type": "compaction", "encrypted_content": "ENC-V1"},
                {"type": "reasoning", "id": "rs-9", "summary": []},
            ]
        },
        {"raw": "garbage"},
        {"raw": None},
        {"raw": {"output": "not a list"}},
        {"raw": {"output": [{"type": "message"}]}},
        {"raw": {"items": []}},
        {"http_error": {"status": 500}},
        {"http_error": {"status": 400, "message": "bad compaction request"}},
        {"http_error": {"status": 429, "retry_after": 0.5}},
        {"output": []},
        {"output": [{"type": "compaction", "encrypted_content": "LATE"}], "delay_ms": 300},
    ]
)

# ----------------------------------------------------------------------------- configuration


#: ``(remote_compaction, features.remote_compaction_v2, features.token_budget)``: every branch
#: of the backend selection, the fallbacks included (a V2 provider with the feature off uses
#: V1; the feature without a capable provider stays local).
SELECTIONS = (
    ("unsupported", False, False),
    ("unsupported", True, False),
    ("v1", False, False),
    ("v2", False, False),
    ("v2", True, False),
    ("v2", True, False),
    ("v1", True, True),
    ("unsupported", False, True),
)


@attrs.frozen
class Setup:
    """What an example runs with (drawn once per example)."""

    selection: tuple[str, bool, bool]
    limit: int | None
    script: dict[str, Any]
    stop_before: int | None
    """The pre-compact hook stops the compaction it sees in this place (1-based)."""
    stop_after: int | None
    """The post-compact hook stops the turn of the compaction it sees in this place."""
    background: int
    """``background_compact_threshold_percent``."""
    post_turn: int
    """``model_post_turn_compact_threshold_percent``."""
    work_state: bool = False
    """``features.work_state``: every install places the record."""
    masking: bool = False
    """``features.tool_output_masking``: old outputs give way to placeholders first."""
    decisions: tuple[str, ...] | None = None
    """The callback's decisions in turn (cycling), or None: ``exec_approval`` ops decide."""


setups = st.builds(
    Setup,
    selection=st.sampled_from(SELECTIONS),
    limit=st.sampled_from([None, LIMIT, LIMIT]),
    script=st.fixed_dictionaries(
        {
            "responses": st.lists(replies, min_size=2, max_size=12),
            "compact": st.lists(compact_replies, max_size=3),
        }
    ),
    stop_before=st.sampled_from([None, None, None, 1, 2]),
    stop_after=st.sampled_from([None, None, None, 1, 2]),
    background=st.sampled_from([30, 60, 90]),
    post_turn=st.sampled_from([0, 0, 10]),
    work_state=st.booleans(),
    masking=st.booleans(),
    decisions=st.none()
    | st.lists(st.sampled_from(list(relay.ReviewDecision)), min_size=1, max_size=4).map(tuple),
)

#: Action kinds, weighted: turns and waits for them are what let the session get somewhere.
KINDS = (
    *("turn", "turn", "turn", "settle", "settle", "advance"),
    *("compact", "compact", "interrupt", "override", "shutdown"),
    *("decide", "decide", "crash"),
)


def action(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    match kind:
        case "turn":
            return st.tuples(
                st.just(kind),
                st.booleans(),
                st.sampled_from(list(relay.OnBusy)),
                st.sampled_from([None, None, *MODELS]),
                st.sampled_from([None, None, 0, 1]),
            )
        case "compact":
            return st.tuples(st.just(kind), st.sampled_from([None, "keep the file names"]))
        case "override":
            return st.tuples(
                st.just(kind), st.sampled_from([None, *MODELS]), st.sampled_from([None, 0, 1])
            )
        case "advance":
            return st.tuples(st.just(kind), st.sampled_from([0.001, 0.05, 0.3, 2.0, 40.0]))
        case "decide":
            return st.tuples(
                st.just(kind), st.sampled_from(list(relay.ReviewDecision)), st.booleans()
            )
        case _:
            return st.tuples(st.just(kind))


actions = st.sampled_from(KINDS).flatmap(action)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two working directories (one with project instructions) and a rollout root."""
    root = tmp_path_factory.mktemp("stateful")
    for name in ("a", "b"):
        (root / name).mkdir()
        (root / name / "notes.txt").write_text(f"notes of {name}\n")
    (root / "a" / "AGENTS.md").write_text("Be brief.\n")
    (root / "outside.txt").write_text("must not be read\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def make_config(setup: Setup, workspace: Path, rollouts: Path) -> relay.Config:
    return relay.Config(
        model_provider="scripted",
        model_providers={
            "scripted": relay.ProviderConfig(
                name="scripted",
                remote_compaction=setup.selection[0],  # type: ignore[arg-type]
                stream_max_retries=2,
                request_max_retries=1,
            )
        },
        features=relay.Features(
            remote_compaction_v2=setup.selection[1],
            token_budget=setup.selection[2],
            work_state=setup.work_state,
            tool_output_masking=setup.masking,
        ),
        model_auto_compact_token_limit=setup.limit,
        background_compact_threshold_percent=setup.background,
        model_post_turn_compact_threshold_percent=setup.post_turn,
        base_instructions="You are tested.",
        cwd=str(workspace / "a"),
        rollout=relay.RolloutConfig(enabled=True, dir=str(rollouts)),
    )


# ----------------------------------------------------------------------------- the probe


@attrs.define
class Attempt:
    """A compaction as its pre-compact hook saw the session."""

    turn_id: str
    history: tuple[relay.ResponseItem, ...]
    window_id: str
    window_number: int
    stopped: bool


@attrs.frozen
class BackgroundInstall:
    """A background result as it was installed."""

    current: bool
    """The install rule held against the live session."""
    since: tuple[relay.ResponseItem, ...]
    """What the live history held after the snapshot."""
    context_size: int
    """Items before ``since``: the compacted snapshot and the fresh initial context."""
    compacted_size: int
    """Items of the compacted snapshot."""
    result: tuple[relay.ResponseItem, ...]
    """The history installed."""


@attrs.define
class Probe:
    """Observes the session from inside: a pre-compact hook snapshots it. The hooks also
    stop the compaction (before) or its turn (after) when the example asks them to."""

    stop_before: int | None = None
    stop_after: int | None = None
    session: relay.Session | None = None
    attempts: list[Attempt] = attrs.field(factory=list)
    installed: int = 0
    sent: set[str] = attrs.field(factory=set)
    """The texts of the turns the example submitted: what the user said, whether the session
    reported it (``user_message``) or kept it unannounced (steered input an aborted turn
    never picked up, a queued turn a shutdown dropped)."""

    async def before_compaction(self, info: relay.HookInput) -> relay.HookStop | None:
        session = self.session
        assert session is not None
        stop = len(self.attempts) + 1 == self.stop_before
        self.attempts.append(
            Attempt(
                info.turn_id,
                tuple(session.history.items),
                session.snapshot().window_id,
                session.snapshot().window_number,
                stop,
            )
        )
        return relay.HookStop("the probe stops it") if stop else None

    async def after_compaction(self, info: relay.HookInput) -> relay.HookStop | None:
        self.installed += 1
        return relay.HookStop("the probe stops it") if self.installed == self.stop_after else None

    jobs: list[relay.lowlevel.BackgroundJob] = attrs.field(factory=list)
    installs: list[BackgroundInstall] = attrs.field(factory=list)

    def see_job(self, job: relay.lowlevel.BackgroundJob | None) -> None:
        """Keep every background job the session ever held."""
        if job is not None and job not in self.jobs:
            self.jobs.append(job)

    def compactor(self) -> Compactor:
        """relay's compactor, watched: background jobs start only at its points."""
        probe = self

        class Watched(Compactor):
            async def compact(
                self,
                ctx: relay.lowlevel.CompactionContext,
                request: relay.lowlevel.CompactionRequest,
            ) -> relay.lowlevel.CompactionOutcome:
                try:
                    return await super().compact(ctx, request)
                finally:
                    probe.see_job(ctx.background.job)

        return Watched()

    def installed_history(
        self,
        compacted: list[relay.ResponseItem],
        initial: list[relay.ResponseItem],
        snapshot: relay.lowlevel.Snapshot,
        live: list[relay.ResponseItem],
    ) -> list[relay.ResponseItem]:
        """Observe every background install as it is computed (then compute it as usual)."""
        session = self.session
        assert session is not None
        result = INSTALLED_HISTORY(compacted, initial, snapshot, live)
        self.installs.append(
            BackgroundInstall(
                current=snapshot.window_id == session.snapshot().window_id
                and tuple(live[: len(snapshot.items)]) == snapshot.items,
                since=tuple(live[len(snapshot.items) :]),
                context_size=len(compacted) + len(initial),
                compacted_size=len(compacted),
                result=tuple(result),
            )
        )
        return result

    @property
    def started(self) -> list[Attempt]:
        """The attempts that went on to report a compaction item."""
        return [attempt for attempt in self.attempts if not attempt.stopped]


def compaction_outcomes(events: list[relay.Event]) -> list[tuple[str, str]]:
    """``(turn id, outcome)`` of each compaction item, in order: ``installed``, ``failed``
    (the turn went on to report an error and end normally), ``aborted`` or ``running``."""
    outcomes: list[tuple[str, str]] = []
    open_item: dict[str, int] = {}
    errored: set[int] = set()
    for event in events:
        msg = event.msg
        match msg:
            case relay.ItemStarted(item=relay.ContextCompactionItem()):
                open_item[event.id] = len(outcomes)
                outcomes.append((event.id, "running"))
            case relay.ItemCompleted(item=relay.ContextCompactionItem()):
                outcomes[open_item.pop(event.id)] = (event.id, "installed")
            case relay.ErrorEvent() if event.id in open_item:
                errored.add(open_item[event.id])
            case relay.TurnComplete() | relay.TurnAborted() if event.id in open_item:
                index = open_item.pop(event.id)
                failed = isinstance(msg, relay.TurnComplete) and index in errored
                outcomes[index] = (event.id, "failed" if failed else "aborted")
            case _:
                pass
    return outcomes


def check_failed_compactions(probe: Probe, events: list[relay.Event]) -> None:
    """A failed compaction changed nothing (docs/reliability.md), seen live.

    The pre-compact hook runs once per compaction that reports an item, in the same order,
    so snapshots and outcomes pair up. After a failure, until the next compaction starts, the
    window is the one the compaction started in and the history only grew (nothing but a
    compaction replaces it).
    """
    session = probe.session
    assert session is not None
    outcomes = compaction_outcomes(events)
    attempts = probe.started
    assert len(attempts) >= len(outcomes)
    if not outcomes or outcomes[-1][1] != "failed" or len(attempts) != len(outcomes):
        return
    attempt = attempts[-1]
    assert attempt.turn_id == outcomes[-1][0]
    assert session.snapshot().window_id == attempt.window_id, "a failed compaction started a window"
    assert session.snapshot().window_number == attempt.window_number
    now = tuple(session.history.items)
    assert now[: len(attempt.history)] == attempt.history, "a failed compaction changed history"


def check_failed_in_rollout(records: list[dict[str, Any]], failed_turns: set[str]) -> None:
    """A failed compaction changed nothing in the rollout (docs/reliability.md).

    A failed compaction is the last thing its turn does: from its pre-compact hook to the
    turn's end, the rollout may only hold events, the ``ids`` line before the turn's end, the
    user input steered into the turn, and, when the compaction ran before the turn, the turn's
    initial context and its input (recorded so that nothing the user said is lost).
    """
    for turn_id in failed_turns:
        end = next(
            index
            for index, record in enumerate(records)
            if record["type"] == "event_msg"
            and record["payload"].get("type") == "turn_complete"
            and record["payload"].get("turn_id") == turn_id
        )
        start = max(
            index
            for index, record in enumerate(records[:end])
            if record["type"] == "event_msg"
            and record["payload"].get("type") == "hook_completed"
            and record["payload"].get("event") == "pre_compact"
        )
        for record in records[start + 1 : end]:
            if record["type"] in {"event_msg", "ids", "world_state", "turn_context"}:
                continue
            payload = record["payload"]
            assert record["type"] == "response_item", record
            assert payload.get("type") == "message", record
            assert payload.get("role") in {"user", "developer"}, record


def check_step(probe: Probe, recorder: testing.EventRecorder) -> None:
    session = probe.session
    assert session is not None
    events = recorder.events
    check_event_invariants(events, finished=False)
    settled = session.statistics().running_turn is None
    check_well_formed(session.history.items, settled=settled)
    if settled and session.rollout is not None and not session.closed:
        # Invariant 6 at every rest: everything written so far gives the live session.
        session.rollout.flush()
        check_rollout_matches(session, session.rollout.path)
    internal = [
        e.msg for e in events if isinstance(e.msg, relay.ErrorEvent) and e.msg.code == "internal"
    ]
    assert not internal, internal
    check_failed_compactions(probe, events)
    check_auto_compaction_bound(events, session.config.max_auto_compactions_per_turn)


def check_auto_compaction_bound(events: list[relay.Event], bound: int) -> None:
    """No turn runs more automatic compactions than the loop guard allows."""
    per_turn: dict[str, int] = {}
    for event in events:
        msg = event.msg
        if (
            isinstance(msg, relay.ItemCompleted)
            and isinstance(msg.item, relay.ContextCompactionItem)
            and msg.item.receipt is not None
            and msg.item.receipt.trigger is not relay.CompactionTrigger.MANUAL
        ):
            per_turn[event.id] = per_turn.get(event.id, 0) + 1
    assert all(count <= bound for count in per_turn.values()), per_turn


def check_end(
    probe: Probe, recorder: testing.EventRecorder, config: relay.Config, path: Path
) -> None:
    session = probe.session
    assert session is not None
    events = recorder.events
    check_event_invariants(events, finished=True)
    check_well_formed(session.history.items, settled=True)
    rollout = check_rollout_matches(session, path)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    failed = {turn for turn, outcome in compaction_outcomes(events) if outcome == "failed"}
    check_failed_in_rollout(records, failed)
    backend = expected_backend(config)
    receipts = [
        e.msg.item.receipt
        for e in events
        if isinstance(e.msg, relay.ItemCompleted)
        and isinstance(e.msg.item, relay.ContextCompactionItem)
    ]
    lines = compacted_lines(rollout)
    check_background(probe, lines, backend.value, probe.sent, len(unchanged(recorder)))
    hypothesis.event(f"backend {backend.value}")
    for _, outcome in compaction_outcomes(events):
        hypothesis.event(f"compaction {outcome}")
    for msg in recorder.msgs:
        if isinstance(msg, relay.ErrorEvent):
            hypothesis.event(f"error {msg.code}")
            if msg.code == relay.ErrorCode.COMPACTION_LOOP:
                assert msg.message.startswith("The turn ends: automatic compaction"), msg
        elif isinstance(msg, relay.TurnAborted):
            hypothesis.event(f"turn_aborted {msg.reason}")
        elif isinstance(msg, relay.BackgroundEvent) and "background" in msg.message:
            hypothesis.event(f"background {msg.message.split()[0].lower()}")
        elif isinstance(msg, relay.ItemCompleted) and isinstance(
            msg.item, relay.ContextCompactionItem
        ):
            if msg.item.receipt is None:
                hypothesis.event("compaction not installed: not smaller")
            else:
                hypothesis.event(f"trigger {msg.item.receipt.trigger}")
    # A compaction ends without a receipt only when it would not have made the context
    # smaller, and a warning says so (docs/compaction.md).
    assert receipts.count(None) == len(unchanged(recorder))
    receipts = [receipt for receipt in receipts if receipt is not None]
    # Invariant 4 on the rollout: exactly the installed compactions are recorded.
    assert len(lines) == len(receipts) == session.snapshot().window_number
    for line, receipt in zip(lines, receipts, strict=True):
        assert receipt is not None
        # A summary that left usage over the limit escalates to a fresh window.
        escalated = receipt.backend == "token_budget" and receipt.trigger is not (
            relay.CompactionTrigger.MANUAL
        )
        assert receipt.backend == backend.value or escalated, receipt
        if escalated:
            hypothesis.event("escalated to a fresh window")
        assert line.replacement_history is not None
        assert line.receipt == receipt
        if not receipt.background:
            check_compacted_part(
                line.replacement_history,
                receipt.backend,
                probe.sent,
                refused=receipt.summary_refused is not None,
            )


def _records(path: Path) -> list[dict[str, Any]]:
    records = []
    for raw in path.read_bytes().split(b"\n"):
        try:
            records.append(json.loads(raw))
        except ValueError:
            continue  # a line cut short
    return records


def check_approved_before_run(path: Path) -> None:
    """Nothing that needs an approval runs unapproved: the intent of every ``gated`` call
    comes after its approval, or after a grant of the tool for the session."""
    granted = False
    approved: set[str] = set()
    gated: set[str] = set()
    for record in _records(path):
        payload: dict[str, Any] = record.get("payload") or {}
        match record.get("type"):
            case "response_item" if payload.get("name") == "gated":
                gated.add(payload["call_id"])
            case "approval":
                if payload["decision"] in ("approved", "approved_for_session"):
                    approved.add(payload["call_id"])
                if payload["decision"] == "approved_for_session":
                    granted = granted or payload["tool"] == "gated"
            case "intent" if payload["call_id"] in gated:
                assert granted or payload["call_id"] in approved, payload
            case _:
                pass


def check_crash_image(path: Path, copy: Path) -> None:
    """A resume from the file as it is now answers every call that has no output: ``aborted``
    for one that never ran (a pending approval never survives its process), ``interrupted``
    for one whose intent was recorded; never by running it."""
    shutil.copyfile(path, copy)
    try:
        state = reconstruct(read_rollout(copy, for_resume=True))
    finally:
        copy.unlink()
    intents = {r["payload"]["call_id"] for r in _records(path) if r.get("type") == "intent"}
    for output in state.unanswered:
        if output.call_id in intents:
            assert output.output == INTERRUPTED_OUTPUT
        else:
            assert output.output == "aborted"
    check_well_formed([*state.history, *state.unanswered], settled=True)
    if state.unanswered:
        hypothesis.event("a crash leaves calls to answer")


def _is_record(item: relay.ResponseItem) -> bool:
    """Whether ``item`` is the work-state record's message."""
    return (
        isinstance(item, relay.Message)
        and item.role == "user"
        and item.text().startswith(WORK_STATE_MARKER)
    )


def _installs(line: Compacted, install: BackgroundInstall, sent: set[str]) -> bool:
    """Whether ``line`` installed ``install``'s result: with the work-state record (when the
    record is on) and the latest user message (when the result holds no copy of it), placed
    after the result was computed; the rest is the result."""
    assert line.replacement_history is not None
    result = [i for i in install.result if not _is_record(i)]
    placed = [i for i in line.replacement_history if not _is_record(i)]
    if (
        line.receipt is not None
        and line.receipt.summary_refused is not None
        and any(_is_record(i) for i in line.replacement_history)
    ):
        # The record stands for a refused summary: the result's summary is left out.
        result = [i for i in result if not is_summary(i)]
    latest = [
        i
        for i in placed
        if i not in result
        and isinstance(i, relay.Message)
        and i.role == "user"
        and i.text() in sent
    ]
    return len(latest) <= 1 and [i for i in placed if i not in latest] == result


def unchanged(recorder: testing.EventRecorder) -> list[relay.WarningEvent]:
    """The warnings of compactions not installed: they would not have made it smaller."""
    return [
        msg
        for msg in recorder.msgs
        if isinstance(msg, relay.WarningEvent) and msg.message.startswith("Nothing was changed")
    ]


def check_background(
    probe: Probe, lines: list[Compacted], backend: str, sent: set[str], refused: int
) -> None:
    """Every background install obeyed the rule and kept what came after its snapshot."""
    installed = [line for line in lines if line.receipt is not None and line.receipt.background]
    # Each computed install was installed (a hook stop comes before the computation), but for
    # one that would not have made the context smaller (at most ``refused`` of them).
    pairs = []
    for install in probe.installs:
        if installed[len(pairs) :] and _installs(installed[len(pairs)], install, sent):
            pairs.append((installed[len(pairs)], install))
        else:
            hypothesis.event("background result not installed: not smaller")
    assert len(pairs) == len(installed), "a background install no computation made"
    assert len(probe.installs) - len(pairs) <= refused
    for line, install in pairs:
        hypothesis.event("background result installed")
        assert install.current, "a stale background result was installed"
        # Every install places the work-state record (when the record is on) and the latest
        # user message (when the result holds no copy of it), after the result is computed:
        # the rest is the result.
        assert line.replacement_history is not None
        records = [item for item in line.replacement_history if _is_record(item)]
        assert len(records) <= 1, "one record at most"
        assert _installs(line, install, sent)
        assert install.result[install.context_size :] == install.since, "lost or duplicated"
        compacted = install.result[: install.compacted_size]
        if backend == "token_budget":
            compacted = install.result[: install.context_size]
        if compacted:
            check_compacted_part(compacted, backend, sent)
    assert probe.session is not None
    assert probe.session.statistics().background_compaction is None
    for job in probe.jobs:
        assert job.finished.is_set(), "background work outlived its session"


# ----------------------------------------------------------------------------- the test


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(setup=setups, data=st.data())
def test_random_ops_faults_and_backends_keep_every_promise(
    workspace: Path, setup: Setup, data: st.DataObject
) -> None:
    run_example(workspace, setup, data, actions)


# Background compaction in the foreground of the examples: usage that crosses the background
# threshold and then the limit, backends that are slow (seconds), failing or stopped by a
# hook, manual compactions and downshifts that make a snapshot stale, and time passing
# between turns so that results become ready.

bg_usages = st.sampled_from(
    [None, LIMIT * 4 // 10, LIMIT * 7 // 10, LIMIT + 500, LIMIT + 500, 140_000]
)

bg_shaped = st.builds(
    _with,
    st.sampled_from(
        [
            {"text": "Done."},
            {"text": "A longer answer, " * 8},
            {"compaction": "ENC-SCRIPTED"},
            _call("sleep", {"seconds": 0}),
            _call("context_window_status", {}),
            _call("new_context_window", {}),
        ]
    ).map(dict),
    bg_usages,
    st.sampled_from([0, 0, 500, 2000, 8000]),
    st.just(0),
)
bg_replies = st.one_of(
    bg_shaped,
    bg_shaped,
    bg_shaped,
    bg_shaped,
    st.sampled_from([{"http_error": {"status": 500, "message": "boom"}}]).map(dict),
)

bg_setups = st.builds(
    Setup,
    selection=st.sampled_from(SELECTIONS),
    limit=st.just(LIMIT),
    script=st.fixed_dictionaries(
        {
            "responses": st.lists(bg_replies, min_size=4, max_size=16),
            "compact": st.lists(compact_replies, max_size=3),
        }
    ),
    stop_before=st.sampled_from([None, None, 1, 2, 3]),
    stop_after=st.sampled_from([None, None, None, 1, 2]),
    background=st.sampled_from([30, 60, 60, 90]),
    post_turn=st.sampled_from([0, 0, 0, 10]),
    work_state=st.booleans(),
    masking=st.booleans(),
)

BG_KINDS = (*("turn", "turn", "turn", "turn", "advance", "advance"), "compact", "compact")
bg_actions = (
    st.sampled_from(BG_KINDS)
    .flatmap(action)
    .map(lambda a: ("advance", 0.5 + a[1] % 6) if a[0] == "advance" else a)
    .map(lambda a: ("turn", a[2] is not relay.OnBusy.REPLACE, *a[2:]) if a[0] == "turn" else a)
)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(setup=bg_setups, data=st.data())
def test_background_compaction_keeps_every_promise(
    workspace: Path, setup: Setup, data: st.DataObject
) -> None:
    run_example(workspace, setup, data, bg_actions)


def run_example(
    workspace: Path,
    setup: Setup,
    data: st.DataObject,
    actions: st.SearchStrategy[tuple[Any, ...]],
) -> None:
    """One example: a session, a random sequence of ``actions``, every check."""
    rollouts = workspace / "rollouts"
    config = make_config(setup, workspace, rollouts)
    cwds = [str(workspace / "a"), str(workspace / "b")]
    probe = Probe(setup.stop_before, setup.stop_after)
    recorder = testing.EventRecorder()
    paths: list[Path] = []

    ran: list[str] = []

    async def gated(args: Any, ctx: relay.ToolContext) -> str:
        ran.append(str(args.get("target")))
        return "done"

    decisions = iter(setup.decisions * 100) if setup.decisions else None

    def decide(request: relay.ExecApprovalRequest) -> relay.ReviewDecision:
        assert decisions is not None
        return relay.ReviewDecision(next(decisions))

    async def settle(session: relay.Session) -> None:
        """Wait until the session is idle, deciding every call that waits meanwhile."""
        with trio.fail_after(3600):
            while True:
                with trio.move_on_after(60):
                    await session.wait_idle()
                    return
                for call_id in session.statistics().pending_approvals:
                    decision = data.draw(st.sampled_from(list(relay.ReviewDecision)))
                    await session.submit(relay.ExecApproval(call_id, decision))

    async def main() -> None:
        hooks = [
            relay.CompactHook("pre_compact", probe.before_compaction, name="probe"),
            relay.CompactHook("post_compact", probe.after_compaction, name="probe"),
        ]
        async with (
            relay.open_session(
                config,
                model=testing.ScriptedModel(setup.script),
                clock=testing.fixed_clock,
                rng=random.Random(0),
                estimator=ApproxEstimator(),
                hooks=hooks,
                compactor=probe.compactor,
                tools=[
                    relay.Tool("gated", "Acts.", {"type": "object"}, gated, needs_approval=True)
                ],
                on_approval=decide if decisions is not None else None,
            ) as session,
            trio.open_nursery() as nursery,
        ):
            probe.session = session
            assert session.rollout is not None
            paths.append(session.rollout.path)
            nursery.start_soon(recorder.consume, session)
            for step in range(data.draw(st.integers(3, 16), label="steps")):
                action = data.draw(actions, label=f"action {step}")
                match action:
                    case ("turn", wait, on_busy, model, cwd):
                        probe.sent.add(f"request {step}")
                        await session.submit(
                            relay.UserTurn(
                                items=[relay.Text(f"request {step}")],
                                on_busy=on_busy,
                                model=model,
                                cwd=None if cwd is None else cwds[cwd],
                            )
                        )
                        if wait:
                            await settle(session)
                    case ("compact", instructions):
                        await session.submit(relay.Compact(instructions=instructions))
                    case ("interrupt",):
                        await session.submit(relay.Interrupt())
                    case ("override", model, cwd):
                        await session.submit(
                            relay.OverrideTurnContext(
                                model=model, cwd=None if cwd is None else cwds[cwd]
                            )
                        )
                    case ("advance", seconds):
                        await trio.sleep(seconds)
                    case ("settle",):
                        await settle(session)
                    case ("decide", decision, known):
                        pending = session.statistics().pending_approvals
                        call_id = pending[0] if known and pending else "nobody"
                        await session.submit(relay.ExecApproval(call_id, decision))
                    case ("crash",):
                        # What a crash now would leave: the file as it is on disk.
                        check_crash_image(session.rollout.path, workspace / "crash.jsonl")
                    case ("shutdown",):
                        await session.submit(relay.Shutdown())
                        await recorder.wait_for(relay.ShutdownComplete)
                        break
                    case _:
                        raise AssertionError(action)
                await trio.testing.wait_all_tasks_blocked()
                check_step(probe, recorder)
                check_approved_before_run(session.rollout.path)
            if not session.closed:
                await session.submit(relay.Shutdown())
                await recorder.wait_for(relay.ShutdownComplete)

    original = background_module.installed_history
    background_module.installed_history = probe.installed_history  # type: ignore[assignment]
    try:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        check_end(probe, recorder, config, paths[0])
    finally:
        background_module.installed_history = original
        for path in paths:
            path.unlink(missing_ok=True)
