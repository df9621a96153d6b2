"""The plain rules of sub-agents, without an event loop (docs/agents.md): what a child's events
make of its state, how long a ``wait`` waits, what a rollout says of the children, the JSON
the tools answer with, how a role narrows the rules, and the ``[agents]`` table of a
configuration. The tree at work is in tests/core/test_agents.py."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relay
from relay._base import _protocol as p
from relay._base._agents_config import (
    BUILTIN_ROLES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_THREADS,
    AgentRole,
    AgentsConfig,
    agents_table,
)
from relay._base._config import config_from_dict
from relay._base._errors import ConfigError, ErrorCode
from relay._base._exec_rules import MODE_ORDER, POLICY_ORDER, ExecRules, narrowed
from relay._core._agent_rules import (
    DEFAULT_WAIT_MS,
    MAX_WAIT_MS,
    AgentRefused,
    ChildRecord,
    Step,
    child_records,
    next_state,
    notice_text,
    state_json,
    status_json,
    wait_bound,
)
from tests.hypothesis_profiles import examples

S = p.AgentStatus
PENDING = p.AgentState(S.PENDING_INIT)
RUNNING = p.AgentState(S.RUNNING)


def started(turn: str = "t1") -> p.TurnStarted:
    return p.TurnStarted(turn, None, 0.0)


def complete(message: str | None = "done", turn: str = "t1") -> p.TurnComplete:
    return p.TurnComplete(turn, message, 0)


def aborted(reason: p.AbortReason, turn: str = "t1") -> p.TurnAborted:
    return p.TurnAborted(turn, reason, 0)


def error(message: str = "the model failed") -> p.ErrorEvent:
    return p.ErrorEvent(message, ErrorCode.SERVER_ERROR)


def play(
    events: Sequence[tuple[p.EventMsg, bool]], state: p.AgentState = PENDING
) -> list[tuple[p.AgentState, Step]]:
    """Each step of ``events`` (with its ``queued``), after the state it was taken from."""
    failed: str | None = None
    steps = []
    for msg, queued in events:
        step = next_state(state, failed, msg, queued=queued)
        steps.append((state, step))
        state, failed = step.state, step.failed
    return steps


# ------------------------------------------------------------------ next_state, by example


def test_a_turn_that_starts_runs_and_one_that_completes_ends_the_run_with_its_answer() -> None:
    assert next_state(PENDING, None, started(), queued=False) == Step(RUNNING)
    step = next_state(RUNNING, None, complete("3 files"), queued=False)
    assert step == Step(p.AgentState(S.COMPLETED, "3 files"), ended=True)


def test_a_turn_that_completes_with_more_input_queued_keeps_the_run_going() -> None:
    assert next_state(RUNNING, None, complete(), queued=True) == Step(RUNNING)
    step = next_state(RUNNING, None, aborted(p.AbortReason.INTERRUPTED), queued=True)
    assert step == Step(RUNNING)


def test_an_error_in_a_running_turn_makes_its_end_an_error_that_says_what_failed() -> None:
    step = next_state(RUNNING, None, error("quota gone"), queued=False)
    assert step == Step(RUNNING, failed="quota gone")
    # A failed turn ends the run even when input is queued: the child is ended.
    for queued in (False, True):
        step = next_state(RUNNING, "quota gone", complete("partial"), queued=queued)
        assert step == Step(p.AgentState(S.ERRORED, "quota gone"), ended=True)


def test_an_error_outside_a_running_turn_is_not_remembered() -> None:
    done = p.AgentState(S.COMPLETED, "ok")
    assert next_state(done, None, error(), queued=False) == Step(done)


@pytest.mark.parametrize(
    ("reason", "status"),
    [
        (p.AbortReason.INTERRUPTED, S.INTERRUPTED),
        (p.AbortReason.HOOK_STOPPED, S.INTERRUPTED),
        (p.AbortReason.HOST_LOST, S.INTERRUPTED),
        (p.AbortReason.SHUTDOWN, S.SHUTDOWN),
    ],
)
def test_an_aborted_turn_ends_the_run(reason: p.AbortReason, status: p.AgentStatus) -> None:
    step = next_state(RUNNING, None, aborted(reason), queued=False)
    assert step == Step(p.AgentState(status), ended=True)


def test_a_replaced_turn_does_not_end_the_run() -> None:
    assert next_state(RUNNING, None, aborted(p.AbortReason.REPLACED), queued=False) == Step(RUNNING)


def test_a_shutdown_ends_a_child_at_work_and_keeps_what_a_finished_one_said() -> None:
    for state in (PENDING, RUNNING):
        step = next_state(state, None, p.ShutdownComplete(), queued=False)
        assert step == Step(p.AgentState(S.SHUTDOWN), ended=True)
    done = next_state(p.AgentState(S.COMPLETED, "ok"), None, p.ShutdownComplete(), queued=False)
    assert done == Step(p.AgentState(S.SHUTDOWN, "ok"))
    # A failure stays the reason it ended: a shutdown after it does not hide it.
    failed = p.AgentState(S.ERRORED, "boom")
    assert next_state(failed, None, p.ShutdownComplete(), queued=False) == Step(failed)


def test_other_events_change_nothing_and_keep_the_failure() -> None:
    step = next_state(RUNNING, "boom", p.AgentMessage("working"), queued=False)
    assert step == Step(RUNNING, failed="boom")


# ------------------------------------------------------------------ next_state, any sequence

_EVENTS = st.one_of(
    st.builds(started),
    st.builds(complete, st.none() | st.text(max_size=5)),
    st.builds(aborted, st.sampled_from(p.AbortReason)),
    st.builds(error, st.text(max_size=5)),
    st.just(p.ShutdownComplete()),
    st.just(p.AgentMessage("working")),
)
_SEQUENCES = st.lists(st.tuples(_EVENTS, st.booleans()), max_size=30)


@settings(max_examples=examples(300))
@given(_SEQUENCES)
def test_a_run_ends_at_most_once_between_two_turn_starts(
    events: list[tuple[p.EventMsg, bool]],
) -> None:
    ends = 0
    for (msg, _), (_, step) in zip(events, play(events), strict=True):
        if isinstance(msg, p.TurnStarted):
            ends = 0
        ends += step.ended
        assert ends <= 1


@settings(max_examples=examples(300))
@given(_SEQUENCES)
def test_ended_comes_with_a_final_status_and_every_final_status_is_reached_by_an_end(
    events: list[tuple[p.EventMsg, bool]],
) -> None:
    for before, step in play(events):
        if step.ended:
            assert step.state.status.final
        elif not before.status.final:
            # A child at work that reaches a final status reports it: no silent end.
            assert not step.state.status.final


@settings(max_examples=examples(300))
@given(_SEQUENCES)
def test_an_errored_end_says_the_last_failure_of_its_turn(
    events: list[tuple[p.EventMsg, bool]],
) -> None:
    last_error: str | None = None
    for (msg, _), (before, step) in zip(events, play(events), strict=True):
        if isinstance(msg, p.TurnStarted):
            last_error = None
        elif isinstance(msg, p.ErrorEvent) and before.status is S.RUNNING:
            last_error = msg.message
        if step.ended and step.state.status is S.ERRORED:
            assert step.state.message == last_error is not None


# ------------------------------------------------------------------ wait_bound


def test_wait_bound_defaults_to_codex_s_and_is_in_seconds() -> None:
    assert wait_bound(None) == DEFAULT_WAIT_MS / 1000 == 30
    assert wait_bound(0) == 0
    assert wait_bound(1500) == 1.5
    assert wait_bound(MAX_WAIT_MS * 10) == MAX_WAIT_MS / 1000


@given(st.integers(min_value=0) | st.floats(min_value=0, allow_infinity=False))
def test_wait_bound_never_exceeds_the_longest_wait(timeout_ms: float) -> None:
    bound = wait_bound(timeout_ms)
    assert 0 <= bound <= MAX_WAIT_MS / 1000
    assert bound == min(timeout_ms, MAX_WAIT_MS) / 1000


@pytest.mark.parametrize("timeout_ms", [-1, -0.5, float("nan"), float("inf"), True, "100", [1]])
def test_wait_bound_refuses_what_is_not_a_number_of_milliseconds(timeout_ms: object) -> None:
    with pytest.raises(AgentRefused, match="timeout_ms must be a number of milliseconds"):
        wait_bound(timeout_ms)


# ------------------------------------------------------------------ child_records


def spawned(agent_id: str, prompt: str = "task") -> p.SubAgentSpawned:
    return p.SubAgentSpawned(agent_id, f"/root/{agent_id}", "root-id", 1, "default", "m", prompt)


def ended(agent_id: str, status: p.AgentStatus, message: str | None = None) -> p.SubAgentEnded:
    return p.SubAgentEnded(agent_id, f"/root/{agent_id}", status, message)


def test_child_records_name_each_child_once_with_its_latest_end() -> None:
    events: list[p.EventMsg] = [
        spawned("a"),
        p.AgentMessage("unrelated"),
        spawned("b"),
        ended("a", S.COMPLETED, "first"),
        ended("a", S.SHUTDOWN, "first"),
        ended("nobody", S.SHUTDOWN),  # an end of a child it never spawned is ignored
    ]
    assert child_records(events) == (
        ChildRecord(spawned("a"), ended("a", S.SHUTDOWN, "first")),
        ChildRecord(spawned("b"), None),
    )


def test_a_child_spawned_again_forgets_its_earlier_end_and_comes_last() -> None:
    # A resume_agent records the spawn again: the child is open from then on.
    events: list[p.EventMsg] = [
        spawned("a"),
        spawned("b"),
        ended("a", S.SHUTDOWN),
        spawned("a", "again"),
    ]
    assert child_records(events) == (
        ChildRecord(spawned("b"), None),
        ChildRecord(spawned("a", "again"), None),
    )


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.none() | st.sampled_from(S), st.text(max_size=2)),
        max_size=20,
    )
)
def test_child_records_hold_each_latest_spawn_and_the_latest_end_after_it(
    script: list[tuple[str, p.AgentStatus | None, str]],
) -> None:
    events: list[p.EventMsg] = [
        spawned(key, text) if status is None else ended(key, status, text)
        for key, status, text in script
    ]
    records = {record.spawned.agent_id: record for record in child_records(events)}
    spawned_ids = {msg.agent_id for msg in events if isinstance(msg, p.SubAgentSpawned)}
    assert set(records) == spawned_ids
    for key, record in records.items():
        last_spawn = max(
            i
            for i, m in enumerate(events)
            if isinstance(m, p.SubAgentSpawned) and m.agent_id == key
        )
        assert record.spawned is events[last_spawn]
        later_ends = [
            m for m in events[last_spawn:] if isinstance(m, p.SubAgentEnded) and m.agent_id == key
        ]
        assert record.ended == (later_ends[-1] if later_ends else None)


@pytest.mark.parametrize(
    ("status", "closed"),
    [
        (None, False),
        (S.COMPLETED, False),
        (S.INTERRUPTED, False),
        (S.SHUTDOWN, True),
        (S.ERRORED, True),
    ],
)
def test_a_child_closed_or_failed_is_not_opened_again(
    status: p.AgentStatus | None, closed: bool
) -> None:
    end = None if status is None else ended("a", status)
    assert ChildRecord(spawned("a"), end).closed is closed


# ------------------------------------------------------------------ the JSON of the tools


def test_status_json_writes_codex_s_shapes() -> None:
    assert status_json(p.AgentState(S.COMPLETED, "done")) == {"completed": "done"}
    assert status_json(p.AgentState(S.COMPLETED)) == {"completed": None}
    assert status_json(p.AgentState(S.ERRORED, "boom")) == {"errored": "boom"}
    assert status_json(p.AgentState(S.ERRORED)) == {"errored": ""}
    for status in (S.PENDING_INIT, S.RUNNING, S.INTERRUPTED, S.SHUTDOWN, S.NOT_FOUND):
        assert status_json(p.AgentState(status, "ignored")) == status.value


def test_state_json_keys_each_state_by_its_agent() -> None:
    states = {"a": p.AgentState(S.COMPLETED, "x"), "b": p.AgentState(S.NOT_FOUND)}
    assert state_json(states) == {"a": {"completed": "x"}, "b": "not_found"}
    assert state_json({}) == {}


@given(st.sampled_from(S), st.none() | st.text())
def test_the_notice_of_an_end_is_a_tagged_json_of_the_child_and_its_status(
    status: p.AgentStatus, message: str | None
) -> None:
    end = p.SubAgentEnded("id-1", "/root/1", status, message)
    text = notice_text(end)
    prefix, suffix = "<subagent_notification>\n", "\n</subagent_notification>"
    assert text.startswith(prefix) and text.endswith(suffix)
    assert json.loads(text[len(prefix) : -len(suffix)]) == {
        "agent_id": "id-1",
        "path": "/root/1",
        "status": status_json(p.AgentState(status, message)),
    }


def test_the_notice_keeps_non_ascii_text_as_it_is() -> None:
    text = notice_text(p.SubAgentEnded("a", "/root/1", S.COMPLETED, "Zürich ✓"))
    assert "Zürich ✓" in text


# ------------------------------------------------------------------ narrowed

_RULES = st.builds(
    ExecRules,
    approval_policy=st.sampled_from(POLICY_ORDER),
    sandbox_mode=st.sampled_from(MODE_ORDER),
    writable_roots=st.lists(st.sampled_from(["/a", "/b"]), max_size=2).map(tuple),
    network_access=st.booleans(),
)


@given(_RULES, st.none() | st.sampled_from(POLICY_ORDER), st.none() | st.sampled_from(MODE_ORDER))
def test_narrowed_never_loosens_and_takes_the_stricter_of_the_two(
    rules: ExecRules, policy: str | None, mode: str | None
) -> None:
    result = narrowed(rules, policy, mode)
    policy_at = POLICY_ORDER.index(result.approval_policy)
    mode_at = MODE_ORDER.index(result.sandbox_mode)
    assert policy_at <= POLICY_ORDER.index(rules.approval_policy)
    assert mode_at <= MODE_ORDER.index(rules.sandbox_mode)
    if policy is not None:
        assert policy_at == min(
            POLICY_ORDER.index(rules.approval_policy), POLICY_ORDER.index(policy)
        )
    else:
        assert result.approval_policy == rules.approval_policy
    if mode is not None:
        assert mode_at == min(MODE_ORDER.index(rules.sandbox_mode), MODE_ORDER.index(mode))
    else:
        assert result.sandbox_mode == rules.sandbox_mode
    # Only the two change: the roots, the network and the environment stay the parent's.
    assert (
        attrs.evolve(result, approval_policy=rules.approval_policy, sandbox_mode=rules.sandbox_mode)
        == rules
    )


def test_narrowed_by_example() -> None:
    loose = ExecRules("never", "danger-full-access")
    assert narrowed(loose, "untrusted", "read-only") == ExecRules("untrusted", "read-only")
    strict = ExecRules("untrusted", "read-only")
    assert narrowed(strict, "never", "danger-full-access") == strict
    assert narrowed(loose, None, None) == loose


def test_narrowed_refuses_a_name_that_is_no_policy_or_mode() -> None:
    with pytest.raises(ValueError, match="'sometimes' is not one of"):
        narrowed(ExecRules(), "sometimes", None)
    with pytest.raises(ValueError, match="'yolo' is not one of"):
        narrowed(ExecRules(), None, "yolo")


# ------------------------------------------------------------------ roles


def test_the_built_in_roles_are_codex_s_and_explorer_reads_only() -> None:
    assert list(BUILTIN_ROLES) == ["default", "worker", "explorer"]
    default, worker, explorer = BUILTIN_ROLES.values()
    assert default.instructions is None and default.sandbox_mode is None
    assert worker.instructions and worker.sandbox_mode is None
    assert explorer.instructions and explorer.sandbox_mode == "read-only"
    for role in BUILTIN_ROLES.values():
        assert role.description
        assert role.model is None and role.tools is None and role.approval_policy is None


def test_a_role_by_name_the_default_for_none_and_none_for_an_unknown_one() -> None:
    config = AgentsConfig()
    assert config.role(None) is config.role("default") is BUILTIN_ROLES["default"]
    assert config.role("explorer") is BUILTIN_ROLES["explorer"]
    assert config.role("reviewer") is None
    assert config.role_names() == ["default", "worker", "explorer"]


def test_a_configuration_adds_roles_and_may_redefine_codex_s() -> None:
    reviewer = AgentRole(description="Reviews a diff.", model="gpt-5-mini")
    worker = AgentRole(description="My worker.", tools=["shell"])
    config = AgentsConfig(roles={"reviewer": reviewer, "worker": worker})
    assert config.role("reviewer") is reviewer
    assert config.role("worker") is worker and worker.tools == ("shell",)
    assert config.role("explorer") is BUILTIN_ROLES["explorer"]
    assert config.role_names() == ["default", "worker", "explorer", "reviewer"]


def test_the_limits_default_to_codex_s() -> None:
    assert (AgentsConfig().max_depth, AgentsConfig().max_threads) == (1, 6)
    assert (DEFAULT_MAX_DEPTH, DEFAULT_MAX_THREADS) == (1, 6)


# ------------------------------------------------------------------ the [agents] table


def test_agents_table_puts_role_tables_under_roles_beside_the_limits() -> None:
    table = {"max_depth": 2, "reviewer": {"model": "m"}, "max_threads": 3}
    assert agents_table(table) == {
        "max_depth": 2,
        "max_threads": 3,
        "roles": {"reviewer": {"model": "m"}},
    }
    assert agents_table({}) == {}


CONFIG = """
[features]
multi_agent = true

