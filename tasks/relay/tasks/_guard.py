"""What keeps a turn from running for ever: a bound on its steps, and a watch for a run of
identical tool calls (docs/session.md, "Limits of a turn").

Pure bookkeeping; the regular turn's steps (:class:`~relay.tasks.TurnSteps`) ask it before each
step and tell it of each tool call.
"""

from __future__ import annotations

import json
from typing import Literal

import attrs

#: What a tool call tells the guard: nothing, time to warn, or time to stop the turn.
Verdict = Literal["warn", "stop"] | None


def call_key(name: str, arguments: str, output: str) -> tuple[str, str, str]:
    """What makes two tool calls the same: the tool, its arguments as JSON values (spacing
    and key order aside; as written when they are not JSON), and the output they gave."""
    try:
        normal = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads
        normal = arguments
    return name, normal, output


@attrs.define
class LoopGuard:
    """Counts one turn's steps and its latest run of identical tool calls.

    ``max_steps`` model requests are allowed (0: no bound). A run of ``max_identical`` calls
    that are the same (:func:`call_key`) stops the turn, and half as many warn (0: never).
    """

    max_steps: int
    max_identical: int
    steps: int = 0
    run: int = 0
    last: tuple[str, str, str] | None = None

    def step_allowed(self) -> bool:
        """Count a step about to be taken; False when it would be one too many."""
        if self.max_steps > 0 and self.steps >= self.max_steps:
            return False
        self.steps += 1
        return True

    def note_call(self, name: str, arguments: str, output: str) -> Verdict:
        """Count a tool call that ran; what the turn should do about the run it extends."""
        key = call_key(name, arguments, output)
        self.run = self.run + 1 if key == self.last else 1
        self.last = key
        if self.max_identical <= 0:
            return None
        if self.run >= self.max_identical:
            return "stop"
        if self.run == self.warn_at:
            return "warn"
        return None

    @property
    def warn_at(self) -> int:
        """The length of a run that is warned about: half the limit, and never the first call
        (0: no warning)."""
        half = (self.max_identical + 1) // 2
        return half if half >= 2 else 0

    @property
    def looping(self) -> bool:
        """Whether the latest run is long enough to stop the turn."""
        return 0 < self.max_identical <= self.run


def step_limit_message(max_steps: int) -> str:
    """The message of ``error{step_limit}``."""
    return (
        f"The turn stopped after {max_steps} model requests (max_steps_per_turn). Send a "
        "message to go on from here, or raise the limit."
    )


def loop_warning(name: str, times: int) -> str:
    """The warning about a run of identical calls."""
    return (
        f"The model called {name} {times} times in a row with the same arguments and got the "
        "same output; the turn stops if it goes on."
    )


def loop_message(name: str, times: int) -> str:
    """The message of ``error{tool_loop}``."""
    return (
        f"The turn stopped: the model called {name} {times} times in a row with the same "
        "arguments and got the same output each time (max_identical_tool_calls)."
    )


__all__ = ["LoopGuard", "Verdict", "call_key", "loop_message", "loop_warning", "step_limit_message"]
