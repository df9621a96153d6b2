"""``update_plan``: the model's plan as Codex's models state it, reported (``plan_update``) and
kept in the work-state record, which a compaction carries (docs/tools.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import relay
from relay import testing
from relay._base import _protocol as p
from relay._core._plan_tool import PLAN_TAKEN, plan_of
from relay._core._tools import ToolError

statuses = st.sampled_from([s.value for s in p.StepStatus])
steps = st.lists(
    st.fixed_dictionaries({"step": st.text(min_size=1).filter(str.strip), "status": statuses}),
    max_size=6,
).filter(lambda plan: sum(s["status"] == "in_progress" for s in plan) <= 1)


@given(steps, st.none() | st.text())
def test_a_valid_plan_is_read_as_it_was_written(
    plan: list[dict[str, str]], why: str | None
) -> None:
    read, explanation = plan_of({"plan": plan, "explanation": why})
    assert [(one.step, one.status.value) for one in read] == [
        (one["step"], one["status"]) for one in plan
    ]
    assert explanation == (why or None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "plan must be a list"),
        ({"plan": "do it"}, "plan must be a list"),
        ({"plan": ["x"]}, "step 1 of the plan must be an object"),
        ({"plan": [{"step": " ", "status": "pending"}]}, "step 1 of the plan needs"),
        ({"plan": [{"step": "a", "status": "done"}]}, "status must be one of pending"),
        (
            {"plan": [{"step": "a", "status": "in_progress"}] * 2},
            "at most one step of the plan may be in_progress",
        ),
        ({"plan": [], "explanation": 3}, "explanation must be a string"),
    ],
)
def test_a_plan_that_is_not_one_is_refused_clearly(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        plan_of(args)


def plan_call(call_id: str, plan: list[dict[str, str]], why: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"plan": plan}
    if why is not None:
        arguments["explanation"] = why
    return {"function_call": {"name": "update_plan", "arguments": arguments, "call_id": call_id}}


async def test_the_plan_is_reported_and_kept_in_the_record() -> None:
    first = [{"step": "read", "status": "completed"}, {"step": "edit", "status": "in_progress"}]
    second = [{"step": "read", "status": "completed"}, {"step": "edit", "status": "completed"}]
    script = {
        "responses": [plan_call("a", first, "start"), plan_call("b", second), {"text": "done"}]
    }
    config = relay.Config(
        rollout=relay.RolloutConfig(enabled=False),
        tools={"update_plan": True},
        features=relay.Features(work_state=True),
    )
    async with testing.open_test_session(script, config=config) as t:
        await t.turns("go")
        record = t.session.snapshot().work_state
    updates = t.recorder.of_type(p.PlanUpdate)
    assert [u.explanation for u in updates] == ["start", None]
    assert [(s.step, s.status) for s in updates[1].plan] == [
        ("read", "completed"),
        ("edit", "completed"),
    ]
    outputs = [i.output for i in t.session.history.items if isinstance(i, p.FunctionCallOutput)]
    assert outputs == [PLAN_TAKEN, PLAN_TAKEN]
    # One entry for the plan: the newest replaced the first.
    plans = [e.text for e in record.entries if e.kind == "plan"]
    assert plans == ["[done] read; [done] edit"]
