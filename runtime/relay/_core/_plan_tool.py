"""The ``update_plan`` tool: the model states its plan, whole, each time it changes
(docs/tools.md).

It takes Codex's arguments (``plan: [{step, status}]``, ``explanation``), so that a model
trained on Codex's tool calls relay's the same way. Nothing runs: the plan is reported
(``plan_update``) and kept in the work-state record, which a compaction carries into the new
window. Reading the arguments is a plain function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._base import _protocol as p
from ._tools import Tool, ToolContext, ToolError
from ._work_state import plan_set

#: What the model reads once its plan is taken.
PLAN_TAKEN = "Plan updated"

_STATUSES = ", ".join(status.value for status in p.StepStatus)


def plan_of(args: Mapping[str, Any]) -> tuple[tuple[p.PlanStep, ...], str | None]:
    """The steps and the explanation of an ``update_plan`` call.

    Raises:
        ToolError: the arguments are not a plan, naming the first thing wrong.
    """
    raw = args.get("plan")
    if not isinstance(raw, list):
        raise ToolError("plan must be a list of steps, each {step, status}")
    steps: list[p.PlanStep] = []
    for number, one in enumerate(raw, start=1):
        if not isinstance(one, Mapping):
            raise ToolError(f"step {number} of the plan must be an object {{step, status}}")
        text, status = one.get("step"), one.get("status")
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"step {number} of the plan needs a non-empty step text")
        if status not in set(p.StepStatus):
            raise ToolError(f"step {number} of the plan: status must be one of {_STATUSES}")
        steps.append(p.PlanStep(text, p.StepStatus(status)))
    if sum(step.status is p.StepStatus.IN_PROGRESS for step in steps) > 1:
        raise ToolError("at most one step of the plan may be in_progress")
    explanation = args.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise ToolError("explanation must be a string")
    return tuple(steps), explanation or None


async def _update_plan(args: Mapping[str, Any], ctx: ToolContext) -> str:
    steps, explanation = plan_of(args)
    ctx.emit(p.PlanUpdate(ctx.turn_id, steps, explanation))
    ctx.note(plan_set([(step.step, step.status.value) for step in steps], explanation))
    return PLAN_TAKEN


UPDATE_PLAN = Tool(
    "update_plan",
    "Keep a short plan of the task and say where each step stands. Send the whole plan each "
    "time it changes; at most one step is in progress at a time.",
    {
        "type": "object",
        "properties": {
            "explanation": {
                "type": "string",
                "description": "Why the plan changed, when it did",
            },
            "plan": {
                "type": "array",
                "description": "The steps, in order",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "description": "What the step does"},
                        "status": {
                            "type": "string",
                            "enum": [status.value for status in p.StepStatus],
                            "description": "Where the step stands",
                        },
                    },
                    "required": ["step", "status"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["plan"],
        "additionalProperties": False,
    },
    _update_plan,
)


__all__ = ["PLAN_TAKEN", "UPDATE_PLAN", "plan_of"]
