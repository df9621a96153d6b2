"""One command of the ``shell`` tool: an argv list (never a shell) run under the process guard,
in a sandbox or not, its output collected (docs/tools.md, docs/approvals.md)."""

from __future__ import annotations

import posixpath
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from .._base._effects import CallStatus, ToolResult
from ._real_work import real_work
from ._sandbox import (
    ESCALATION_PARAMETERS,
    SandboxPolicy,
    escalation_problem,
    open_sandboxed,
    refusal,
)

#: The most of a command's output that is kept.
OUTPUT_LIMIT = 64 * 1024


@attrs.frozen
class CommandOutput:
    """What one command printed, and how it ended."""

    printed: str
    """Its standard output and error together, at most :data:`OUTPUT_LIMIT` bytes of them."""
    size: int
    """How many bytes it printed in all."""
    exit_code: int | None
    """Its exit status (under the sandbox, 128 + N for a signal N), None when it timed out."""
    sandboxed: bool = False
    """Whether it ran in a sandbox."""
    refused: str | None = None
    """When it ran in a sandbox that looks to have refused it something (a write, a system
    call, the network the policy does not give): the line of its output that shows it, at
    most 200 characters (:func:`relay._exec._sandbox.refusal`, a guess from the system's
    words); None otherwise, and always without a sandbox."""


@attrs.frozen
class CommandResult:
    """How a command of a tool call ran, as the session's gate ran it."""

    output: CommandOutput
    """What it printed, and how it ended."""
    notice: str | None = None
    """What the gate adds for the model, on a line of its own after the output."""


#: Where a running command's output goes as it comes, each read as it was read: at most
#: :data:`OUTPUT_LIMIT` bytes of it in all.
OutputSink = Callable[[bytes], None]


class CommandRunner(Protocol):
    """Run a command of a tool call in a folder, for at most ``timeout_ms``."""

    def __call__(
        self,
        argv: Sequence[str],
        cwd: str,
        timeout_ms: int,
        /,
        *,
        on_output: OutputSink | None = None,
    ) -> Awaitable[CommandResult]: ...


def command_result(output: CommandOutput) -> ToolResult:
    """How a ``shell`` call that ran ended, as data: completed when the command exited 0."""
    code = output.exit_code
    return ToolResult(
        CallStatus.COMPLETED if code == 0 else CallStatus.FAILED,
        code,
        timed_out=code is None,
        sandboxed=output.sandboxed,
        printed=output.printed,
    )


def shell_argv(args: Mapping[str, Any]) -> list[str] | None:
    """The argv of a ``shell`` call's arguments: ``command``, as Codex's tool names it, else
    ``argv``; None when that is not a non-empty list of strings without a NUL."""
    argv = args.get("command", args.get("argv"))
    if (
        not isinstance(argv, list)
        or not argv
        or not all(isinstance(a, str) and "\0" not in a for a in argv)
    ):
        return None
    return argv


def workdir_of(cwd: str, workdir: object) -> str:
    """The folder a ``shell`` call runs in: its ``workdir`` (taken from ``cwd`` when
    relative), else ``cwd``."""
    if not isinstance(workdir, str) or not workdir:
        return cwd
    return posixpath.normpath(posixpath.join(cwd, workdir))


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_ms: int,
    sandbox: SandboxPolicy | None,
    executable: str | None = None,
    root: str | None = None,
    on_output: OutputSink | None = None,
) -> CommandOutput:
    """Run ``argv`` in ``cwd`` with ``env`` and no standard input, in ``sandbox`` (None:
    unconfined), for at most ``timeout_ms``; nothing it started outlives the call.
    ``executable``, when given, is the program run in place of ``argv[0]`` (which the
    command then does not see): the file a caller resolved and checked, run as it is.
    ``root`` is the folder the sandbox makes writable (default ``cwd``); ``on_output`` gets
    the output as it comes.

    Raises:
        OSError: the command (or bwrap) could not start.
    """
    chunks: list[bytes] = []
    size = 0
    # The command's group is killed on every way out of this block: its children do not
    # outlive the call, nor relay. The timeout is the guard's, on the wall clock: the output
    # ends when it kills them.
    line = list(argv) if executable is None else [executable, *argv[1:]]
    with real_work():
        async with open_sandboxed(
            sandbox,
            line,
            cwd=cwd,
            env=env,
            root=root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            time_limit=timeout_ms / 1000,
        ) as process:
            assert process.stdout is not None
            async for chunk in process.stdout:
                if size < OUTPUT_LIMIT:
                    chunks.append(chunk)
                    if on_output is not None:
                        on_output(chunk[: OUTPUT_LIMIT - size])
                size += len(chunk)
            await process.wait()
    code = None if process.timed_out else process.returncode
    printed = b"".join(chunks).decode("utf-8", errors="replace")
    refused = None if sandbox is None else refusal(code, printed, network=sandbox.network)
    return CommandOutput(printed, size, code, sandbox is not None, refused)


__all__ = [
    "ESCALATION_PARAMETERS",
    "OUTPUT_LIMIT",
    "CommandOutput",
    "CommandResult",
    "CommandRunner",
    "command_result",
    "escalation_problem",
    "OutputSink",
    "run_command",
    "shell_argv",
    "workdir_of",
]
