"""What every compaction keeps, whatever its backend (docs/compaction.md, "What every compaction
keeps"), as properties of whole sessions.

Each property draws a conversation: user messages that state constraints and decisions (one of
them pinned, perhaps), a turn that runs shell commands, states a plan with ``update_plan`` and
ends with the model's answer, and the size of what the compaction writes. The session is
compacted by each of the four backends, in the foreground (the ``compact`` op; an automatic
compaction before a turn or in the middle of one) and in the background (a background result
installed before a turn or in the middle of one). Pre- and post-compact hooks take the history
as each compaction found it and as it installed it; each clause is checked on the installed
history and on the first turn request the model receives after it.

The ``compact`` op is left out of the clause on size: a compaction the user asks for is
installed whatever its size (docs/decisions.md).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base._tokens import items_tokens
from relay._core._plan_tool import PLAN_TAKEN
from relay.lowlevel import CompactionRequest, Injection, decode_response_item, message_kind
from relay.tasks import TurnSteps
from relay.testing import turn_ended
from tests.hypothesis_profiles import examples

BACKENDS = ("local", "remote_v1", "remote_v2", "token_budget")
#: Where the compaction runs: the ``compact`` op, an automatic compaction before a turn or in the
#: middle of one, a background result installed before a turn or in the middle of one.
PATHS = ("manual", "pre_turn", "mid_turn", "background_pre_turn", "background_mid_turn")
AUTOMATIC = tuple(path for path in PATHS if path != "manual")

WINDOW = 100_000
LIMIT = 20_000
#: A response's usage that reaches the auto-compaction limit.
OVER = LIMIT + 500
#: A response's usage at 70 % of the limit: background work starts, nothing is due yet.
BACKGROUND = LIMIT * 7 // 10
#: The user's message after the compaction.
NEXT = "Go on."

SETTINGS = settings(
    max_examples=examples(12),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def config(backend: str, path: str, cwd: Path) -> relay.Config:
    """A session whose compactions use ``backend``, with the shell, a 100,000-token window, an
    auto-compaction limit of 20,000 tokens and, on the background paths, background compaction
    at 60 % of it."""
    remote = {"remote_v1": "v1", "remote_v2": "v2"}.get(backend, "unsupported")
    provider = relay.ProviderConfig(name="scripted", remote_compaction=remote)  # type: ignore[arg-type]
    return relay.Config(
        cwd=str(cwd),
        model_provider="scripted",
        model_providers={"scripted": provider},
        features=relay.Features(
            token_budget=backend == "token_budget", remote_compaction_v2=backend == "remote_v2"
        ),
        tools={"shell": True, "update_plan": True},
        model_context_window=WINDOW,
        model_auto_compact_token_limit=LIMIT,
        background_compact_threshold_percent=60 if path.startswith("background") else 0,
        rollout=relay.RolloutConfig(enabled=False),
    )


# ----------------------------------------------------------------------------- conversations


@attrs.frozen
class Conversation:
    """What a drawn session says and does before its compaction."""

    constraints: tuple[str, ...]
    """The user's messages before the work, one turn each: constraints and decisions."""
    answers: tuple[str, ...]
    """The model's answer to each of them."""
    pinned: int | None
    """The index of the constraint sent pinned, if one is."""
    work: str
    """The user's message of the turn that does the work: the latest before the compaction."""
    commands: tuple[tuple[str, int], ...]
    """The shell calls of that turn: what each prints, and its exit code."""
    plan: tuple[tuple[str, str], ...]
    """The plan the model states with ``update_plan``: (step, status)."""
    answer: str
    """The model's answer that ends the work turn."""
    summary: int
    """How many characters the compaction writes (summary or compaction item)."""


def argv(word: str, code: int) -> list[str]:
    return ["sh", "-c", f"echo {word}; exit {code}"]


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäéß", min_size=1, max_size=8)
PHRASES = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)
STATEMENTS = st.tuples(
    st.sampled_from(["Constraint", "Decision", "Never", "Always", "We agreed"]), PHRASES
).map(lambda parts: f"{parts[0]}: {parts[1]}.")


