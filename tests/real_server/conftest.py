"""A real model server for the ``real_server`` suite.

Two ways to get one (see ``docs/real-server.md``):

- llama.cpp's ``llama-server``, started here on a free loopback port: set ``RELAY_LLAMA_SERVER``
  (the binary) and ``RELAY_LLAMA_MODEL`` (a GGUF file); ``eval "$(scripts/real-server)"`` sets
  both. Every variant of the server the suite asks for (a window, an answer limit) is started
  once and stopped at the end of the run; its log is shown with the report of a failed test.
- any other OpenAI-compatible server: set ``RELAY_REAL_SERVER_URL`` (its ``.../v1`` base URL),
  ``RELAY_REAL_SERVER_MODEL``, ``RELAY_REAL_SERVER_CONTEXT_WINDOW`` and, if it wants a key,
  ``RELAY_REAL_SERVER_API_KEY``. Tests that need a llama-server flag are skipped.

With neither, every test of the suite is skipped, saying so, unless
``RELAY_REAL_SERVER_REQUIRED`` is set (CI sets it): then every test fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import relay

#: How long a llama-server may take to load its model and answer ``/health``.
READY_TIMEOUT_S = 120.0

#: The window of the managed llama-server: small enough that an overflow is cheap to provoke.
CONTEXT_WINDOW = 2048

#: The longest answer the managed server generates unless a test asks for fewer: it bounds a
#: rambling answer in time without cutting the short ones the tests ask for.
ANSWER_LIMIT = 200

#: The variable a provider table names for the API key of an external server.
API_KEY_VARIABLE = "RELAY_REAL_SERVER_API_KEY"

#: How much of llama-server's log a failed test's report shows, at most.
LOG_TAIL_CHARS = 6000

#: Bound on waiting for llama-server's log to hold the lines of the requests already answered.
LOG_SETTLE_S = 60.0
LOG_POLL_S = 0.05


@attrs.frozen
class RealServer:
    """A model server the suite talks to."""

    base_url: str
    """``http://host:port/v1``."""
    model: str
    """The model name requests carry."""
    context_window: int
    """The server's context window in tokens."""
    api_key: str | None = None
    """The bearer token, when the server wants one."""
    log: Path | None = None
    """llama-server's output, when the suite started it."""
    answer_limit: int | None = None
    """The server's own cap on generated tokens (``-n``), when the suite set it."""

    @property
    def managed(self) -> bool:
        """Whether this is a llama-server the suite started (its log can be read)."""
        return self.log is not None

    @property
    def root(self) -> str:
        """The server's address without ``/v1``."""
        return self.base_url.removesuffix("/v1")

    def provider(self, wire: str, **overrides: Any) -> relay.ProviderConfig:
        """A provider table for this server over ``wire`` (``chat`` or ``responses``)."""
        table: dict[str, Any] = {
            "name": "real",
            "base_url": self.base_url,
            "wire_api": wire,
            "env_key": API_KEY_VARIABLE if self.api_key else None,
            # A failure the suite does not expect should show at once, not after backoffs.
            "stream_max_retries": 1,
            "request_max_retries": 0,
            # One thread on a busy core reads a 2k-token prompt in 20 to 40 s, sending no event
            # meanwhile; the answer limit keeps the rest of every stream short.
            "stream_idle_timeout_ms": 120_000,
            **overrides,
        }
        return relay.ProviderConfig(**table)

    def config(
        self, wire: str, tmp_path: Path, *, provider: dict[str, Any] | None = None, **fields: Any
    ) -> relay.Config:
        """A session configuration for this server, its rollout under ``tmp_path``."""
        settings: dict[str, Any] = {
            "model": self.model,
            "model_provider": "real",
            "model_providers": {"real": self.provider(wire, **(provider or {}))},
            "model_context_window": self.context_window,
            "cwd": str(tmp_path),
            "rollout": relay.RolloutConfig(dir=str(tmp_path / "sessions")),
            **fields,
        }
        return relay.Config(**settings)

    def cli_overrides(self, wire: str) -> list[str]:
        """``-c`` options that point ``relay run`` at this server over ``wire``."""
        table = self.provider(wire)
        pairs: dict[str, Any] = {
            "model": self.model,
            "model_provider": "real",
            "model_context_window": self.context_window,
            "model_providers.real.base_url": table.base_url,
            "model_providers.real.wire_api": wire,
            "model_providers.real.stream_max_retries": table.stream_max_retries,
            "model_providers.real.request_max_retries": table.request_max_retries,
            "model_providers.real.stream_idle_timeout_ms": table.stream_idle_timeout_ms,
        }
        if table.env_key:
            pairs["model_providers.real.env_key"] = table.env_key
        options: list[str] = []
        for key, value in pairs.items():
            options += ["-c", f"{key}={json.dumps(value)}"]
        return options

    def log_text(self, start: int = 0) -> str:
        """llama-server's output from byte ``start`` on."""
        if self.log is None:
            return ""
        with self.log.open("rb") as file:
            file.seek(start)
            return file.read().decode(errors="replace")

    def log_size(self) -> int:
        """The length of llama-server's output so far."""
        return self.log.stat().st_size if self.log is not None else 0

    async def settled_log(self, start: int) -> str:
        """llama-server's output from byte ``start`` on, once every task in it was released.

        The server logs from a thread of its own, after it has answered: a client that has read
        the whole answer can still find the request's lines missing. A task's release is the
        last line it logs, so the log is complete when every task started since ``start`` has
        one. Bounded by :data:`LOG_SETTLE_S` (a request abandoned while the server reads its
        prompt is released only when the prompt is read); the text is returned either way.
        """
        text = self.log_text(start)
        # The file is another process's output: there is no event to wait for, so it is polled.
        for _ in range(int(LOG_SETTLE_S / LOG_POLL_S)):
            if text.count("processing task") <= text.count("stop processing"):
                break
            await trio.sleep(LOG_POLL_S)
            text = self.log_text(start)
        return text


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_ready(process: subprocess.Popen[bytes], root: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"llama-server exited with {process.returncode} before it was ready:\n"
                + log.read_text(errors="replace")[-LOG_TAIL_CHARS:]
            )
        try:
            with urllib.request.urlopen(root + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # still loading the model (503) or not listening yet
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"llama-server not ready after {READY_TIMEOUT_S:.0f} s:\n"
                + log.read_text(errors="replace")[-LOG_TAIL_CHARS:]
            )
        # An external process gives no event to wait for; /health is polled.
        time.sleep(0.2)


