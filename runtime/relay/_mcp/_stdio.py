"""An MCP server spoken to over its standard input and output: the stdio transport, on relay's
own child processes (:func:`relay._exec._process.open_command`).

The SDK has a stdio transport of its own; relay starts servers as it starts every process of a
session instead, under a guard in a process group of their own: the server and everything it
starts go when the session is done with it, and also when relay itself is killed (SIGTERM,
SIGKILL, a crash), which a server that ignores the end of its input would otherwise outlive.
The transport also keeps the last lines of the server's standard error, which say why a server
that failed did.

Each line the server writes is read up to the server's ``tool_output_max_bytes``
(:class:`~._answers.Lines`). A line over it, or one that is no message relay can read, is an
answer that fails the request it names at once (:mod:`._answers`): the transport keeps the ids
of the requests still waiting for their answers to know which. A line that names none of them
fails every one of them, unless it is a message of the server's own (it has a ``method``),
which is left out.

Messages are JSON-RPC, one per line, as the MCP specification has it. Stopping a server follows
the specification too: its input is closed, it gets :data:`GRACE_SECONDS` to exit, then SIGTERM
and as long again, then the guard kills what is left. A server that failed to start is killed
at once (:attr:`StdioLink.hurry`).
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import mcp.types as mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from .._exec._process import Command, open_command
from ._answers import (
    Lines,
    Overlong,
    RequestId,
    Unreadable,
    answer_ids,
    over_bound,
    request_key,
    why_unreadable,
)

logger = logging.getLogger("relay.mcp")

#: How long a server has to exit once its input is closed, and again after SIGTERM.
GRACE_SECONDS = 2.0
#: Lines of a server's standard error kept for the messages that explain a failure.
STDERR_LINES = 20
#: How long the end of a server's standard error is waited for once it has exited (a process
#: it started may hold it open).
STDERR_WAIT_SECONDS = 1.0
#: The longest line of standard error kept (the rest of it is cut).
MAX_STDERR_LINE = 2000

_PIPE_ERRORS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class StdioLink:
    """A running stdio server: the pid of its group, the tail of its standard error, whether
    it is still there."""

    def __init__(self, name: str, command: Command, bound: int) -> None:
        self.name = name
        """The server's name (for the log)."""
        self.command = command
        """The server's process."""
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        """The last lines of its standard error."""
        self.closed = anyio.Event()
        """Set when its standard output ended (it exited, or closed it) or broke the
        protocol: no answer comes from it any more."""
        self.exited = anyio.Event()
        """Set when it has exited (:attr:`returncode` is known)."""
        self.stderr_done = anyio.Event()
        """Set when its standard error ended."""
        self.bound = bound
        """The most bytes of one line read (``tool_output_max_bytes``)."""
        self.waiting: set[RequestId] = set()
        """The requests sent to it and not answered yet (as :func:`~._answers.request_key`
        has them)."""
        self.hurry = False
        """Kill it at once when the link closes, without the grace of a stop."""

    @property
    def returncode(self) -> int | None:
        """How it exited, once it has (a negative number: the signal that killed it)."""
        return self.command.returncode if self.exited.is_set() else None

    def stderr_tail(self) -> list[str]:
        """The last lines of its standard error, blank ones left out."""
        return [line for line in self.stderr if line.strip()]

    async def _read_stdout(self, send: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        stdout = self.command.stdout
        assert stdout is not None
        lines = Lines(self.bound)
        try:
            async with send:
                async for chunk in stdout:
                    for line in lines.feed(chunk):
                        for message in self._messages(line):
                            await send.send(message)
        except _PIPE_ERRORS:
            pass
        finally:
            self.closed.set()

    def _messages(self, line: bytes | Overlong) -> list[SessionMessage]:
        """What one line of the server's output is to the client session: its message, or
        the errors of the requests it fails."""
        if isinstance(line, Overlong):
            return self._unreadable(line.head, over_bound(self.bound))
        if not line.strip():
            return []
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            return self._unreadable(line, why_unreadable(line, exc))
        answered = message.id if isinstance(message, mcp_types.JSONRPCResponse) else None
        if isinstance(message, mcp_types.JSONRPCError):
            answered = message.id
        if answered is not None:
            self.waiting.discard(request_key(answered))
        return [SessionMessage(message)]

    def _unreadable(self, raw: bytes, why: str) -> list[SessionMessage]:
        """The errors that fail the requests an answer relay cannot read was meant for."""
        named = [key for key in map(request_key, answer_ids(raw)) if key in self.waiting]
        if named:
            failed = [named[0]]
        elif b'"method"' in raw:
            logger.warning("MCP server %s wrote a message relay cannot read: %s", self.name, why)
            return []
        else:
            failed = sorted(self.waiting, key=str)
        logger.warning("MCP server %s wrote an answer relay cannot read: %s", self.name, why)
        self.waiting.difference_update(failed)
        error = mcp_types.ErrorData(
            code=mcp_types.PARSE_ERROR, message=f"unreadable answer: {why}", data=Unreadable(why)
        )
        return [
            SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=key, error=error))
            for key in failed
        ]

    async def _write_stdin(
        self,
        receive: MemoryObjectReceiveStream[SessionMessage],
        answers: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        stdin = self.command.stdin
        assert stdin is not None
        try:
            async with receive:
                async for message in receive:
                    self._note_sent(message.message)
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode("utf-8") + b"\n")
        except _PIPE_ERRORS:
            # The server no longer reads: no answer is coming, the requests waiting for one
            # end now rather than at their timeouts.
            answers.close()

    def _note_sent(self, message: mcp_types.JSONRPCMessage) -> None:
        """Keep :attr:`waiting` in step with a message sent to the server."""
        if isinstance(message, mcp_types.JSONRPCRequest):
            self.waiting.add(request_key(message.id))
        elif (
            isinstance(message, mcp_types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and isinstance(message.params, dict)
        ):
            cancelled = message.params.get("requestId")
            if isinstance(cancelled, int | str):
                self.waiting.discard(request_key(cancelled))

    async def _read_stderr(self) -> None:
        stderr = self.command.stderr
        assert stderr is not None
        buffer = b""
        try:
            async for chunk in stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._keep(line)
                buffer = buffer[-MAX_STDERR_LINE * 4 :]
        except _PIPE_ERRORS:
            pass
        finally:
            if buffer:
                self._keep(buffer)
            self.stderr_done.set()

    def _keep(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")[:MAX_STDERR_LINE]
        self.stderr.append(line)
        logger.debug("MCP server %s: %s", self.name, line)

    async def _wait(self) -> None:
        await self.command.wait()
        self.exited.set()

    async def _stop(self) -> None:
        """End the server: its input closed, a grace, SIGTERM, a grace (shielded, bounded);
        the guard kills what is left when the command's block is left."""
        stdin = self.command.stdin
        if stdin is not None:
            try:
                await stdin.aclose()
            except _PIPE_ERRORS:
                pass
        if self.hurry:
            return
        with anyio.move_on_after(GRACE_SECONDS):
            await self.exited.wait()
        if not self.exited.is_set() and self.command.pid > 0:
            try:
                os.killpg(self.command.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                return
            with anyio.move_on_after(GRACE_SECONDS):
                await self.exited.wait()


@asynccontextmanager
async def open_stdio(
    name: str, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], bound: int
) -> AsyncIterator[
    tuple[
        StdioLink,
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Start the server ``argv`` and yield its link and the two streams a
    ``mcp.ClientSession`` talks through; leaving the block stops the server (shielded).
    ``bound`` is the most bytes of one line read (``tool_output_max_bytes``).

    Raises:
        OSError: the command could not be started.
    """
    async with open_command(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as command:
        link = StdioLink(name, command, bound)
        answers_send, answers = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        requests, requests_receive = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(link._read_stdout, answers_send)
            tg.start_soon(link._write_stdin, requests_receive, answers_send)
            tg.start_soon(link._read_stderr)
            tg.start_soon(link._wait)
            try:
                yield link, answers, requests
            finally:
                with anyio.CancelScope(shield=True):
                    requests.close()
                    answers.close()
                    await link._stop()
                    if link.exited.is_set():
                        # What the server said last, before the reader is stopped.
                        with anyio.move_on_after(STDERR_WAIT_SECONDS):
                            await link.stderr_done.wait()
                tg.cancel_scope.cancel()


__all__ = ["GRACE_SECONDS", "STDERR_LINES", "StdioLink", "open_stdio"]