@st.composite
def plans(draw: st.DrawFn) -> tuple[tuple[str, str], ...]:
    steps = draw(st.lists(PHRASES, min_size=1, max_size=3, unique=True))
    statuses = [draw(st.sampled_from(["pending", "completed"])) for _ in steps]
    doing = draw(st.none() | st.integers(0, len(steps) - 1))
    if doing is not None:
        statuses[doing] = "in_progress"
    return tuple(zip(steps, statuses, strict=True))


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    constraints = draw(st.lists(STATEMENTS, min_size=1, max_size=3, unique=True))
    words = draw(
        st.lists(st.text(alphabet="abcdefgh", min_size=3, max_size=6), min_size=1, max_size=2).map(
            lambda ws: list(dict.fromkeys(ws))
        )
    )
    return Conversation(
        constraints=tuple(constraints),
        answers=tuple(draw(PHRASES).capitalize() + "." for _ in constraints),
        pinned=draw(st.none() | st.integers(0, len(constraints) - 1)),
        work=draw(STATEMENTS.filter(lambda s: s not in constraints)),
        commands=tuple((word, draw(st.integers(0, 3))) for word in words),
        plan=draw(plans()),
        answer="Decision: " + draw(PHRASES) + ".",
        summary=draw(st.integers(20, 2_000)),
    )


#: A small conversation, the base of the explicit examples.
SMALL = Conversation(
    constraints=("Constraint: never touch vendor.",),
    answers=("Understood.",),
    pinned=None,
    work="Decision: fix the parser first.",
    commands=(("abc", 1),),
    plan=(("fix the parser", "in_progress"),),
    answer="Decision: keep the public API.",
    summary=10,
)
#: A summary far larger than the context it replaces (more than the limit, too).
HUGE_SUMMARY = attrs.evolve(SMALL, summary=120_000)
#: A summary longer than the small conversation it replaces.
LONG_SUMMARY = attrs.evolve(SMALL, summary=4_000)
#: A pinned message larger than the limit (under the quarter of the window a pin may take):
#: every compaction leaves usage over the limit.
BIG_PIN = attrs.evolve(
    SMALL, constraints=("Constraint: " + "keep this log in mind. " * 4_000,), pinned=0
)


