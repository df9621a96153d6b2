"""A JSON-RPC client of ``relay app-server`` for the tests: it runs the real command as a
subprocess over pipes, and checks every line the server writes against Codex 0.169's schema
(:mod:`.schema`) as it reads it."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.pipes import LineReader

from .schema import check_message

TIMEOUT = 30
CLIENT_INFO = {"name": "relay-tests", "title": None, "version": "1.0"}


class RpcFailed(AssertionError):
    """The server answered a request with an error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error['code']}: {error['message']}")
        self.code = error["code"]
        self.message = error["message"]


class AppServer:
    """A running ``relay app-server``, its messages read in order and checked."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "relay", "app-server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            text=True,
            encoding="utf-8",
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self._lines = LineReader(self.process.stdout, timeout=TIMEOUT)
        self._stderr = LineReader(self.process.stderr, timeout=TIMEOUT)
        self.methods: dict[Any, str] = {}
        """The method of each request sent, by id."""
        self.seen: list[dict[str, Any]] = []
        """Every message read, in order."""
        self._inbox: list[dict[str, Any]] = []
        self._next_id = 0

    # ------------------------------------------------------------------ writing

    def send_raw(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text)
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps(message) + "\n")

    def request(self, method: str, params: Any = None) -> int:
        """Send a request; its id."""
        self._next_id += 1
        self.methods[self._next_id] = method
        message: dict[str, Any] = {"id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self._next_id

    def call(self, method: str, params: Any = None) -> Any:
        """Send a request and wait for its answer: the result.

        Raises:
            RpcFailed: the answer is an error.
        """
        return self.result(self.request(method, params))

    def initialize(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.call("initialize", {"clientInfo": CLIENT_INFO})
        self.send({"method": "initialized"})
        return answer

    def start_thread(self, **params: Any) -> str:
        """A new thread's id (``thread/start``, its ``thread/started`` read)."""
        thread_id: str = self.call("thread/start", params)["thread"]["id"]
        self.next("thread/started")
        return thread_id

    # ------------------------------------------------------------------ reading

    def _read(self) -> dict[str, Any]:
        line = self._lines.readline()
        assert line, f"the server ended its output; stderr: {self.stderr_text()}"
        message: dict[str, Any] = json.loads(line)
        check_message(message, self.methods)
        self.seen.append(message)
        return message

    def wait(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message not yet taken that ``matches``, read as far as needed; the
        messages passed over stay for later waits."""
        for index, message in enumerate(self._inbox):
            if matches(message):
                return self._inbox.pop(index)
        while True:
            message = self._read()
            if matches(message):
                return message
            self._inbox.append(message)

    def answer(self, request_id: Any) -> dict[str, Any]:
        """The answer to request ``request_id``."""
        return self.wait(lambda m: "method" not in m and m.get("id") == request_id)

    def result(self, request_id: Any) -> Any:
        message = self.answer(request_id)
        if "error" in message:
            raise RpcFailed(message["error"])
        return message["result"]

    def error(self, request_id: Any) -> dict[str, Any]:
        """The error that answers request ``request_id``."""
        message = self.answer(request_id)
        assert "error" in message, message
        error: dict[str, Any] = message["error"]
        return error

    def next(self, method: str, **params: Any) -> dict[str, Any]:
        """The params of the next notification or request ``method`` whose params have the
        values ``params`` gives."""
        message = self.wait(
            lambda m: (
                m.get("method") == method
                and all(m["params"].get(key) == value for key, value in params.items())
            )
        )
        found: dict[str, Any] = message["params"]
        return found

    def until(self, method: str, **params: Any) -> list[dict[str, Any]]:
        """Every message not yet taken up to and including the next ``method`` with
        ``params``; taken."""
        taken: list[dict[str, Any]] = []

        def last(message: dict[str, Any]) -> bool:
            taken.append(message)
            return message.get("method") == method and all(
                message["params"].get(key) == value for key, value in params.items()
            )

        self.wait(last)
        for message in taken:
            if message in self._inbox:
                self._inbox.remove(message)
        return taken

    # ------------------------------------------------------------------ the end

    def close_input(self) -> int:
        """Close standard input and wait for the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.wait_exit()

    def signal(self, signum: signal.Signals) -> int:
        self.process.send_signal(signum)
        return self.wait_exit()

    def wait_exit(self) -> int:
        status = self.process.wait(timeout=TIMEOUT)
        while True:  # what is left on stdout, checked as the rest
            line = self._lines.readline()
            if not line:
                break
            message = json.loads(line)
            check_message(message, self.methods)
            self.seen.append(message)
            self._inbox.append(message)
        return status

    def stderr_text(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        return "".join(self._stderr)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=TIMEOUT)


@contextmanager
def app_server(*args: str, cwd: Path) -> Iterator[AppServer]:
    """A running server, killed at the end if it is still running."""
    server = AppServer(*args, cwd=cwd)
    try:
        yield server
    finally:
        server.kill()


def write_script(path: Path, *responses: Any, **extra: Any) -> Path:
    """A model script of ``responses``."""
    path.write_text(json.dumps({"responses": list(responses), **extra}), encoding="utf-8")
    return path


def read_pid(fifo: Path) -> int:
    """The pid a command writes into the named pipe ``fifo`` (made here beforehand with
    :func:`os.mkfifo`), waited for with a bound."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        data = b""
        while not data.endswith(b"\n"):
            readable, _, _ = select.select([fd], [], [], TIMEOUT)
            assert readable, f"no pid written to {fifo} within {TIMEOUT} s"
            data += os.read(fd, 64)
        return int(data)
    finally:
        os.close(fd)


@contextmanager
def mock_server(script: Path) -> Iterator[list[str]]:
    """A ``relay mock-server`` process serving ``script``: the ``relay app-server`` options
    that make it the model of every thread (its replies go out in order, whichever thread asks)."""
    server = subprocess.Popen(
        [sys.executable, "-m", "relay", "mock-server", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = LineReader(server.stdout, timeout=TIMEOUT).readline().strip()
        yield [
            "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={json.dumps(base_url)}",
        ]  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=TIMEOUT)
