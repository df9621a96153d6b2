"""Compaction hooks (docs/compaction.md): commands and Python callables run around a compaction.

Theory of operation. A hook point (``pre_compact`` or ``post_compact``) runs its hooks one
after the other: first the commands of ``hooks.<point>`` in the configuration, in order, then
the Python callables registered on the session (``open_session(hooks=...)`` or
:meth:`Session.register_hook`), in order.
Each run is reported by ``hook_started`` and ``hook_completed`` (persisted to the rollout by the
session) and ends with one outcome:

- ``continue``: a command exited 0 without asking to stop, or a callable returned None;
- ``stop``: a command exited 0 and printed ``{"decision": "stop", "reason": ...}``, or a
  callable returned :class:`HookStop`; the remaining hooks of the point are skipped;
- ``timeout``: the hook ran past its ``timeout_ms``; a command is killed with its whole process
  group, a callable is cancelled; the compaction goes on, with a ``warning``;
- ``failed``: a command could not start or exited non-zero, or a callable raised; the
  compaction goes on, with a ``warning``.

A command runs without a shell, in the turn's working directory, in a process group of its own,
with the JSON form of :class:`HookInput` on its standard input. That object names the session,
the turn, the directory, the rollout file, the model and the trigger, never a credential. The
outcome is decided when the command exits, from what it printed until then; its whole group is
killed then, so that no child of a hook outlives it (nor relay, see :mod:`relay._exec._process`).

This module is where hook failures (processes, exceptions of callables) are translated into
outcomes; nothing here raises to the caller except cancellation.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeAlias

import anyio
import anyio.abc
import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._config import HookCommand, Hooks
from .._base._secret import NO_SECRETS, Secrets
from .._exec._process import Command, Starter
from .._exec._real_work import real_work
from ._exec_gate import outside_session

logger = logging.getLogger("relay.hooks")

HookPoint: TypeAlias = Literal["pre_compact", "post_compact"]
"""Where a hook runs: before the compaction starts, or after it is installed."""

HookTrigger: TypeAlias = Literal["manual", "auto"]
"""What a hook is told about why the compaction runs."""

HookOutcome: TypeAlias = Literal["continue", "stop", "timeout", "failed"]
"""How one hook run ended (the ``outcome`` of ``hook_completed``)."""

#: Bytes of a command's standard output and error that are kept; the rest is read and dropped.
_OUTPUT_LIMIT = 64 * 1024

#: Longest excerpt of a failed command's standard error quoted in its warning.
_STDERR_EXCERPT = 300


@attrs.frozen
class HookInput:
    """What a hook is told about the compaction (the JSON on a command's standard input)."""

    session_id: str
    """The session id."""
    turn_id: str
    """The turn the compaction runs in."""
    cwd: str
    """The turn's working directory."""
    rollout_path: str | None
    """The session's rollout file, or None when persistence is off."""
    model: str
    """The model the compaction runs with."""
    trigger: HookTrigger
    """``manual`` for a ``compact`` op, ``auto`` for an automatic compaction."""
    event: HookPoint
    """Which hook point is running."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object a command reads from its standard input."""
        return attrs.asdict(self)


@attrs.frozen
class HookStop:
    """A hook asked to stop: what a callable returns to stop, and what a hook point reports."""

    reason: str = ""
    """Why; reported to the user."""
    hook: str = ""
    """The name of the hook that stopped (filled in by the runner)."""


HookFunction: TypeAlias = Callable[[HookInput], Awaitable[HookStop | None]]
"""A hook written in Python: ``async def hook(info: HookInput) -> HookStop | None``.

Returning None lets the compaction go on; returning :class:`HookStop` stops it. Raising counts
as a crash (the compaction goes on, with a warning).
"""


@attrs.frozen
class CompactHook:
    """A Python callable registered as a compaction hook."""

    point: HookPoint
    """Where it runs."""
    function: HookFunction
    """What runs."""
    name: str = ""
    """Its name in events (default: the function's qualified name)."""
    timeout_ms: int = 10_000
    """It is cancelled after this long."""

    @property
    def label(self) -> str:
        """The name reported in ``hook_started`` / ``hook_completed``."""
        return self.name or getattr(self.function, "__qualname__", None) or repr(self.function)


Hook: TypeAlias = HookCommand | CompactHook
"""A hook of either kind."""


@attrs.frozen
class HookResult:
    """How one hook run ended."""

    outcome: HookOutcome
    """The outcome reported in ``hook_completed``."""
    reason: str = ""
    """The reason of a stop."""
    problem: str = ""
    """What went wrong, for ``timeout`` and ``failed``."""


# ----------------------------------------------------------------------------- registration


def compact_hooks(
    configured: Hooks, callables: Sequence[CompactHook], point: HookPoint
) -> list[Hook]:
    """The hooks of ``point``: the configured commands, then the callables, in order."""
    commands = configured.pre_compact if point == "pre_compact" else configured.post_compact
    return [*commands, *(hook for hook in callables if hook.point == point)]


def hook_label(hook: Hook) -> str:
    """The name of a hook in events and warnings."""
    if isinstance(hook, HookCommand):
        return shlex.join(hook.command)
    return hook.label


# ----------------------------------------------------------------------------- running


async def run_compact_hooks(
    hooks: Sequence[Hook],
    info: HookInput,
    emit: Callable[[p.EventMsg], None],
    secrets: Secrets = NO_SECRETS,
    start: Starter | None = None,
) -> HookStop | None:
    """Run ``hooks`` (all of one point) with ``info``, reporting each run through ``emit``.

    Returns the stop of the first hook that asks to stop (its reason is also reported as a
    ``background_event``, and later hooks do not run), else None. A timeout or a crash is
    reported as a ``warning`` and the next hook runs.

    Commands start with ``start`` (default: as they are, without the variables of
    ``secrets``); what any hook says (a stop's reason, a command's standard error, a
    callable's exception) is redacted of its values here, before it is reported or returned.
    """
    point = info.event
    start = start or outside_session(secrets.variables).open_hook
    for hook in hooks:
        label = hook_label(hook)
        emit(p.HookStarted(label, point))
        started = anyio.current_time()
        result = await run_hook(hook, info, start=start)
        result = attrs.evolve(
            result, reason=secrets.redact(result.reason), problem=secrets.redact(result.problem)
        )
        duration_ms = round((anyio.current_time() - started) * 1000)
        emit(p.HookCompleted(label, point, result.outcome, duration_ms))
        match result.outcome:
            case "stop":
                why = result.reason or "no reason given"
                emit(p.BackgroundEvent(f"{point} hook {label!r} stopped the turn: {why}"))
                return HookStop(result.reason, label)
            case "timeout" | "failed":
                emit(
                    p.WarningEvent(f"{point} hook {label!r} {result.problem}; going on without it")
                )
            case "continue":
                pass
    return None


async def run_hook(hook: Hook, info: HookInput, *, start: Starter | None = None) -> HookResult:
    """Run one hook with ``info`` and tell how it ended; never raises except on cancellation.

    A command starts with ``start`` (see :func:`run_hook_command`); a callable runs in
    relay's process.
    """
    if isinstance(hook, HookCommand):
        return await run_hook_command(hook, info, start=start)
    return await _run_callable(hook, info)


async def _run_callable(hook: CompactHook, info: HookInput) -> HookResult:
    answer: HookStop | None = None
    with anyio.move_on_after(hook.timeout_ms / 1000) as scope:
        try:
            answer = await hook.function(info)
        except Exception as exc:
            logger.exception("compaction hook %s raised", hook.label)
            return HookResult("failed", problem=f"raised {type(exc).__name__}: {exc}")
    if scope.cancelled_caught:
        return HookResult("timeout", problem=f"did not finish within {hook.timeout_ms} ms")
    if isinstance(answer, HookStop):
        return HookResult("stop", reason=answer.reason)
    return HookResult("continue")


async def run_hook_command(
    hook: HookCommand,
    info: HookInput,
    *,
    start: Starter | None = None,
) -> HookResult:
    """Run a hook command: JSON on its standard input, a decision on its standard output.

    The command runs without a shell, in ``info.cwd``, started by ``start`` (default:
    the gate's default rules, as outside a session), in a process group of its own. When
    it exits, runs past its timeout, or the caller is cancelled, the whole group is killed,
    and so is every process it started that left the group.
    """
    argv = list(hook.command)
    if not argv:
        return HookResult("failed", problem="has an empty command")
    payload = json.dumps(info.to_json()).encode("utf-8")
    stdout = bytearray()
    stderr = bytearray()
    try:
        # The hook's group is killed on every way out of this block: no child of it outlives
        # the run, nor relay. The timeout is the guard's, on the wall clock.
        with real_work():
            async with (
                (start or outside_session().open_hook)(
                    argv,
                    cwd=info.cwd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    time_limit=hook.timeout_ms / 1000,
                ) as process,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(_read_into, process.stdout, stdout)
                tg.start_soon(_read_into, process.stderr, stderr)
                tg.start_soon(_feed, process, payload)
                await process.wait()
                # The hook's exit decides, not the end of its output: a child it left
                # behind may hold the pipes open. Everything it started goes now, so the
                # readers get what was written and then the end.
                await process.end()
    except OSError as exc:
        return HookResult("failed", problem=f"could not start: {exc.strerror or exc}")
    if process.timed_out:
        return HookResult("timeout", problem=f"did not finish within {hook.timeout_ms} ms")
    code = process.returncode
    if code != 0:
        if code is not None and code < 0:
            how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        excerpt = _excerpt(stderr)
        return HookResult("failed", problem=f"{how}{f' ({excerpt})' if excerpt else ''}")
    return _decision(bytes(stdout))


async def _feed(process: Command, payload: bytes) -> None:
    stdin = process.stdin
    if stdin is None:
        return
    try:
        await stdin.send(payload)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        # A hook that does not read its input is free to do so.
        pass
    finally:
        await stdin.aclose()


async def _read_into(stream: anyio.abc.ByteReceiveStream | None, sink: bytearray) -> None:
    if stream is None:
        return
    try:
        async for chunk in stream:
            if len(sink) < _OUTPUT_LIMIT:
                sink += chunk[: _OUTPUT_LIMIT - len(sink)]
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return


def _excerpt(data: bytearray) -> str:
    lines = bytes(data).decode("utf-8", errors="replace").strip().splitlines()
    text = lines[-1].strip() if lines else ""
    return text if len(text) <= _STDERR_EXCERPT else text[:_STDERR_EXCERPT] + "…"


def _decision(stdout: bytes) -> HookResult:
    """The outcome of a command that exited 0, from what it printed.

    Only a JSON object whose ``decision`` is ``"stop"`` stops; anything else (nothing, plain
    text, another decision, JSON that cannot be read: ``NaN``, nesting too deep for the
    parser) lets the compaction go on.
    """
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return HookResult("continue")
    try:
        answer: object = _json.loads(text)
    except ValueError:  # not JSON, or JSON Python cannot hold: not a decision either way
        return HookResult("continue")
    if isinstance(answer, dict) and answer.get("decision") == "stop":
        reason = answer.get("reason")
        return HookResult("stop", reason=reason if isinstance(reason, str) else "")
    return HookResult("continue")


__all__ = [
    "CompactHook",
    "Hook",
    "HookFunction",
    "HookInput",
    "HookOutcome",
    "HookPoint",
    "HookResult",
    "HookStop",
    "HookTrigger",
    "compact_hooks",
    "hook_label",
    "run_compact_hooks",
    "run_hook",
    "run_hook_command",
]
