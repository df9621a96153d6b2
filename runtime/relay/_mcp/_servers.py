"""The MCP servers of a session: started with it, their tools offered as relay tools, called,
restarted, and stopped with it (docs/tools.md).

Theory of operation. Each run of a server (a *connection*) lives in a task of its own in the
servers' task group, because the SDK's client session and its transport are contexts that must
be left in the task that entered them: the task starts the transport, initialises the client
session and lists the tools (within ``startup_timeout_sec``), hands the connection over, then
waits until it is asked to stop or the server goes away. A tool call runs in the calling turn's
task, through the connection's client session; cancelling the turn cancels the call, and the
SDK tells the server (``notifications/cancelled``). When a connection ends, the calls still
waiting on it are cancelled and fail with an output that says so.

A server that went away is started again by the next call of one of its tools, at most once per
turn: the turn id in the call's :class:`~relay.ToolContext` is the budget, so nothing of the
core knows of servers. An answer relay could not read (:mod:`._answers`) fails its call and
leaves the server be.

A server that says its list of tools changed is listed again by its connection's task, and the
new list goes to the session's registry (:mod:`._listing`). What the model is offered is
capped there: at most :data:`MAX_TOOLS` tools a server and a session, relay's own included,
read from at most :data:`MAX_PAGES` pages of a server's list; each cut is a warning that names
the server.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs
import httpx2
import mcp.types as mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .._base import _protocol as p
from .._base._mcp_config import McpServerConfig
from .._core._tools import Tool, ToolContext, ToolError
from .._version import __version__
from ._answers import Unreadable
from ._http import AnswerBook, Answers
from ._listing import MAX_PAGES, MAX_TOOLS, Listing, follow, list_tools
from ._names import qualify
from ._results import result_text
from ._stdio import StdioLink, open_stdio

logger = logging.getLogger("relay.mcp")

#: What a stdio server inherits of relay's environment besides its ``env`` and ``env_vars``.
INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
#: Lines of a server's standard error a warning quotes, and a failed call's output.
WARNING_LINES = 10
CALL_LINES = 5
#: How long a failed call waits for a server that went away to be seen gone (its status).
_GONE_WAIT = 2.0
#: A tool's own rule by its server's ``approval``: unset, the approval policy decides.
_NEEDS_APPROVAL: dict[str | None, bool | None] = {"always": True, "never": False, None: None}

_CLIENT_INFO = mcp_types.Implementation(name="relay", version=__version__)

#: The two streams a client session talks through.
Streams = tuple[Any, Any]


class StartFailed(Exception):
    """A server did not start: why, and (stdio) the link whose standard error says more."""

    def __init__(self, reason: str, link: StdioLink | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.link = link

    def describe(self, lines: int = WARNING_LINES) -> str:
        """Why, with its exit status and the last ``lines`` of its standard error."""
        return self.reason + _last_words(self.link, lines)


def _status(link: StdioLink | None) -> str:
    code = link.returncode if link is not None else None
    if code is None:
        return ""
    return f" (killed by signal {-code})" if code < 0 else f" (exit status {code})"


def _last_words(link: StdioLink | None, lines: int) -> str:
    """The end of a server's standard error, for a message."""
    tail = link.stderr_tail()[-lines:] if link is not None else []
    if not tail:
        return ""
    return ". The end of its standard error:\n" + "\n".join(f"  {line}" for line in tail)


@attrs.define(eq=False)
class Connection:
    """One run of a server."""

    session: ClientSession
    """The client session."""
    tools: dict[str, mcp_types.Tool]
    """The tools it listed, by its names for them."""
    link: StdioLink | None
    """The process of a stdio server."""
    stop: anyio.Event = attrs.field(factory=anyio.Event)
    """Set to end it."""
    ended: anyio.Event = attrs.field(factory=anyio.Event)
    """Set once it is over (its transport closed)."""
    lost: str | None = None
    """Why it is gone, when it went without being asked to."""
    calls: set[anyio.CancelScope] = attrs.field(factory=set)
    """The calls waiting on it."""
    listing: Listing = attrs.field(factory=Listing)
    """Whether :attr:`tools` is the server's list as it stands."""
    cut: str | None = None
    """What its tool list left out, as a warning, when the caps left out any."""

    @property
    def usable(self) -> bool:
        """Whether a call may go to it."""
        link = self.link
        return not (
            self.stop.is_set()
            or self.ended.is_set()
            or self.lost is not None
            or (link is not None and link.closed.is_set())
        )

    def gone(self) -> str:
        """What became of the server, as a phrase (``stopped (exit status 3)``)."""
        link = self.link
        if self.lost is not None and link is None:
            return f"is unreachable: {self.lost}"
        return f"stopped{_status(link)}"

    async def give_up(self, why: str) -> None:
        """Take it for gone and have its task end it; wait (bounded) for what says how it
        went (a stdio server's exit status, the error that ended an HTTP transport), else
        ``why``."""
        self.stop.set()
        with anyio.move_on_after(_GONE_WAIT):
            await (self.link.exited if self.link is not None else self.ended).wait()
        if self.lost is None:
            self.lost = why


