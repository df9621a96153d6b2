"""Headless Chromium for the tests of the pages relay writes (``relay show --html``,
``relay eval --html``): found or skipped, run with no network, and its screenshots read.

Chromium comes from Debian's packages (``apt-get install chromium``; ``.ci/run`` installs it).
Without it the browser tests are skipped, unless ``RELAY_BROWSER_REQUIRED`` is set (as in CI):
then they fail.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.cli.timelines import read_page


def find_chromium() -> str:
    """The browser, or a skip (a failure when ``RELAY_BROWSER_REQUIRED`` is set)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = (
            "headless Chromium is not installed (apt-get install chromium); set "
            "RELAY_BROWSER_REQUIRED=1 to make its absence a failure"
        )
        if os.environ.get("RELAY_BROWSER_REQUIRED"):
            pytest.fail(f"RELAY_BROWSER_REQUIRED is set but {reason.split(';')[0]}")
        pytest.skip(reason)
    return found


def browse(chromium: str, path: Path, *args: str, fragment: str = "") -> str:
    """Run headless Chromium on ``path`` with every host name unresolvable (no network)."""
    result = subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={path.parent / 'chromium-profile'}",
            *args,
            path.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def loaded(chromium: str, path: Path) -> dict[str, str | None]:
    """The attributes of ``<html>`` once the page's scripts ran (``--dump-dom``)."""
    return read_page(browse(chromium, path, "--dump-dom")).html_attrs()


def evaluate(chromium: str, path: Path, expression: str, *, timeout: float = 120) -> Any:
    """The value of the JavaScript ``expression`` evaluated in ``path`` once it has loaded,
    in headless Chromium with no network, driven over the DevTools protocol on a pipe (no
    port is opened). The expression may interact with the page (press a button) before it
    reads it; a promise is awaited."""
    # Chromium reads commands on descriptor 3 and writes answers on descriptor 4; the pipes'
    # own descriptors are moved above them first, so that placing one closes no other.
    reads, writes = _high_pipe(), _high_pipe()
    process = subprocess.Popen(
        [
            "bash",
            "-c",
            f'exec "$0" "$@" 3<&{reads[0]} 4>&{writes[1]} {reads[0]}<&- {writes[1]}>&-',
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-pipe",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={path.parent / 'chromium-profile'}",
            "about:blank",
        ],
        pass_fds=(reads[0], writes[1]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    os.close(reads[0])
    os.close(writes[1])
    deadline = time.monotonic() + timeout
    pending = b""
    events: list[dict[str, Any]] = []
    numbers = iter(range(1, 1_000_000))

    def receive(what: str) -> dict[str, Any]:
        nonlocal pending
        while b"\0" not in pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([writes[0]], [], [], max(0.0, left))
            assert ready, f"Chromium did not send {what} in time"
            chunk = os.read(writes[0], 65536)
            assert chunk, f"Chromium ended before it sent {what}"
            pending += chunk
        raw, _, pending = pending.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(method: str, session: str | None = None, **params: Any) -> Any:
        number = next(numbers)
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(reads[1], json.dumps(message).encode() + b"\0")
        while True:
            answer = receive(f"the answer to {method}")
            if answer.get("id") == number:
                assert "error" not in answer, answer["error"]
                return answer["result"]
            if "method" in answer:
                events.append(answer)

    def wait_for(method: str) -> None:
        while not any(event["method"] == method for event in events):
            message = receive(method)
            if "method" in message:
                events.append(message)

    try:
        targets = call("Target.getTargets")["targetInfos"]
        [page] = [t for t in targets if t["type"] == "page"]
        session = call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        sid = session["sessionId"]
        call("Page.enable", sid)
        call("Page.navigate", sid, url=path.as_uri())
        # The blank page it started on may report its own load: wait for the file's.
        loaded = f"{path.as_uri()} complete"
        while True:
            wait_for("Page.loadEventFired")
            events.clear()
            state = call(
                "Runtime.evaluate",
                sid,
                expression="location.href + ' ' + document.readyState",
                returnByValue=True,
            )
            if state["result"].get("value") == loaded:
                break
        result = call(
            "Runtime.evaluate",
            sid,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        try:
            call("Browser.close")
        except AssertionError:
            pass  # it closed before it answered
        return result["result"].get("value")
    finally:
        os.close(reads[1])
        os.close(writes[0])
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _high_pipe() -> tuple[int, int]:
    """A pipe whose two descriptors are numbered 10 or more."""
    pipe = os.pipe()
    high = (fcntl.fcntl(pipe[0], fcntl.F_DUPFD, 10), fcntl.fcntl(pipe[1], fcntl.F_DUPFD, 10))
    os.close(pipe[0])
    os.close(pipe[1])
    return high


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Width, height and pixels of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks, header = 8, [], b""
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    size = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * size
    previous = bytearray(stride)
    pixels: list[tuple[int, ...]] = []
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - size] if i >= size else 0
            up = previous[i]
            corner = previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                near = min(
                    (abs(guess - left), 0, left),
                    (abs(guess - up), 1, up),
                    (abs(guess - corner), 2, corner),
                )
                line[i] = (line[i] + near[2]) & 0xFF
        pixels += [tuple(line[i : i + 3]) for i in range(0, stride, size)]
        previous = line
    return width, height, pixels
