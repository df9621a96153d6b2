"""An MCP server spoken to over its standard input and output: the stdio transport, on relay's
own child processes (:func:`relay._core._process.open_command`).

The SDK has a stdio transport of its own; relay starts servers as it starts every process of a
session instead, under a guard in a process group of their own: the server and everything it
starts go when the session is done with it, and also when relay itself is killed (SIGTERM,
SIGKILL, a crash), which a server that ignores the end of its input would otherwise outlive.
The transport also keeps the last lines of the server's standard error, which say why a server
that failed did.

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

from .._core._process import Command, open_command

logger = logging.getLogger("relay.mcp")

#: How long a server has to exit once its input is closed, and again after SIGTERM.
GRACE_SECONDS = 2.0
#: Lines of a server's standard error kept for the messages that explain a failure.
STDERR_LINES = 20
#: The longest line a server may write on its standard output; a longer one ends the link.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: How long the end of a server's standard error is waited for once it has exited (a process
#: it started may hold it open).
STDERR_WAIT_SECONDS = 1.0
#: The longest line of standard error kept (the rest of it is cut).
MAX_STDERR_LINE = 2000

_PIPE_ERRORS = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)


class StdioLink:
    """A running stdio server: the pid of its group, the tail of its standard error, whether
    it is still there."""

    def __init__(self, name: str, command: Command) -> None:
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
        self.broken: str | None = None
        """How it broke the protocol, if it did."""
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
        # The start of the line being read, in pieces: a long line (an image) is joined once.
        pending: list[bytes] = []
        size = 0
        try:
            async with send:
                async for chunk in stdout:
                    if b"\n" not in chunk:
                        pending.append(chunk)
                        size += len(chunk)
                        if size > MAX_LINE_BYTES:
                            self.broken = f"wrote a line longer than {MAX_LINE_BYTES} bytes"
                            self.hurry = True
                            return
                        continue
                    *lines, rest = b"".join([*pending, chunk]).split(b"\n")
                    pending, size = [rest], len(rest)
                    for line in lines:
                        if line.strip():
                            await send.send(_parse(self.name, line))
        except _PIPE_ERRORS:
            pass
        finally:
            self.closed.set()

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
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(data.encode("utf-8") + b"\n")
        except _PIPE_ERRORS:
            # The server no longer reads: no answer is coming, the requests waiting for one
            # end now rather than at their timeouts.
            answers.close()

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


def _parse(name: str, line: bytes) -> SessionMessage | Exception:
    """One line of the server's output as a message, or the error that says why it is not
    one (the client session reports it and goes on)."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        logger.warning("MCP server %s wrote a line that is not a JSON-RPC message", name)
        return exc
    return SessionMessage(message)


@asynccontextmanager
async def open_stdio(
    name: str, argv: Sequence[str], *, cwd: str, env: Mapping[str, str]
) -> AsyncIterator[
    tuple[
        StdioLink,
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Start the server ``argv`` and yield its link and the two streams a
    ``mcp.ClientSession`` talks through; leaving the block stops the server (shielded).

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
        link = StdioLink(name, command)
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
