"""The ``shell`` tool: a command as an argv list, never a shell, run as the session's gate
chose for the call (docs/tools.md).

Its arguments are Codex's (``command``, ``workdir``, ``timeout_ms`` and the escalation fields;
``argv`` is taken for ``command``), so that a model trained on Codex's tool calls relay's the
same way. What the command prints goes out as it comes (``exec_command_output_delta``); how
it ended is reported as data (:class:`~relay.protocol.ToolResult`), and the model reads its
output with a last line that says how it ended.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._base import _protocol as p
from .._exec._command import (
    ESCALATION_PARAMETERS,
    OUTPUT_LIMIT,
    CommandResult,
    command_result,
    escalation_problem,
    shell_argv,
    workdir_of,
)
from .._exec._real_work import in_thread
from ._exec_gate import outside_session
from ._tools import Tool, ToolContext, ToolError, readable
from ._work_state import command_run, lines_that_stood_out

#: How long a ``shell`` command may run when the call does not say.
SHELL_TIMEOUT_MS = 10_000


@attrs.frozen
class ShellRun:
    """How one ``shell`` call ended."""

    output: str
    """What the model reads: the command's output, then how it ended."""
    printed: str
    """What the command printed (standard output and error, cut at the output limit)."""
    exit_code: int | None
    """Its exit status (confined, 128 + N for a signal N), None when it timed out."""


async def run_shell(args: Mapping[str, Any], ctx: ToolContext) -> ShellRun:
    """Run a ``shell`` call with ``ctx.run_command``: its output goes out as it comes
    (``exec_command_output_delta``), and how it ended is reported as data.

    Raises:
        ToolError: the arguments are invalid, or the command (or bwrap) could not start.
    """
    argv = shell_argv(args)
    if argv is None:
        raise ToolError("command must be a non-empty list of strings")
    timeout_ms = args.get("timeout_ms", SHELL_TIMEOUT_MS)
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms <= 0:
        raise ToolError("timeout_ms must be a positive integer")
    workdir = args.get("workdir")
    if workdir is not None and not (isinstance(workdir, str) and workdir):
        raise ToolError("workdir must be a non-empty string")
    problem = escalation_problem(args)
    if problem is not None:
        raise ToolError(problem)
    at = workdir_of(ctx.cwd, workdir)
    if not await in_thread(os.path.isdir, at):
        raise ToolError(f"workdir {workdir!r} is not a directory")
    sink = _delta_sink(ctx)
    try:
        if ctx.run_command is not None:
            result = await ctx.run_command(argv, at, timeout_ms, on_output=sink)
        else:
            gate = outside_session(ctx.hidden_env)
            ran = await gate.run(argv, cwd=at, timeout_ms=timeout_ms, root=ctx.cwd, on_output=sink)
            result = CommandResult(ran)
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror}") from None
    run = result.output
    output, code = run.printed, run.exit_code
    shown = [readable(x) for x in argv]
    ctx.note(command_run(shown, code, output))
    for entry in lines_that_stood_out(" ".join(shown), output):
        ctx.note(entry)
    ctx.report(command_result(run))
    if run.size > OUTPUT_LIMIT:
        output += f"\n[output truncated at {OUTPUT_LIMIT} bytes of {run.size}]"
    if code is None:
        output += f"\n[timed out after {timeout_ms} ms; process killed]"
    else:
        output += f"\n[exit code {code}]"
    if result.notice is not None:
        output += f"\n[{result.notice}]"
    return ShellRun(output, run.printed, code)


def _delta_sink(ctx: ToolContext) -> Callable[[bytes], None]:
    """Where a command's output goes as it comes: text events, a character split across two
    reads sent whole with the second."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def sink(chunk: bytes) -> None:
        text = decoder.decode(chunk)
        if text:
            ctx.emit(
                p.ExecCommandOutputDelta(ctx.turn_id, ctx.call_id, p.OutputStream.STDOUT, text)
            )

    return sink


async def _shell(args: Mapping[str, Any], ctx: ToolContext) -> str:
    return (await run_shell(args, ctx)).output


SHELL = Tool(
    "shell",
    "Run a command (an argv list, no shell) and return what it printed and how it ended.",
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The program and its arguments",
            },
            "workdir": {
                "type": "string",
                "description": "The folder to run it in (default: the working "
                "directory; a relative path is taken from there)",
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 1,
                "description": "How long it may run; then every process it started is killed",
                "default": SHELL_TIMEOUT_MS,
            },
            **ESCALATION_PARAMETERS,
        },
        "required": ["command"],
    },
    _shell,
)


__all__ = ["SHELL", "SHELL_TIMEOUT_MS", "ShellRun", "run_shell"]