class _Servers:
    """The llama-server processes of this run, one per set of flags, started on demand."""

    def __init__(self, binary: str, model: str, logs: Path) -> None:
        self.binary = binary
        self.model = model
        self.logs = logs
        self.running: dict[tuple[int, int], tuple[subprocess.Popen[bytes], RealServer]] = {}

    def get(self, context_window: int, answer_limit: int) -> RealServer:
        key = (context_window, answer_limit)
        if key not in self.running:
            self.running[key] = self._start(context_window, answer_limit)
        return self.running[key][1]

    def _start(
        self, context_window: int, answer_limit: int
    ) -> tuple[subprocess.Popen[bytes], RealServer]:
        port = _free_port()
        log = self.logs / f"llama-server-c{context_window}-n{answer_limit}.log"
        argv = [
            self.binary,
            "--model", self.model,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--ctx-size", str(context_window),
            "--n-predict", str(answer_limit),
            # One thread each: two collapse when the machine is loaded.
            "--threads", "1",
            "--threads-batch", "1",
            # One slot: the whole window for one request, and requests in order.
            "--parallel", "1",
            # Greedy sampling: the same prompt gets the same answer, so the prompts below can be
            # chosen for answers that end on their own.
            "--temp", "0",
            "--seed", "1",
            "--no-webui",
            # No repacked weights: on a CPU that reports AMX to a kernel that does not grant the
            # tile state (some virtual machines), the AMX kernels crash at the first decode.
            "--no-repack",
        ]  # fmt: skip
        with log.open("wb") as output:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT
            )
        server = RealServer(
            base_url=f"http://127.0.0.1:{port}/v1",
            model="smollm2",
            context_window=context_window,
            log=log,
            answer_limit=answer_limit,
        )
        try:
            _wait_ready(process, server.root, log)
        except BaseException:
            _stop(process)
            raise
        return process, server

    def stop_all(self) -> None:
        for process, _ in self.running.values():
            _stop(process)
        self.running.clear()


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