[agents]
max_depth = 2
max_threads = 3

[agents.reviewer]
description = "Reviews a diff and lists the problems."
model = "gpt-5-mini"
model_reasoning_effort = "high"
instructions = "Review; change nothing."
tools = ["read_file", "list_dir"]
approval_policy = "untrusted"
sandbox_mode = "read-only"

[agents.worker]
description = "A worker of our own."
"""


def test_a_configuration_file_reads_the_limits_and_the_roles(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text(CONFIG, encoding="utf-8")
    config = relay.load_config(file)
    assert config.features.multi_agent is True
    agents = config.agents
    assert (agents.max_depth, agents.max_threads) == (2, 3)
    assert agents.roles == {
        "reviewer": AgentRole(
            description="Reviews a diff and lists the problems.",
            model="gpt-5-mini",
            model_reasoning_effort="high",
            instructions="Review; change nothing.",
            tools=("read_file", "list_dir"),
            approval_policy="untrusted",
            sandbox_mode="read-only",
        ),
        "worker": AgentRole(description="A worker of our own."),
    }
    assert agents.role("worker") == AgentRole(description="A worker of our own.")
    assert agents.role_names() == ["default", "worker", "explorer", "reviewer"]


def test_overrides_set_the_limits_and_the_feature(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text(CONFIG, encoding="utf-8")
    config = relay.load_config(file, ["agents.max_threads=1", "features.multi_agent=false"])
    assert config.agents.max_threads == 1 and config.agents.max_depth == 2
    assert config.features.multi_agent is False
    assert "reviewer" in config.agents.roles


def test_multi_agent_is_off_by_default_and_takes_codex_s_table_form() -> None:
    assert relay.Config().features.multi_agent is False
    assert relay.Config().agents == AgentsConfig()
    assert config_from_dict({"features": {"multi_agent": {"enabled": True}}}).features.multi_agent
    assert not config_from_dict({"features": {"multi_agent": {}}}).features.multi_agent


@pytest.mark.parametrize(
    ("agents", "says"),
    [
        ({"max_depht": 2}, "unknown config key: agents.max_depht (did you mean 'max_depth'?)"),
        ({"max_depth": 0}, "agents.max_depth must be a positive integer, got 0"),
        ({"max_threads": -2}, "agents.max_threads must be a positive integer, got -2"),
        ({"max_threads": True}, "agents.max_threads must be a positive integer, got True"),
        ({"max_depth": "2"}, "agents.max_depth must be a positive integer, got '2'"),
        ({"max_depth": 1.5}, "agents.max_depth must be a positive integer, got 1.5"),
        (
            {"reviewer": {"modle": "m"}},
            "unknown config key: agents.reviewer.modle (did you mean 'model'?)",
        ),
        (
            {"reviewer": {"approval_policy": "sometimes"}},
            "agents.reviewer.approval_policy must be one of untrusted, on-failure, on-request, "
            "never, got 'sometimes'",
        ),
        (
            {"reviewer": {"sandbox_mode": "yolo"}},
            "agents.reviewer.sandbox_mode must be one of read-only, workspace-write, "
            "danger-full-access, got 'yolo'",
        ),
    ],
)
def test_a_bad_agents_table_is_an_error_that_names_the_key(
    agents: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"agents": agents})
    assert says in str(caught.value)


def test_a_bad_agents_table_in_a_file_is_an_error_too(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('[agents.reviewer]\nsandbox = "read-only"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown config key: agents\.reviewer\.sandbox"):
        relay.load_config(file)
    file.write_text("[features]\nmulti_agnet = true\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"did you mean 'features\.multi_agent'"):
        relay.load_config(file)
