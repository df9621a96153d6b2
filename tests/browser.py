"""Headless Chromium for the tests of the pages relay writes (``relay show --html``,
``relay eval --html``): found or skipped, run with no network, and its screenshots read.

Chromium comes from Debian's packages (``apt-get install chromium``; ``.ci/run`` installs it).
Without it the browser tests are skipped, unless ``RELAY_BROWSER_REQUIRED`` is set (as in CI):
then they fail.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.shells.timelines import read_page


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