def filler(size: int) -> str:
    return ("summary of the work " * (size // 20 + 1))[:size]


# ----------------------------------------------------------------------------- model scripts


def call(name: str, arguments: dict[str, Any], call_id: str, **fields: Any) -> dict[str, Any]:
    return {"function_call": {"name": name, "arguments": arguments, "call_id": call_id}, **fields}


def compaction_reply(backend: str, conversation: Conversation) -> list[Any]:
    """What a compaction by ``backend`` takes from the script's responses."""
    if backend == "local":
        return [{"text": filler(conversation.summary)}]
    if backend == "remote_v2":
        return [{"compaction": filler(conversation.summary)}]
    return []


def compact_replies(backend: str, conversation: Conversation) -> list[Any]:
    """The ``/responses/compact`` answers: the user's messages and a compaction item, as a
    server that keeps them answers."""
    if backend != "remote_v1":
        return []
    texts = [*conversation.constraints, conversation.work]
    output: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        for text in texts
    ]
    output.append({"type": "compaction", "encrypted_content": filler(conversation.summary)})
    return [{"output": output}]


def work_replies(conversation: Conversation, *, plan_usage: int | None) -> list[Any]:
    replies: list[Any] = [
        call("shell", {"command": argv(word, code)}, f"cmd-{n}")
        for n, (word, code) in enumerate(conversation.commands)
    ]
    steps = [{"step": step, "status": status} for step, status in conversation.plan]
    usage = {} if plan_usage is None else {"total_tokens": plan_usage}
    replies.append(call("update_plan", {"plan": steps}, "plan", **usage))
    return replies


def model_script(backend: str, path: str, conversation: Conversation) -> dict[str, Any]:
    """The model's side of the session: the constraints answered, the work turn, the
    compaction where ``path`` puts it, and the turn after it."""
    responses: list[Any] = list(conversation.answers)
    compaction = compaction_reply(backend, conversation)
    answer = conversation.answer
    match path:
        case "manual":
            responses += [*work_replies(conversation, plan_usage=None), answer, *compaction]
        case "pre_turn" | "background_pre_turn":
            responses += work_replies(conversation, plan_usage=None)
            responses += [{"text": answer, "total_tokens": OVER}, *compaction]
        case "mid_turn":
            responses += [*work_replies(conversation, plan_usage=OVER), *compaction, answer]
        case "background_mid_turn":
            responses += work_replies(conversation, plan_usage=None)
            responses += [{"text": answer, "total_tokens": BACKGROUND}, *compaction]
            responses.append(call("sleep", {"seconds": 0}, "nap", total_tokens=OVER))
    responses.append("Going on.")
    return {"responses": responses, "compact": compact_replies(backend, conversation)}


# ----------------------------------------------------------------------------- what the hooks saw


def is_turn_request(body: dict[str, Any]) -> bool:
    """Whether a request is a turn's: not a summary request, not a remote V2 compaction."""
    trigger = any(entry.get("type") == "compaction_trigger" for entry in body["input"])
    return not trigger and not testing.is_compaction_request(body)


@attrs.define
class Compaction:
    """One compaction, as its hooks saw it."""

    trigger: str
    """``manual`` or ``auto``, as hooks are told."""
    before: list[relay.ResponseItem]
    """The history when it started."""
    requests_before: int
    """Model requests sent before it started."""
    turn_requests_before: int
    """Turn requests among them."""
    after: list[relay.ResponseItem] | None = None
    """The history it installed (None: it installed nothing)."""
    requests_after: int = 0
    """Model requests sent when it was installed."""


@attrs.define
class Run:
    """A session's compactions, requests and events."""

    compactions: list[Compaction] = attrs.field(factory=list)
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    events: list[relay.EventMsg] = attrs.field(factory=list)

    def watch(self, t: testing.TestSession) -> None:
        """Register the hooks that take each compaction's histories."""

        async def pre(info: relay.HookInput) -> None:
            requests = list(t.model.requests)
            self.compactions.append(
                Compaction(
                    info.trigger or "",
                    list(t.session.history.items),
                    len(requests),
                    sum(is_turn_request(body) for body in requests),
                )
            )

        async def post(info: relay.HookInput) -> None:
            del info
            done = self.compactions[-1]
            done.after = list(t.session.history.items)
            done.requests_after = len(t.model.requests)

        t.session.register_hook(relay.CompactHook("pre_compact", pre))
        t.session.register_hook(relay.CompactHook("post_compact", post))

    def installed(self) -> list[Compaction]:
        return [c for c in self.compactions if c.after is not None]

    def next_request(self, compaction: Compaction) -> list[relay.ResponseItem] | None:
        """The input of the first turn request after ``compaction``, unless another compaction
        started first."""
        index = self.compactions.index(compaction)
        later = self.compactions[index + 1 :]
        end = later[0].requests_before if later else len(self.requests)
        for body in self.requests[compaction.requests_after : end]:
            if is_turn_request(body):
                return [decode_response_item(entry) for entry in body["input"]]
        return None

    def seen_before(self, compaction: Compaction) -> list[relay.ResponseItem]:
        """Every item of every history the compactions up to ``compaction`` started from, in
        order: what the session had done by then."""
        index = self.compactions.index(compaction)
        return [item for c in self.compactions[: index + 1] for item in c.before]

    def receipts(self) -> list[relay.CompactionReceipt]:
        return [
            m.item.receipt
            for m in self.events
            if isinstance(m, relay.ItemCompleted)
            and isinstance(m.item, relay.ContextCompactionItem)
            and m.item.receipt is not None
        ]

    def compaction_items(self) -> tuple[set[str], list[relay.ContextCompactionItem]]:
        """The ids of the compaction items that started, and the items that completed."""
        started = {
            m.item.id
            for m in self.events
            if isinstance(m, relay.ItemStarted) and isinstance(m.item, relay.ContextCompactionItem)
        }
        completed = [
            m.item
            for m in self.events
            if isinstance(m, relay.ItemCompleted)
            and isinstance(m.item, relay.ContextCompactionItem)
        ]
        return started, completed

    def checked(self) -> list[tuple[Compaction, str, list[relay.ResponseItem]]]:
        """Each installed compaction with the histories its clauses are checked on: the
        installed history and the next turn request."""
        out = []
        for compaction in self.installed():
            assert compaction.after is not None
            out.append((compaction, "installed history", compaction.after))
            request = self.next_request(compaction)
            if request is not None:
                out.append((compaction, "next request", request))
        assert out, f"no compaction was installed: {self.diagnosis()}"
        return out

    def diagnosis(self) -> str:
        """What went on instead: the errors and warnings, the compactions that started."""
        said = [m for m in self.events if isinstance(m, relay.ErrorEvent | relay.WarningEvent)]
        started = [(c.trigger, c.after is not None) for c in self.compactions]
        return f"compactions (trigger, installed) {started}; {said}"


async def ended(t: testing.TestSession, op: relay.Op) -> None:
    done = sum(turn_ended(e) for e in t.recorder.events)
    await t.submit(op)
    await t.wait_for(turn_ended, done + 1)


async def play(backend: str, path: str, conversation: Conversation, cwd: Path) -> Run:
    """The drawn session, compacted by ``backend`` where ``path`` says."""
    run = Run()
    script = model_script(backend, path, conversation)
    async with testing.open_test_session(script, config=config(backend, path, cwd)) as t:
        run.watch(t)
        for index, text in enumerate(conversation.constraints):
            await t.turns(text, pin=index == conversation.pinned)
        await t.turns(conversation.work)
        if path == "manual":
            await ended(t, relay.Compact())
        if path.startswith("background"):
            # The background work runs to its end, in virtual time.
            await trio.sleep(5)
        if path != "mid_turn":
            await t.turns(NEXT)
        run.requests = list(t.model.requests)
    run.events = t.recorder.msgs
    return run


def played(backend: str, path: str, conversation: Conversation, cwd: Path) -> Run:
    return trio.run(
        play, backend, path, conversation, cwd, clock=trio.testing.MockClock(autojump_threshold=0)
    )


# ----------------------------------------------------------------------------- reading histories


def user_texts(items: Sequence[relay.ResponseItem]) -> list[str]:
    """The texts of the messages the user wrote (not context, not a summary)."""
    return [i.text() for i in items if isinstance(i, relay.Message) and message_kind(i) == "user"]


def user_role_texts(items: Sequence[relay.ResponseItem]) -> list[str]:
    return [i.text() for i in items if isinstance(i, relay.Message) and i.role == "user"]


def record_text(items: Sequence[relay.ResponseItem]) -> str:
    """The work-state record placed in ``items`` ("" when there is none)."""
    records = [t for t in user_role_texts(items) if t.startswith("<work_state>")]
    assert len(records) <= 1, "more than one record"
    return records[0] if records else ""


def outputs(items: Sequence[relay.ResponseItem]) -> dict[str, str]:
    return {i.call_id: i.output for i in items if isinstance(i, relay.FunctionCallOutput)}


def commands_ran(items: Sequence[relay.ResponseItem]) -> dict[str, int]:
    """The shell commands that ran in ``items`` (with their output), by command line, with the
    exit code their output states."""
    done = outputs(items)
    ran: dict[str, int] = {}
    for item in items:
        if isinstance(item, relay.FunctionCall) and item.name == "shell" and item.call_id in done:
            code = done[item.call_id].rsplit("[exit code ", 1)[1].rstrip("]\n")
            ran[" ".join(json.loads(item.arguments)["command"])] = int(code)
    return ran


def latest_plan(items: Sequence[relay.ResponseItem]) -> list[str]:
    """The steps of the latest plan ``update_plan`` took in ``items``."""
    done = outputs(items)
    steps: list[str] = []
    for item in items:
        if not (isinstance(item, relay.FunctionCall) and item.name == "update_plan"):
            continue
        if done.get(item.call_id) == PLAN_TAKEN:
            steps = [step["step"] for step in json.loads(item.arguments)["plan"]]
    return steps


def latest_answer(items: Sequence[relay.ResponseItem]) -> str | None:
    answers = [i.text() for i in items if isinstance(i, relay.Message) and i.role == "assistant"]
    return answers[-1] if answers else None


def records_command(record: str, command: str, code: int) -> bool:
    """Whether the record has a line that names ``command`` and, after it, its exit code."""
    return any(
        command in line and f"exit {code}" in line.split(command, 1)[1]
        for line in record.splitlines()
    )


# ----------------------------------------------------------------------------- the parameters


def cases(failing: dict[tuple[str, str], str], paths: Sequence[str] = PATHS) -> list[Any]:
    """Every backend on every path of ``paths``; the pairs of ``failing`` marked as expected to
    fail, with their reasons."""
    out = []
    for backend in BACKENDS:
        for path in paths:
            reason = failing.get((backend, path))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(backend, path, id=f"{backend}-{path}", marks=marks))
    return out


