"""Tools: the registry, the context a tool runs with, and the built-in tools (docs/session.md).

A tool is a name, a JSON schema and an async callable ``(args, ctx) -> str``. Errors a tool
raises on purpose (:class:`ToolError`) become its output; the model reads them and can try
again. Paths are confined to the session's ``cwd``; commands are argv lists, never a shell.
"""

from __future__ import annotations

import errno
import heapq
import json
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs

from .._base import _json
from .._base import _protocol as p
from .._base._errors import RelayError
from .._base._model import ToolSpec
from .._exec._command import CommandRunner
from .._exec._real_work import in_thread
from ._exec_gate import WriteCheck
from ._task import strayed
from ._work_state import (
    WorkEntry,
    dir_listed,
    file_read,
    lines_that_stood_out,
    tool_failed,
)

logger = logging.getLogger("relay.tools")


class ToolError(RelayError):
    """A tool failed in a way the model should read (becomes the tool's output)."""


@attrs.frozen
class ToolContext:
    """What a tool may use of the session."""

    turn_id: str
    """The turn that called the tool."""
    cwd: str
    """The working directory of the turn."""
    emit: Callable[[p.EventMsg], None]
    """Report an event in the turn (dropped once the turn has ended)."""
    hidden_env: frozenset[str] = frozenset()
    """Environment variables the commands a tool starts must not see (the API key's)."""
    tokens_used: int = 0
    """The usage compared with the auto-compaction limit when the tool was called."""
    context_window: int | None = None
    """The context window of the turn's model, when known."""
    note: Callable[[WorkEntry], None] = lambda entry: None
    """Add an entry to the session's work-state record (kept only when the record is on):
    what the tool observed, stated as a fact the model may rely on after a compaction."""
    run_command: CommandRunner | None = None
    """How the call's commands run: the session's gate chose it for this call, with its
    rules (docs/approvals.md). None, outside a session: the gate's default rules, without
    :attr:`hidden_env`."""
    call_id: str = ""
    """The model's id of the call."""
    found: dict[str, str | None] = attrs.field(factory=dict)
    """Each file the turn's patches changed, as the turn found it (the turn's diff)."""
    check_writes: WriteCheck | None = None
    """What the files a call writes pass first (the session's gate chose it for this call):
    a refusal (None to write them, else what the model reads instead) and whether anyone was
    asked. None outside a session: nothing is written."""
    report: Callable[[p.ToolResult], None] = lambda result: None
    """Say how the call ended, as data (a tool that does not: completed, or failed when it
    raises)."""
    agents: object | None = None
    """The session's sub-agents (an ``Agents``), for the sub-agent tools; None
    outside a session."""


ToolHandler = Callable[[Mapping[str, Any], ToolContext], Awaitable[str]]


@attrs.frozen
class Tool:
    """A tool the model can call."""

    name: str
    """Tool name."""
    description: str
    """What it does, for the model."""
    parameters: Mapping[str, Any]
    """JSON schema of its arguments."""
    handler: ToolHandler
    """The implementation."""
    needs_approval: bool | None = False
    """Whether a call waits for a decision before it runs (docs/approvals.md): True before
    every call, False never, None as the approval policy says (``untrusted`` asks). A Python
    tool runs in relay's process, outside any sandbox."""
    mcp: tuple[str, str] | None = None
    """The MCP server that serves the tool, and the tool's name on it."""

    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(self.name, self.description, self.parameters)


def unsupported_output(name: str) -> str:
    """The output of a call to a tool the session does not have."""
    return f"unsupported call: {name}"