NOT_CONFIGURED = (
    "no real model server configured: set RELAY_LLAMA_SERVER and RELAY_LLAMA_MODEL "
    '(eval "$(scripts/real-server)" builds and sets them) or RELAY_REAL_SERVER_URL '
    "(see docs/real-server.md)"
)


@pytest.fixture(scope="session")
def _llama_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Servers | None]:
    binary = os.environ.get("RELAY_LLAMA_SERVER")
    model = os.environ.get("RELAY_LLAMA_MODEL")
    if os.environ.get("RELAY_REAL_SERVER_URL") or not (binary and model):
        yield None
        return
    servers = _Servers(binary, model, tmp_path_factory.mktemp("llama-server"))
    try:
        yield servers
    finally:
        servers.stop_all()


def _external() -> RealServer | None:
    url = os.environ.get("RELAY_REAL_SERVER_URL")
    if not url:
        return None
    model = os.environ.get("RELAY_REAL_SERVER_MODEL")
    window = os.environ.get("RELAY_REAL_SERVER_CONTEXT_WINDOW")
    if not model or not window:
        pytest.fail(
            "RELAY_REAL_SERVER_URL is set: RELAY_REAL_SERVER_MODEL and "
            "RELAY_REAL_SERVER_CONTEXT_WINDOW must be set too"
        )
    return RealServer(
        base_url=url.rstrip("/"),
        model=model,
        context_window=int(window),
        api_key=os.environ.get(API_KEY_VARIABLE) or None,
    )


ServerFactory = Callable[..., RealServer]


@pytest.fixture
def real_server_factory(
    _llama_servers: _Servers | None, request: pytest.FixtureRequest
) -> ServerFactory:
    """A function that returns the server, started with the flags a test needs.

    ``answer_limit`` (llama-server's ``-n``) and ``context_window`` (``--ctx-size``) need the
    managed llama-server: on an external server the test is skipped.
    """

    def get(*, answer_limit: int | None = None, context_window: int | None = None) -> RealServer:
        external = _external()
        if external is not None:
            if answer_limit is not None or context_window is not None:
                pytest.skip("needs llama-server's flags; the configured server is external")
            return external
        if _llama_servers is None:
            if os.environ.get("RELAY_REAL_SERVER_REQUIRED"):
                pytest.fail(NOT_CONFIGURED)
            pytest.skip(NOT_CONFIGURED)
        server = _llama_servers.get(context_window or CONTEXT_WINDOW, answer_limit or ANSWER_LIMIT)
        request.node.stash[_SERVERS_USED] = [
            *request.node.stash.get(_SERVERS_USED, []),
            (server, server.log_size()),
        ]
        return server

    return get


@pytest.fixture
def real_server(real_server_factory: ServerFactory) -> RealServer:
    """The configured real server."""
    return real_server_factory()


@pytest.fixture
def managed_server(real_server: RealServer) -> RealServer:
    """The real server, which must be a llama-server the suite started (its log is read)."""
    if not real_server.managed:
        pytest.skip("reads llama-server's log; the configured server is external")
    return real_server


_SERVERS_USED = pytest.StashKey[list[tuple[RealServer, int]]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        for server, start in item.stash.get(_SERVERS_USED, []):
            text = server.log_text(start)
            if text:
                report.sections.append((f"llama-server log ({server.log})", text[-LOG_TAIL_CHARS:]))
    return report