# ----------------------------------------------------------------------------- the clauses


@pytest.mark.parametrize(("backend", "path"), cases({}))
@SETTINGS
@given(conversation=conversations())
@example(conversation=SMALL)
def test_the_latest_user_message_is_kept_verbatim(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    check_latest_user_message(played(backend, path, conversation, tmp_path))


def check_latest_user_message(run: Run) -> None:
    for compaction, where, items in run.checked():
        latest = user_texts(compaction.before)[-1]
        assert latest in user_role_texts(items), f"{where}: {latest!r} is not kept verbatim"


@pytest.mark.parametrize(("backend", "path"), cases({}))
@SETTINGS
@given(conversation=conversations())
@example(conversation=attrs.evolve(SMALL, pinned=0))
def test_pinned_messages_are_kept_verbatim(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    run = played(backend, path, conversation, tmp_path)
    for compaction, where, items in run.checked():
        if conversation.pinned is None:
            continue
        pinned = conversation.constraints[conversation.pinned]
        if pinned in user_texts(run.seen_before(compaction)):
            assert pinned in user_role_texts(items), f"{where}: the pinned {pinned!r} is lost"


@pytest.mark.parametrize(
    ("backend", "path"),
    # The token budget opens a fresh window: of the user's messages it keeps the latest and
    # the pinned ones (the clauses above).
    [case for case in cases({}) if case.values[0] != "token_budget"],
)
@SETTINGS
@given(conversation=conversations())
@example(conversation=SMALL)
def test_the_users_messages_within_the_budget_are_kept_verbatim(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    # The drawn messages take a few hundred tokens: far less than the budget of kept messages
    # (20,000 local, 64,000 remote V2) in a window of 100,000.
    run = played(backend, path, conversation, tmp_path)
    for compaction, where, items in run.checked():
        kept = user_role_texts(items)
        lost = [text for text in user_texts(compaction.before) if text not in kept]
        assert not lost, f"{where}: the user's messages {lost} are lost"


@pytest.mark.parametrize(("backend", "path"), cases({}))
@SETTINGS
@given(conversation=conversations())
@example(conversation=SMALL)
def test_the_models_latest_answer_is_in_the_record(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    run = played(backend, path, conversation, tmp_path)
    for compaction, where, items in run.checked():
        answer = latest_answer(run.seen_before(compaction))
        assert answer is not None
        assert answer in record_text(items), f"{where}: the answer {answer!r} is not in the record"


@pytest.mark.parametrize(("backend", "path"), cases({}))
@SETTINGS
@given(conversation=conversations())
@example(conversation=SMALL)
def test_the_open_plan_is_in_the_record(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    run = played(backend, path, conversation, tmp_path)
    for compaction, where, items in run.checked():
        steps = latest_plan(run.seen_before(compaction))
        assert steps == [step for step, _ in conversation.plan]
        record = record_text(items)
        assert "The plan:" in record, f"{where}: no plan in the record"
        missing = [step for step in steps if step not in record]
        assert not missing, f"{where}: the steps {missing} are not in the record"


@pytest.mark.parametrize(("backend", "path"), cases({}))
@SETTINGS
@given(conversation=conversations())
@example(conversation=SMALL)
def test_the_commands_that_ran_are_in_the_record_with_their_exit_codes(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    run = played(backend, path, conversation, tmp_path)
    for compaction, where, items in run.checked():
        ran = commands_ran(run.seen_before(compaction))
        assert ran == {" ".join(argv(w, code)): code for w, code in conversation.commands}
        record = record_text(items)
        missing = [cmd for cmd, code in ran.items() if not records_command(record, cmd, code)]
        assert not missing, f"{where}: {missing} are not in the record with their exit codes"


@pytest.mark.parametrize(
    ("backend", "path"),
    # The compact op installs what it made whatever its size (docs/decisions.md).
    cases({}, [path for path in PATHS if path != "manual"]),
)
@SETTINGS
@given(conversation=conversations())
@example(conversation=LONG_SUMMARY)
@example(conversation=HUGE_SUMMARY)
def test_the_new_context_is_never_larger_than_the_old(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    # After: relay's estimate of the next request's input without the user's new message (it
    # holds the initial context where the next turn records it again), else of the installed
    # history. Before: the larger of that estimate of the old history and the receipt's figure
    # (the server's count, where the script says the context was larger than its items): a
    # growth is never claimed that a measure of the old context contradicts.
    run = played(backend, path, conversation, tmp_path)
    installed, receipts = run.installed(), run.receipts()
    assert len(installed) == len(receipts), run.diagnosis()
    if not installed:  # refused: nothing changed, and the session says why
        refused = [m for m in run.events if isinstance(m, relay.ErrorEvent)]
        assert refused and "Nothing was changed" in refused[0].message, run.diagnosis()
    # One not installed says why, and its item still ends: with no receipt.
    unchanged = [
        m
        for m in run.events
        if isinstance(m, relay.WarningEvent) and m.message.startswith("Nothing was changed")
    ]
    started, completed = run.compaction_items()
    assert len([i for i in completed if i.receipt is None]) == len(unchanged), run.diagnosis()
    if not any(isinstance(m, relay.ErrorEvent) for m in run.events):
        assert started == {i.id for i in completed}, run.diagnosis()
    for compaction, receipt in zip(installed, receipts, strict=True):
        assert compaction.after is not None
        request = run.next_request(compaction)
        new = [] if NEXT in user_texts(compaction.before) else [relay.user_message(NEXT)]
        before = max(items_tokens(compaction.before), receipt.tokens_before)
        if request is None:  # another compaction followed at once: the history it installed
            after = items_tokens(compaction.after)
        else:
            after = items_tokens(request) - items_tokens(new)
        assert after <= before, f"the context grew from {before} to {after} tokens"


@pytest.mark.parametrize(("backend", "path"), cases({}, AUTOMATIC))
@SETTINGS
@given(conversation=conversations())
@example(conversation=HUGE_SUMMARY)
@example(conversation=BIG_PIN)
def test_an_automatic_compaction_never_runs_twice_without_a_model_response_between(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    # A model response: the answer to a turn's request (not a summary or compaction request).
    run = played(backend, path, conversation, tmp_path)
    # One that was not installed (it would not have made the context smaller) changed
    # nothing: the loop guard's next step may follow it at once (docs/compaction.md).
    assert any(c.trigger == "auto" for c in run.compactions), run.diagnosis()
    automatic = [c for c in run.compactions if c.trigger == "auto" and c.after is not None]
    for first, second in itertools.pairwise(automatic):
        assert second.turn_requests_before > first.turn_requests_before, (
            "two automatic compactions with no turn request between"
        )


# ------------------------------------------------------------------------ a call with no output


@attrs.frozen
class CallThenCompact(relay.SessionTask):
    """A turn whose first call runs only after a compaction point: when the compaction runs,
    the call has no output yet."""

    text: str
    trigger: relay.CompactionTrigger

    @property
    def kind(self) -> str:
        return "call_then_compact"

    async def run(self, ctx: relay.TaskContext) -> None:
        steps = TurnSteps(ctx)
        await steps.begin([relay.Text(self.text)])
        result = await steps.step()
        await steps.compact(CompactionRequest(self.trigger, Injection.BEFORE_LAST_USER_MESSAGE))
        while result.tool_calls:
            for one in result.tool_calls:
                await steps.run_tool(one)
            result = await steps.step()


#: The call that has no output when the compaction runs.
PENDING = ["sh", "-c", "echo pending; exit 2"]
PENDING_PATHS = ("manual", "mid_turn", "background_mid_turn")


def pending_script(backend: str, path: str, conversation: Conversation) -> dict[str, Any]:
    responses: list[Any] = list(conversation.answers)
    responses += work_replies(conversation, plan_usage=None)
    compaction = compaction_reply(backend, conversation)
    if path == "background_mid_turn":
        responses += [{"text": conversation.answer, "total_tokens": BACKGROUND}, *compaction]
        compaction = []
    else:
        responses.append(conversation.answer)
    usage = {} if path == "manual" else {"total_tokens": OVER}
    responses += [call("shell", {"command": PENDING}, "pending", **usage), *compaction, "Done."]
    return {"responses": responses, "compact": compact_replies(backend, conversation)}


async def play_pending(backend: str, path: str, conversation: Conversation, cwd: Path) -> Run:
    """The drawn session, then a turn that compacts while its call has no output."""
    run = Run()
    trigger = (
        relay.CompactionTrigger.MANUAL if path == "manual" else relay.CompactionTrigger.MID_TURN
    )

    def task(op: relay.CustomOp) -> CallThenCompact:
        return CallThenCompact(op.fields["text"], trigger)

    script = pending_script(backend, path, conversation)
    async with testing.open_test_session(
        script, config=config(backend, path, cwd), tasks={"call_then_compact": task}
    ) as t:
        run.watch(t)
        for index, text in enumerate(conversation.constraints):
            await t.turns(text, pin=index == conversation.pinned)
        await t.turns(conversation.work)
        if path.startswith("background"):
            await trio.sleep(5)
        fields: dict[str, Any] = {"text": NEXT}
        await ended(t, relay.CustomOp("call_then_compact", fields))
        run.requests = list(t.model.requests)
    run.events = t.recorder.msgs
    return run


def unanswered(items: Sequence[relay.ResponseItem]) -> list[relay.FunctionCall]:
    done = outputs(items)
    return [i for i in items if isinstance(i, relay.FunctionCall) and i.call_id not in done]


@pytest.mark.parametrize(("backend", "path"), cases({}, paths=PENDING_PATHS))
@settings(SETTINGS, max_examples=examples(10))  # two more shell calls per example
@given(conversation=conversations())
@example(conversation=SMALL)
def test_a_call_with_no_output_yet_is_kept_and_answered_after_the_compaction(
    backend: str, path: str, conversation: Conversation, tmp_path: Path
) -> None:
    run = trio.run(
        play_pending,
        backend,
        path,
        conversation,
        tmp_path,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    [compaction] = run.installed()
    [pending] = unanswered(compaction.before)
    assert pending.call_id == "pending"
    assert compaction.after is not None
    assert pending in compaction.after, "the call is not in the installed history"
    request = run.next_request(compaction)
    assert request is not None
    calls = [i for i in request if isinstance(i, relay.FunctionCall) and i.call_id == "pending"]
    answers = [
        i for i in request if isinstance(i, relay.FunctionCallOutput) and i.call_id == "pending"
    ]
    assert calls == [pending], "the next request does not hold the call once"
    assert len(answers) == 1 and answers[0].output.endswith("[exit code 2]")
    assert request.index(calls[0]) < request.index(answers[0])


# ----------------------------------------------------------------------------- the repros


async def play_v1_without_user_messages(cwd: Path) -> Run:
    """A ``compact`` op whose ``/responses/compact`` answer is a compaction item alone."""
    run = Run()
    script = {
        "responses": [SMALL.answers[0], SMALL.answer, "Going on."],
        "compact": [{"output": [{"type": "compaction", "encrypted_content": "c3VtbWFyeQ=="}]}],
    }
    async with testing.open_test_session(script, config=config("remote_v1", "manual", cwd)) as t:
        run.watch(t)
        await t.turns(*SMALL.constraints, SMALL.work)
        await ended(t, relay.Compact())
        await t.turns(NEXT)
        run.requests = list(t.model.requests)
    run.events = t.recorder.msgs
    return run


async def test_the_latest_user_message_outlives_a_remote_answer_that_left_it_out(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    check_latest_user_message(await play_v1_without_user_messages(tmp_path))


def huge_summary_cases() -> list[Any]:
    """The backends that write a summary, on every path."""
    return [c for c in cases({}) if c.values[0] != "token_budget"]


@pytest.mark.parametrize(("backend", "path"), huge_summary_cases())
async def test_the_latest_user_message_outlives_a_summary_larger_than_the_limit(
    backend: str, path: str, autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    check_latest_user_message(await play(backend, path, HUGE_SUMMARY, tmp_path))