class ToolRegistry:
    """The tools of a session, by name, in registration order."""

    def __init__(self, tools: Mapping[str, Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = dict(tools or {})
        self._specs: tuple[ToolSpec, ...] | None = None
        self._notices: list[str] = []

    def register(self, tool: Tool) -> None:
        """Add or replace a tool."""
        self._tools[tool.name] = tool
        self._specs = None

    def replace(self, old: Iterable[str], new: Iterable[Tool], notice: str) -> None:
        """Take the tools named ``old`` away and register ``new`` (a tool that keeps its name
        keeps its place), between two requests: ``notice`` says what changed, and waits for
        the next request that offers the tools (:meth:`take_notices`)."""
        made = {tool.name: tool for tool in new}
        for name in old:
            if name not in made:
                self._tools.pop(name, None)
        self._tools.update(made)
        self._specs = None
        self._notices.append(notice)

    def take_notices(self) -> list[str]:
        """What changed in the tools since the last request that offered them (once)."""
        notices, self._notices = self._notices, []
        return notices

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if registered."""
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        """Every tool as the model sees it (the same tuple until a tool is registered)."""
        if self._specs is None:
            self._specs = tuple(tool.spec() for tool in self._tools.values())
        return self._specs

    def names(self) -> list[str]:
        """Registered tool names."""
        return list(self._tools)

    async def call(self, call: p.FunctionCall, ctx: ToolContext) -> str:
        """Run a call; returns the output to record (never raises for tool-level failures).
        A call that did not run, or whose tool raised, is reported failed."""
        output, failed, noted = await self._run(call, ctx)
        if noted is not None:
            ctx.note(tool_failed(call.name, noted))
        if failed:
            ctx.report(p.ToolResult(p.CallStatus.FAILED))
        return readable(output)

    async def _run(self, call: p.FunctionCall, ctx: ToolContext) -> tuple[str, bool, str | None]:
        """The output of ``call``, whether it failed, and what the work-state record says of a
        tool that raised."""
        tool = self._tools.get(call.name)
        if tool is None:
            return unsupported_output(call.name), True, None
        try:
            args = _json.loads(call.arguments) if call.arguments.strip() else {}
        except ValueError as exc:
            # A syntax error, or JSON Python cannot hold (deep nesting, a huge integer, NaN).
            reason = exc.msg if isinstance(exc, json.JSONDecodeError | _json.JsonRejected) else exc
            return f"invalid arguments for {call.name}: {reason}", True, None
        if not isinstance(args, Mapping):
            return f"invalid arguments for {call.name}: expected a JSON object", True, None
        try:
            return await tool.handler(args, ctx), False, None
        except ToolError as exc:
            return f"error: {exc}", True, readable(str(exc))
        except BaseException as exc:
            if not isinstance(exc, Exception) and not strayed(exc):
                raise
            # The call is answered whatever went wrong; the details, which may hold absolute
            # paths, go to the log only.
            logger.exception("tool %s failed", call.name)
            kind = type(exc).__name__
            return (
                f"error: {call.name} failed unexpectedly ({kind})",
                True,
                f"failed unexpectedly ({kind})",
            )


def readable(text: str) -> str:
    """``text`` as valid UTF-8: the bytes of a name that is not UTF-8 as ``\\xNN``.

    File names that are not UTF-8 reach Python as lone surrogates (``surrogateescape``),
    which no event, rollout line or request can carry; any other lone surrogate becomes
    U+FFFD.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join(_readable_char(char) for char in text)
    return text


def _readable_char(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return char


# ----------------------------------------------------------------------------- built-ins


def resolve_in_cwd(cwd: str, raw: object) -> Path:
    """Resolve ``raw`` inside ``cwd``; a path that escapes it (``..``, absolute, symlink) fails."""
    if not isinstance(raw, str) or not raw:
        raise ToolError("path must be a non-empty string")
    if "\0" in raw:
        raise ToolError("path must not contain a NUL character")
    try:
        root = Path(cwd).resolve()
        candidate = (root / raw).resolve()
    except (RuntimeError, OSError) as exc:
        # A symlink loop (RuntimeError up to Python 3.12, ELOOP after); the exception's own
        # text names the absolute path, which the model is not told.
        why = "symlink loop" if _is_loop(exc) else getattr(exc, "strerror", None) or "error"
        raise ToolError(f"path {raw!r} cannot be resolved: {why}") from None
    if candidate != root and root not in candidate.parents:
        raise ToolError(f"path {raw!r} is outside the working directory")
    return candidate


def _is_loop(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno == errno.ELOOP
    return "loop" in str(exc).lower()


_READ_LIMIT = 256 * 1024

_FILE_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What kind of file ``mode`` (an ``st_mode``) describes, as a phrase."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "a special file")


def _read_head(path: Path, raw: str) -> tuple[bytes, int]:
    """At most ``_READ_LIMIT`` bytes of the regular file ``path``, and the file's size.

    Anything that is not a regular file is refused before it is read: a FIFO would block
    the reader for good, a device can be endless. The file is opened without blocking and
    checked again once open, so that swapping it for a FIFO in between changes nothing.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ToolError(f"no such file: {raw}") from None
    except IsADirectoryError:
        raise ToolError(f"{raw} is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket
            raise ToolError(f"{raw} is a socket, not a regular file") from None
        raise ToolError(f"cannot read {raw}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{raw} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{raw} is {file_kind(info.st_mode)}, not a regular file")
        chunks: list[bytes] = []
        wanted = _READ_LIMIT
        while wanted:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
        data = b"".join(chunks)
        return data, max(info.st_size, len(data))
    except OSError as exc:
        raise ToolError(f"cannot read {raw}: {exc.strerror}") from None
    finally:
        os.close(fd)


async def _read_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    raw = args.get("path")
    path = resolve_in_cwd(ctx.cwd, raw)
    data, size = await in_thread(_read_head, path, str(raw))
    ctx.note(file_read(readable(str(raw)), size, data))
    text = data.decode("utf-8", errors="replace")
    for entry in lines_that_stood_out(readable(str(raw)), text):
        ctx.note(entry)
    if size > len(data):
        text += f"\n[file truncated at {len(data)} bytes of {size}]"
    return text


#: Entries ``list_dir`` shows; the others are counted.
_LIST_LIMIT = 1000
#: The directory ``list_dir`` lists when the call names none.
_LIST_DEFAULT = "."


def _list_head(path: Path, raw: str) -> tuple[list[str], int]:
    """The first ``_LIST_LIMIT`` names in ``path`` (directories end in ``/``), and the count.

    One pass over the directory that keeps only the names it returns, so that a directory of
    millions of entries costs time in proportion but no more memory than a small one; the
    kind of an entry comes from the directory itself, without a ``stat`` per entry.
    """
    try:
        with os.scandir(path) as entries:
            total = 0

            def counted() -> Iterator[tuple[str, bool]]:
                nonlocal total
                for entry in entries:
                    total += 1
                    yield entry.name, _is_dir(entry)

            head = heapq.nsmallest(_LIST_LIMIT, counted(), key=lambda pair: pair[0])
    except FileNotFoundError:
        raise ToolError(f"no such directory: {raw}") from None
    except NotADirectoryError:
        raise ToolError(f"{raw} is not a directory") from None
    except OSError as exc:
        raise ToolError(f"cannot list {raw}: {exc.strerror}") from None
    return [name + ("/" if is_dir else "") for name, is_dir in head], total


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


async def _list_dir(args: Mapping[str, Any], ctx: ToolContext) -> str:
    raw = args.get("path") or _LIST_DEFAULT
    path = resolve_in_cwd(ctx.cwd, raw)
    # A huge directory takes its time: an interrupted turn does not wait for the listing.
    lines, total = await in_thread(_list_head, path, str(raw), abandon_on_cancel=True)
    ctx.note(dir_listed(readable(str(raw)), total))
    if not lines:
        return "(empty)"
    if total > len(lines):
        lines.append(f"[{total - len(lines)} more entries not shown; {total} in all]")
    return "\n".join(lines)


async def _sleep(args: Mapping[str, Any], ctx: ToolContext) -> str:
    seconds = args.get("seconds", 1)
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        raise ToolError("seconds must be a non-negative number")
    await anyio.sleep(float(seconds))
    return f"slept {seconds} seconds"


READ_FILE = Tool(
    "read_file",
    "Read a text file inside the working directory.",
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The file, relative to the working directory",
            }
        },
        "required": ["path"],
    },
    _read_file,
)


LIST_DIR = Tool(
    "list_dir",
    "List a directory inside the working directory.",
    {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "The directory, relative to the working directory",
                "default": _LIST_DEFAULT,
            }
        },
    },
    _list_dir,
)


SLEEP = Tool(
    "sleep",
    "Wait for a number of seconds.",
    {
        "type": "object",
        "properties": {
            "seconds": {
                "type": "number",
                "minimum": 0,
                "description": "How long to wait",
            }
        },
        "required": ["seconds"],
    },
    _sleep,
)


#: The tool through which the model asks for a fresh context window (token-budget feature).
NEW_CONTEXT_WINDOW = "new_context_window"


async def _context_window_status(args: Mapping[str, Any], ctx: ToolContext) -> str:
    del args
    if ctx.context_window is None:
        return f"{ctx.tokens_used} tokens used; the size of the window is not known."
    left = max(ctx.context_window - ctx.tokens_used, 0)
    return (
        f"{left} of {ctx.context_window} tokens left "
        f"({ctx.tokens_used} used, {ctx.tokens_used * 100 // ctx.context_window}%)."
    )


async def _new_context_window(args: Mapping[str, Any], ctx: ToolContext) -> str:
    del args, ctx
    return "A fresh context window starts after this step."


#: The model's own context tools, offered with the token-budget feature.
CONTEXT_TOOLS: tuple[Tool, ...] = (
    Tool(
        "context_window_status",
        "Report how many tokens of the context window are used and how many are left.",
        {"type": "object", "properties": {}},
        _context_window_status,
    ),
    Tool(
        NEW_CONTEXT_WINDOW,
        "Set the conversation aside and continue in a fresh context window that starts from "
        "the current state of the workspace.",
        {"type": "object", "properties": {}},
        _new_context_window,
    ),
)


RECALL_TOOL = "recall"


def recall_tool(outputs: Mapping[str, str]) -> Tool:
    """The ``recall`` tool over ``outputs`` (call id → output as first recorded).

    It returns the original of a masked tool output exactly as it was recorded; the reference
    is the one the placeholder names.
    """

    async def recall(args: Mapping[str, Any], ctx: ToolContext) -> str:
        reference = args.get("reference")
        if not isinstance(reference, str) or not reference:
            raise ToolError("reference must be a non-empty string")
        output = outputs.get(reference)
        if output is None:
            raise ToolError(f"no tool output is recorded under the reference {reference!r}")
        return output

    return Tool(
        RECALL_TOOL,
        "Return the exact output of an earlier tool call whose output was masked in the "
        "conversation; pass the reference the placeholder names.",
        {
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "The reference of the output"}
            },
            "required": ["reference"],
        },
        recall,
    )
