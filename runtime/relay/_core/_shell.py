"""One command of the ``shell`` tool: an argv list (never a shell) run under the process guard,
in a sandbox or not, its output collected (docs/tools.md, docs/approvals.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import attrs

from ._real_work import real_work
from ._sandbox import SandboxPolicy, open_sandboxed

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


async def run_command(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_ms: int,
    sandbox: SandboxPolicy | None,
) -> CommandOutput:
    """Run ``argv`` in ``cwd`` with ``env`` and no standard input, in ``sandbox`` (None:
    unconfined), for at most ``timeout_ms``; nothing it started outlives the call.

    Raises:
        OSError: the command (or bwrap) could not start.
    """
    chunks: list[bytes] = []
    size = 0
    # The command's group is killed on every way out of this block: its children do not
    # outlive the call, nor relay. The timeout is the guard's, on the wall clock: the output
    # ends when it kills them.
    with real_work():
        async with open_sandboxed(
            sandbox,
            argv,
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
    return CommandOutput(b"".join(chunks).decode("utf-8", errors="replace"), size, code)


__all__ = ["OUTPUT_LIMIT", "CommandOutput", "run_command"]
