"""A ``review`` op for an agent embedded in a code-review bot.

``{"type": "review", "path": "src/app.py"}`` reads the file through the session's own
``read_file`` tool (so it is confined to the working directory, reported as a tool call and
kept in the history), asks the model once with review instructions of its own and the file's
text, and reports the model's answer as the agent message.

Run it with the scripted model, from the repository::

    relay run examples/tasks/review.jsonl \\
        --model-script examples/tasks/review.model.json \\
        --task review=examples/tasks/review.py:review -c cwd=examples/tasks/project
"""

from __future__ import annotations

import json

import attrs

import relay
from relay import user_message

INSTRUCTIONS = (
    "You review one file of a code base. Name each defect you find with its line, say why it "
    "is one and how to fix it, most serious first. If the file is sound, say so in one line."
)


@attrs.frozen
class Review(relay.SessionTask):
    """Review one file; the answer is the turn's agent message."""

    path: str
    """The file to review, relative to the session's working directory."""

    @property
    def kind(self) -> str:
        return "review"

    async def run(self, ctx: relay.TaskContext) -> str | None:
        # The read goes through the session's tool, as a call the history keeps with its output.
        call = relay.FunctionCall(
            "read_file", json.dumps({"path": self.path}), f"review-{ctx.view.turn_id}"
        )
        ctx.record(call)
        text = await ctx.run_tool(call)
        # The question the history keeps; the request itself carries the file's text.
        ctx.record(user_message(f"Review {self.path}."))
        request = user_message(f"Review {self.path}:\n\n{text}")
        prompt = ctx.view.prompt([request], tools=False, instructions=INSTRUCTIONS)
        # The answer is recorded and reported as the turn's agent message.
        result = await ctx.sample(prompt)
        return result.last_agent_message or "The model wrote no review."


def check(op: relay.CustomOp) -> None:
    """Refuse a ``review`` op without a ``path`` string."""
    path = op.fields.get("path")
    if not isinstance(path, str) or not path:
        raise ValueError("a review op needs a 'path' string")


def review(op: relay.CustomOp) -> Review:
    """The task of a ``review`` op: its field ``path`` names the file."""
    check(op)
    return Review(op.fields["path"])


# ``relay run`` asks the factory's ``validate`` about every review op of a script before
# anything runs, so that a bad one is exit 2 naming its line rather than a failed turn.
review.validate = check  # type: ignore[attr-defined]
