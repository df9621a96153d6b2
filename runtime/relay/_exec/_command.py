"""One command of the ``shell`` tool: an argv list (never a shell) run under the process guard,
in a sandbox or not, its output collected (docs/tools.md, docs/approvals.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence

import attrs

from ._real_work import real_work
from ._sandbox import SandboxPolicy, open_sandboxed, refusal

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


#: Run a command of a tool call: ``(argv, cwd, timeout_ms)``.
CommandRunner = Callable[[Sequence[str], str, int], Awaitable[CommandResult]]


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_ms: int,
    sandbox: SandboxPolicy | None,
    executable: str | None = None,
) -> CommandOutput:
    """Run ``argv`` in ``cwd`` with ``env`` and no standard input, in ``sandbox`` (None:
    unconfined), for at most ``timeout_ms``; nothing it started outlives the call.
    ``executable``, when given, is the program run in place of ``argv[0]`` (which the
    command then does not see): the file a caller resolved and checked, run as it is.

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
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            time_limit=timeout_ms / 1000,
        ) as process:
            assert process.stdout is not None
            async for chunk in process.stdout:
                if size < OUTPUT_LIMIT:
                    chunks.append(chunk)
                size += len(chunk)
            await process.wait()
    code = None if process.timed_out else process.returncode
    printed = b"".join(chunks).decode("utf-8", errors="replace")
    refused = None if sandbox is None else refusal(code, printed, network=sandbox.network)
    return CommandOutput(printed, size, code, refused)


__all__ = ["OUTPUT_LIMIT", "CommandOutput", "CommandResult", "CommandRunner", "run_command"]
