"""``relay app-server``: the server's process (docs/codex-compat.md, docs/cli.md).

It reads requests from standard input until it ends, until SIGINT or SIGTERM, or until its
standard output cannot be written (the client went away); then it shuts every session down
(each running turn ends ``interrupted`` and its tool processes stop, each rollout is flushed),
writes what is left for the client, and exits 0. Sessions that do not end within
:data:`END_BOUND` seconds do not hold the process: it exits 1, saying so on stderr. A second
signal ends the process at once.

Exit status: 0 after a shutdown; 1 when the bound passed; 2 for bad usage (an unknown
``--listen``, a configuration that does not load), with one ``relay:`` line on stderr.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import anyio

from .._base._config import Config

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: Seconds the shutdown may take, on the wall clock, before the process ends anyway.
END_BOUND = 5.0
#: The one transport served.
STDIO = "stdio://"
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve(config: Config, stdin: int, stdout: int) -> None:
    """Serve the protocol over the descriptors ``stdin`` and ``stdout`` until the input ends
    or a signal comes, then shut every session down."""
    from ._server import Server
    from ._stdio import Output, start_reader, start_writer

    out = Output()
    written = anyio.Event()
    start_writer(stdout, out, written.set)
    send, lines = anyio.create_memory_object_stream[bytes](16)
    start_reader(stdin, send)
    stop = anyio.Event()

    async def read() -> None:
        async with lines:
            async for line in lines:
                server.receive(line)
        stop.set()

    async def unread() -> None:
        # Nobody reads what the server says: it ends as if its input had ended.
        await out.failed.wait()
        stop.set()

    async def watch(signals: Any) -> None:
        async for signum in signals:
            if stop.is_set():
                _exit_now(int(signum))
            stop.set()

    with anyio.open_signal_receiver(*_SIGNALS) as signals:
        async with anyio.create_task_group() as outer:
            outer.start_soon(watch, signals)
            async with anyio.create_task_group() as threads:
                server = Server(config, out, threads)
                async with anyio.create_task_group() as reading:
                    reading.start_soon(read)
                    reading.start_soon(unread)
                    await stop.wait()
                    reading.cancel_scope.cancel()
                timer = _end_after(END_BOUND)
                server.close()
            outer.cancel_scope.cancel()
    out.close()
    with anyio.move_on_after(END_BOUND):
        await written.wait()
    timer.cancel()


def _end_after(seconds: float) -> threading.Timer:
    """End the process ``seconds`` from now, whatever its event loop does."""

    def end() -> None:
        try:
            sys.stderr.write(
                f"relay: warning: the sessions did not end within {seconds:g} s of the "
                "shutdown; exiting without waiting for them\n"
            )
            sys.stderr.flush()
        finally:
            os._exit(EXIT_FAILED)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


def _exit_now(signum: int) -> None:
    try:
        sys.stderr.write("relay: interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(128 + signum)


def app_server_command(args: argparse.Namespace, make_config: Callable[[Any], Config]) -> int:
    """``relay app-server``: ``make_config`` reads the configuration the options name."""
    from .._base._config import BUILTIN_PROVIDERS, take_api_key
    from .._base._errors import ConfigError, ScriptError
    from .._base._secret import hide_keys

    for each in _SIGNALS:
        signal.signal(each, lambda signum, _frame: _exit_now(signum))
    if args.listen != STDIO:
        print(f"relay: --listen {args.listen}: only {STDIO} is served", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = make_config(args)
        if config.model_provider == "scripted" and config.model_script:
            from .._models._script import load_model_script

            load_model_script(config.model_script)
        # The command owns its process: the key leaves its environment before any session
        # starts a process (later reads still find it).
        take_api_key(config.provider())
        take_api_key(config.compaction_provider())
        # So does the key of every provider a thread may choose: left there, it would reach
        # the commands of every thread on another provider, and /proc/PID/environ. Each is
        # checked when a thread's session reads it.
        providers = {**BUILTIN_PROVIDERS, **config.model_providers}.values()
        hide_keys(provider.env_key for provider in providers)
    except (ConfigError, ScriptError) as exc:
        for line in str(exc).splitlines():
            print(f"relay: {line}", file=sys.stderr)
        return EXIT_USAGE
    backend = "trio" if os.environ.get("RELAY_BACKEND", "") == "trio" else "asyncio"
    # The command owns its process: the SDK's HTTP stack imports h2 (HTTP/2, which relay never
    # asks for) and trio (to be able to run under it) whenever they are installed, as much as
    # a tenth of a second of a server's start (docs/benchmarks.md).
    sys.modules.setdefault("h2", None)  # type: ignore[arg-type]
    if backend == "asyncio":
        sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    anyio.run(serve, config, 0, 1, backend=backend)
    return EXIT_OK


__all__ = ["END_BOUND", "STDIO", "app_server_command", "serve"]