class McpServer:
    """One configured server, across its runs."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        cwd: str,
        hidden_env: frozenset[str],
        group: anyio.abc.TaskGroup,
        listed: Callable[[McpServer], None] = lambda server: None,
    ) -> None:
        self.name = name
        self.config = config
        self.connection: Connection | None = None
        """The current run, once one started."""
        self.listed = listed
        """Told when a run listed its tools again, or a new run listed them."""
        self._cwd = cwd
        self._hidden_env = hidden_env
        self._group = group
        self._lock = anyio.Lock()
        self._restarted_in: str | None = None

    # ------------------------------------------------------------------ starting

    async def start(self) -> Connection:
        """Start a run of the server and wait until it listed its tools.

        Raises:
            StartFailed: it did not start (the reason says why; a stdio server's standard
                error is read to its end first).
        """
        outcome: Connection | StartFailed = await self._group.start(self._run)
        if isinstance(outcome, StartFailed):
            raise outcome
        self.connection = outcome
        return outcome

    async def _run(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        """A run of the server, from its start to its end; never raises but to be
        cancelled."""
        started: list[Connection] = []
        failure: StartFailed | None = None
        try:
            async with self._connect() as connection:
                started.append(connection)
                task_status.started(connection)
                async with anyio.create_task_group() as following:
                    following.start_soon(self._follow, connection)
                    await _first_of(connection.stop, connection.link)
                    following.cancel_scope.cancel()
                if not connection.stop.is_set():
                    connection.lost = "its output ended"
        except BaseException as exc:
            error = _error_of(exc)
            if error is None:
                raise
            if not started:
                failure = error if isinstance(error, StartFailed) else self._failure(error)
            elif started[0].lost is None:
                started[0].lost = _describe(error)
                logger.info("MCP server %s went away: %s", self.name, started[0].lost)
        finally:
            if started:
                connection = started[0]
                connection.ended.set()
                for scope in list(connection.calls):
                    scope.cancel()
        if failure is not None:
            task_status.started(failure)

    async def _follow(self, connection: Connection) -> None:
        async def relist() -> list[mcp_types.Tool]:
            with anyio.fail_after(self.config.startup_timeout_sec):
                listed = await list_tools(connection.session, self.config.offers)
            connection.cut = listed.warning(self.name)
            return list(listed.tools)

        def listed(tools: list[mcp_types.Tool]) -> None:
            connection.tools = {tool.name: tool for tool in tools}
            self.listed(self)

        await follow(connection.listing, relist, listed, server=self.name)

    def _failure(self, error: BaseException) -> StartFailed:
        if isinstance(error, OSError) and self.config.command is not None:
            why = error.strerror or str(error)
            cwd = self._server_cwd()
            if error.filename == cwd:
                # The process was not started in it: the command was never looked for.
                return StartFailed(f"its cwd {cwd!r} cannot be used: {why}")
            return StartFailed(f"cannot start {self.config.command!r}: {why}")
        return StartFailed(_describe(error))

    def _server_cwd(self) -> str:
        """The working directory of a stdio server: its ``cwd``, relative to the session's."""
        cwd = self.config.cwd
        return str(Path(self._cwd) / cwd) if cwd else self._cwd

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Connection]:
        config = self.config
        transport = self._http() if config.url is not None else self._stdio()
        failure: StartFailed | None = None
        listing = Listing()
        async with (
            transport as (link, (receive, send)),
            ClientSession(
                receive, send, client_info=_CLIENT_INFO, message_handler=listing.on_message
            ) as session,
        ):
            # Errors are caught here: out of the session's block, its task group wraps them.
            try:
                with anyio.fail_after(config.startup_timeout_sec):
                    await session.initialize()
                    listed = await list_tools(session, config.offers)
            except (TimeoutError, MCPError) as exc:
                failure = await self._start_failure(exc, link)
            else:
                offered = {tool.name: tool for tool in listed.tools}
                cut = listed.warning(self.name)
                yield Connection(session, offered, link, listing=listing, cut=cut)
        if failure is not None:
            # Out of the transport: a stdio server is gone, and its standard error read.
            raise failure

    async def _start_failure(self, exc: Exception, link: StdioLink | None) -> StartFailed:
        """What went wrong when the server was asked to start."""
        if isinstance(exc, TimeoutError):
            failure = StartFailed(
                f"did not start within {self.config.startup_timeout_sec:g} s", link
            )
        elif isinstance(exc, MCPError) and isinstance(exc.data, Unreadable):
            failure = StartFailed(f"its answer could not be read: {exc.data.why}", link)
        elif (
            isinstance(exc, MCPError)
            and link is not None
            and exc.code == mcp_types.CONNECTION_CLOSED
        ):
            await _wait_exit(link)
            failure = StartFailed(f"exited before it answered{_status(link)}", link)
        else:
            message = exc.message if isinstance(exc, MCPError) else str(exc)
            failure = StartFailed(f"failed to start: {message}", link)
        if link is not None:
            link.hurry = True
        return failure

    @asynccontextmanager
    async def _stdio(self) -> AsyncIterator[tuple[StdioLink | None, Streams]]:
        config = self.config
        assert config.command is not None
        environ = {k: v for k in INHERITED_ENV if (v := os.environ.get(k)) is not None}
        environ.update(
            {
                k: v
                for k in config.env_vars
                if k not in self._hidden_env and (v := os.environ.get(k)) is not None
            }
        )
        environ.update(config.env)
        argv = [config.command, *config.args]
        cwd = self._server_cwd()
        bound = config.tool_output_max_bytes
        async with open_stdio(self.name, argv, cwd=cwd, env=environ, bound=bound) as (
            link,
            receive,
            send,
        ):
            yield link, (receive, send)

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[tuple[StdioLink | None, Streams]]:
        config = self.config
        assert config.url is not None
        headers = dict(config.http_headers)
        variable = config.bearer_token_env_var
        if variable is not None:
            token = os.environ.get(variable, "").strip()
            if not token:
                raise StartFailed(
                    f"the environment variable {variable} (its bearer_token_env_var) is "
                    "unset or empty"
                )
            headers["Authorization"] = f"Bearer {token}"
        timeout = httpx2.Timeout(30.0, read=300.0)
        book = AnswerBook(config.tool_output_max_bytes)
        hooks = {"response": [book.bound_response]}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http,
            # The SDK's own bound on an event is a backstop: the body is bounded first.
            streamable_http_client(
                config.url, http_client=http, max_sse_event_size=2 * book.bound
            ) as (receive, send),
        ):
            yield None, (Answers(receive, book), send)

    # ------------------------------------------------------------------ calling

    def tools(self, taken: Sequence[str]) -> tuple[list[Tool], list[str]]:
        """The relay tools of the server's offered tools (``taken``: names already used),
        and the names of those left out because their name is taken."""
        connection = self.connection
        assert connection is not None
        made: list[Tool] = []
        skipped: list[str] = []
        for tool_name, name in qualify(self.name, connection.tools, taken):
            if name is None:
                skipped.append(tool_name)
                continue
            tool = connection.tools[tool_name]
            made.append(
                Tool(
                    name,
                    tool.description or tool.title or "",
                    dict(tool.input_schema),
                    self._handler(tool_name),
                    needs_approval=_NEEDS_APPROVAL[self.config.approval],
                    mcp=(self.name, tool_name),
                )
            )
        return made, skipped

    def _handler(self, tool: str) -> Callable[[Mapping[str, Any], ToolContext], Any]:
        async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
            return await self.call(tool, args, ctx)

        return handler

    async def call(self, tool: str, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        """Call the server's tool ``tool``; its output.

        Raises:
            ToolError: the server is gone (and could not be restarted in this turn), the tool
                is not there, the call timed out, or the tool or the server reported an error.
        """
        connection = await self._ready(ctx)
        if tool not in connection.tools:
            raise ToolError(f"MCP server {self.name!r} no longer offers the tool {tool!r}")
        timeout = self.config.tool_timeout_sec
        gone = False
        with anyio.CancelScope() as scope:
            connection.calls.add(scope)
            try:
                result = await connection.session.call_tool(
                    tool, dict(arguments), read_timeout_seconds=timeout
                )
            except MCPError as exc:
                if isinstance(exc.data, Unreadable):
                    raise ToolError(
                        f"the answer of MCP server {self.name!r} could not be read: {exc.data.why}"
                    ) from None
                if exc.code == mcp_types.REQUEST_TIMEOUT:
                    raise ToolError(
                        f"the call timed out after {timeout:g} s (tool_timeout_sec); the server "
                        "was told to stop it"
                    ) from None
                if exc.code != mcp_types.CONNECTION_CLOSED:
                    raise ToolError(f"MCP error {exc.code}: {exc.message}") from None
                gone = True
            except (RuntimeError, ValueError) as exc:
                # What the SDK makes of a result it cannot use (structured content that does
                # not match the tool's output schema, an answer of another kind).
                raise ToolError(f"the server's answer is not usable: {exc}") from None
            finally:
                connection.calls.discard(scope)
        if gone or scope.cancelled_caught:
            await connection.give_up("the connection closed")
            raise ToolError(
                f"MCP server {self.name!r} {connection.gone()} during the call; it is started "
                f"again at the next call{_last_words(connection.link, CALL_LINES)}"
            )
        # A new list of tools the server announced before it answered is in before the request
        # that follows the call.
        with anyio.move_on_after(self.config.startup_timeout_sec):
            await connection.listing.current.wait()
        text = result_text(result.model_dump(by_alias=True, mode="json", exclude_none=True))
        if result.is_error:
            raise ToolError(text or "the tool reported an error")
        return text

    async def _ready(self, ctx: ToolContext) -> Connection:
        """The connection a call goes to: the current one, or a new one when the server went
        away and was not restarted in this turn yet."""
        async with self._lock:
            connection = self.connection
            if connection is not None and connection.usable:
                return connection
            gone = connection.gone() if connection is not None else "is not running"
            if self._restarted_in == ctx.turn_id:
                raise ToolError(
                    f"MCP server {self.name!r} {gone}; it was started again once in this turn "
                    "already, and is started again at its next call in a later turn"
                )
            self._restarted_in = ctx.turn_id
            try:
                connection = await self.start()
            except StartFailed as failure:
                raise ToolError(
                    f"MCP server {self.name!r} {gone} and did not start again: "
                    f"{failure.describe(CALL_LINES)}"
                ) from None
            ctx.emit(p.BackgroundEvent(f"MCP server {self.name!r} {gone}; started it again"))
            self.listed(self)
            return connection

    def close(self) -> None:
        """Ask the current run to end (its task stops the server)."""
        if self.connection is not None:
            self.connection.stop.set()


async def _first_of(stop: anyio.Event, link: StdioLink | None) -> None:
    """Wait until ``stop`` is set or the stdio server's output ends."""
    if link is None:
        await stop.wait()
        return
    async with anyio.create_task_group() as tg:

        async def watch(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(watch, stop)
        tg.start_soon(watch, link.closed)


async def _wait_exit(link: StdioLink) -> None:
    with anyio.move_on_after(_GONE_WAIT):
        await link.exited.wait()


def _error_of(exc: BaseException) -> Exception | None:
    """The error inside ``exc`` (task groups wrap it), or None when ``exc`` is, or holds, a
    cancellation, which must go on."""
    if isinstance(exc, BaseExceptionGroup):
        found: Exception | None = None
        for inner in exc.exceptions:
            error = _error_of(inner)
            if error is None:
                return None
            found = found or error
        return found
    return exc if isinstance(exc, Exception) else None


def _describe(error: BaseException) -> str:
    if isinstance(error, StartFailed):
        return error.describe()
    if isinstance(error, MCPError):
        return error.message
    if isinstance(error, httpx2.HTTPError):
        return f"{type(error).__name__}: {error}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


__all__ = [
    "MAX_PAGES",
    "MAX_TOOLS",
    "Connection",
    "McpServer",
    "StartFailed",
]
