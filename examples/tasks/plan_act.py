"""A ``plan_act`` op: the model plans first, then carries the plan out with the session's tools.

``{"type": "plan_act", "goal": "Tidy the logs folder"}`` runs two sampling steps in one task.
The plan is asked for with instructions of its own and no tools, and recorded as the model's
answer; then the task asks the model to carry it out, and runs the tools it calls, as a regular
turn does. Each step leaves the history whole: an interrupt between the plan and its execution
leaves the goal and the plan, answered, and nothing half-done.

Run it with the scripted model, from the repository::

    relay run examples/tasks/plan_act.jsonl \\
        --model-script examples/tasks/plan_act.model.json \\
        --task plan_act=examples/tasks/plan_act.py:plan_act -c cwd=examples/tasks/project
"""

from __future__ import annotations

import attrs

import relay
from relay import user_message
from relay.tasks import TurnSteps

PLAN_INSTRUCTIONS = (
    "Write a short numbered plan for the user's goal, one line per step, naming the files and "
    "commands each step uses. Do not carry it out yet."
)
ACT = "Carry out the plan above, one step at a time, and say what you did."


@attrs.frozen
class PlanThenAct(relay.SessionTask):
    """Plan, then act on the plan."""

    goal: str
    """What the user wants done."""

    @property
    def kind(self) -> str:
        return "plan_act"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        # The regular turn's steps: its compaction points, its context, its limits.
        steps = TurnSteps(ctx)
        await steps.begin([relay.Text(self.goal)])
        # Step one: the plan, with no tools, recorded and reported as the model's answer.
        await ctx.sample(ctx.view.prompt(tools=False, instructions=PLAN_INSTRUCTIONS))
        # Step two: the plan carried out, as a regular turn carries out a request.
        ctx.record(user_message(ACT))
        while True:
            result = await steps.step()
            for call in result.tool_calls:
                await steps.run_tool(call)
            if not result.tool_calls:
                return None


def plan_act(op: relay.CustomOp) -> PlanThenAct:
    """The task of a ``plan_act`` op: its field ``goal`` says what to do."""
    goal = op.fields.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise ValueError("a plan_act op needs a 'goal' string")
    return PlanThenAct(goal)
