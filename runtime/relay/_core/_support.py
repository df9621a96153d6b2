"""What a compaction needs of its turn beyond the task port: hooks, item ids, estimates, the
initial context, the session's background job, and a backend's view of the history.

A task asks its port for it (:attr:`~relay.lowlevel.TaskContext.compaction`). It is also the
:class:`~relay.lowlevel.BackendContext` a backend runs with in the foreground; a background
compaction runs with :class:`~relay._core._background.BackgroundContext`, its sibling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._base import _protocol as p
from .._base._errors import ContextWindowExceeded
from .._base._model import CompactRequest, Prompt
from . import _sampling
from ._background import BackgroundJob, Backgrounds, BackgroundWork
from ._budget import TokenBudget
from ._context import TurnSettings
from ._hooks import HookInput, HookPoint, HookStop, HookTrigger, compact_hooks, run_compact_hooks
from ._sampling import SampleResult
from ._services import Services
from ._turn import Writer
from ._view import TaskView


class CompactionSupport:
    """A turn's means to compact: everything a compaction flow and a foreground backend use."""

    def __init__(
        self,
        services: Services,
        writer: Writer,
        settings: TurnSettings,
        backgrounds: Backgrounds,
        view: Callable[[], TaskView],
    ) -> None:
        self._services = services
        self._writer = writer
        self._settings = settings
        self._backgrounds = backgrounds
        self._view = view

    # -- what a backend uses (BackendContext)

    @property
    def view(self) -> TaskView:
        """The turn's view of the session."""
        return self._view()

    def emit(self, msg: p.EventMsg) -> None:
        """Report an event of the turn."""
        self._writer.emit(msg)

    def prompt(
        self,
        input: Sequence[p.ResponseItem] | None = None,
        *,
        tools: bool = True,
        model: str | None = None,
        purpose: str = "turn",
    ) -> Prompt:
        """A request for the turn's model over ``input`` (default: the normalised history)."""
        return _sampling.build_prompt(
            self._services, self._settings, input, tools=tools, model=model, purpose=purpose
        )

    async def sample(self, prompt: Prompt, *, max_retries: int | None = None) -> SampleResult:
        """Stream one response with retries (``stream_error`` events report them); nothing of
        the answer is recorded or reported, but its usage counts."""
        return await _sampling.sample(
            self._services,
            self._writer,
            prompt,
            record=False,
            report=False,
            max_retries=max_retries,
        )

    async def remote_compact(self, request: CompactRequest) -> Any:
        """``POST /responses/compact`` with the provider's request retries."""
        return await _sampling.remote_compact(self._services, request)

    def initial_context(self) -> list[p.ResponseItem]:
        """The full initial context of the turn's world as it is now."""
        return _sampling.initial_context_items(self._services, self._settings, self.emit)

    def room_after(
        self, alongside: Sequence[p.ResponseItem], model: str | None = None
    ) -> int | None:
        """Tokens (as a server counts them) that the messages a compaction keeps may take
        beside ``alongside``; None when the window of ``model`` (default: the turn's) is
        unknown."""
        return _sampling.room_after(
            self._services, self.budget(model), alongside, self.initial_context()
        )

    def window_full(self, error: ContextWindowExceeded | None = None) -> None:
        """Count the history as filling the turn model's window and show it in a
        ``token_count``: the next turn compacts before it sends anything."""
        _sampling.window_full(self._services, self._writer, self._settings.model, error)

    # -- what a compaction flow uses

    def budget(self, model: str | None = None) -> TokenBudget:
        """The token budget of ``model`` (default: the turn's)."""
        return self._services.budget(model or self._settings.model)

    def estimate(self, items: Sequence[p.ResponseItem]) -> int:
        """The calibrated estimate of a request over ``items`` (with the instructions and
        tools): what a server would count."""
        return _sampling.estimate_context(self._services, items)

    def context_tokens(self) -> tuple[int, bool]:
        """The size of the context as it stands, and whether it rests on a server's count.

        With a response since the last compaction, it is the budget's usage (counted); else
        the calibrated estimate of a request over the history.
        """
        history = self._services.state.history
        if history.last_response_tokens:
            return self.budget().usage, True
        return self.estimate(history.items), False

    def work_state_budget(self, model: str | None = None) -> int:
        """The token budget of the rendered work-state record (estimate units)."""
        return _sampling.work_state_tokens(self._services, model or self._settings.model)

    def new_item_id(self, prefix: str = "item") -> str:
        """A fresh item id, unique in the session."""
        return self._services.new_item_id(prefix)

    async def run_hooks(
        self, point: HookPoint, *, trigger: HookTrigger, model: str
    ) -> HookStop | None:
        """Run the compaction hooks of ``point``, reporting each run; the first stop, if any."""
        services = self._services
        hooks = compact_hooks(services.config.hooks, services.hooks, point)
        if not hooks:
            return None
        rollout = services.recorder.writer
        info = HookInput(
            session_id=services.id,
            turn_id=self._writer.turn_id,
            cwd=self._settings.cwd,
            rollout_path=str(rollout.path) if rollout is not None else None,
            model=model,
            trigger=trigger,
            event=point,
        )
        return await run_compact_hooks(hooks, info, self.emit, services.secrets)

    @property
    def background(self) -> BackgroundJob | None:
        """The session's background compaction, if one was started and not yet taken."""
        return self._backgrounds.job

    def start_background(self, work: BackgroundWork) -> BackgroundJob | None:
        """Start ``work`` as the session's background compaction over a snapshot of the history
        taken now; None when one is already there (at most one at a time).

        ``work`` runs in the session's task group with a context whose history is the snapshot
        and which neither reports nor records anything; what it returns (or the message of
        what it raised) is kept on the job until :meth:`take_background`.
        """
        if self._writer.detached:
            return None
        return self._backgrounds.start(self._settings, work)

    def take_background(self) -> BackgroundJob | None:
        """Take the session's background job away (cancelling it if it still runs), so that
        a new one may start."""
        if self._writer.detached:
            return None
        return self._backgrounds.take()

    def drop_background(self, job: BackgroundJob, reason: str) -> None:
        """Report and record that ``job``'s result will not be installed, and why."""
        if self._writer.detached:
            return
        message = p.BackgroundEvent(
            f"Dropped the background compaction of a snapshot taken "
            f"{job.age_ms(anyio.current_time())} ms ago: {reason}."
        )
        self._services.recorder.note(message)
        self.emit(message)


__all__ = ["CompactionSupport"]
