"""A small MCP server for relay's tests, on the official SDK (``MCPServer``).

Run as ``python tests/mcp/mcp_server.py [--http PORT] [--log FILE] [--lock FILE] [--fail-start
TEXT | --hang]``: over standard input and output by default, over streamable HTTP on
127.0.0.1:PORT with ``--http``. Its tools: ``echo``, ``add`` (structured content), ``slow``
(sleeps; a cancellation is written to the log), ``fail`` (an error result), ``crash`` (the
process exits at once), ``image`` (a PNG), ``pid``, ``env`` and ``cwd`` (what the process sees),
``auth`` (the ``Authorization`` header an HTTP request carried), ``offer`` and ``withdraw`` (add
or remove a tool, then say the list changed, ``notifications/tools/list_changed``: with the
call's answer, or with ``with_answer=false`` on the connection's own stream), and
``long_tool_name_...`` (a name over 64 characters once qualified).

``--fail-start TEXT`` writes TEXT to standard error and exits with status 2 before it answers;
``--hang`` never answers. The log gets one line per event: ``started PID``, ``slow TAG
started``, ``slow TAG cancelled``, ``slow TAG finished``. With ``--lock FILE`` the process holds
an exclusive ``flock`` on FILE from its start to its end, taken before it logs ``started``: a
server started as a command runs in a PID namespace of its own, where the pid it reports names
nothing on the test's side, and a test that can take the lock knows every server holding it
has ended (see :mod:`tests.escapees`).
"""

# No ``from __future__ import annotations``: the SDK reads each tool's annotations, which name
# the SDK's types imported inside main().
import argparse
import fcntl
import os
import sys
import time
from pathlib import Path

#: A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)
LONG_TOOL = "long_tool_name_" + "x" * 60


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--log", default=os.environ.get("MCP_TEST_LOG"))
    parser.add_argument("--fail-start", default=None)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--lock", default=None)
    args = parser.parse_args()
    if args.lock is not None:
        # Held, open, until the process ends: the kernel drops it then.
        lock = os.open(args.lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(lock, fcntl.LOCK_EX)

    def log(line: str) -> None:
        if args.log:
            with open(args.log, "a", encoding="utf-8") as file:
                file.write(line + "\n")

    if args.fail_start is not None:
        sys.stderr.write("starting the test server\n")
        sys.stderr.write(args.fail_start + "\n")
        sys.exit(2)
    if args.hang:
        sys.stderr.write("hanging\n")
        sys.stderr.flush()
        time.sleep(3600)

    import anyio
    from mcp.server.mcpserver import Context, Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolListChangedNotification

    server = MCPServer("relay-test", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def slow(seconds: float, tag: str = "") -> str:
        """Sleep for a while."""
        log(f"slow {tag} started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            log(f"slow {tag} cancelled")
            raise
        log(f"slow {tag} finished")
        return f"slept {seconds}"

    @server.tool()
    async def fail(message: str) -> str:
        """Fail with a message."""
        raise ToolError(message)

    @server.tool()
    async def crash(status: int = 3) -> str:
        """Exit the server at once."""
        sys.stderr.write(f"crashing with status {status}\n")
        sys.stderr.flush()
        os._exit(status)

    @server.tool()
    async def image() -> Image:
        """A picture."""
        return Image(data=PNG, format="png")

    @server.tool()
    async def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool()
    async def env(name: str) -> str:
        """An environment variable, or (unset)."""
        return os.environ.get(name, "(unset)")

    @server.tool()
    async def cwd() -> str:
        """The working directory."""
        return str(Path.cwd())

    @server.tool()
    async def auth(ctx: Context) -> str:
        """The Authorization header of the request (HTTP), or (none)."""
        headers = ctx.headers
        return (headers or {}).get("authorization") or "(none)"

    async def list_changed(ctx: Context, with_answer: bool) -> None:
        # With the answer: on the call's own stream, before the answer (over HTTP too).
        # Without: on the connection's, which over HTTP is a stream of its own.
        related = ctx.request_id if with_answer else None
        await ctx.session.send_notification(
            ToolListChangedNotification(), related_request_id=related
        )

    @server.tool()
    async def offer(name: str, ctx: Context, with_answer: bool = True) -> str:
        """Offer one more tool, NAME (it echoes its text), and say the list changed."""

        async def added(text: str) -> str:
            return text

        server.add_tool(added, name=name, description=f"Echo, as {name}.")
        await list_changed(ctx, with_answer)
        return f"offered {name}"

    @server.tool()
    async def withdraw(name: str, ctx: Context, with_answer: bool = True) -> str:
        """Stop offering the tool NAME, and say the list changed."""
        server.remove_tool(name)
        await list_changed(ctx, with_answer)
        return f"withdrew {name}"

    @server.tool(name=LONG_TOOL)
    async def long_tool() -> str:
        """A tool with a long name."""
        return "long"

    log(f"started {os.getpid()}")
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
