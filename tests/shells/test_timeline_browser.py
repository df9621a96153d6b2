"""The timeline page as a person sees it: loaded by headless Chromium with no network.

Chromium comes from Debian's packages (``apt-get install chromium``; ``.ci/run`` installs it).
Without it these tests are skipped, unless ``RELAY_BROWSER_REQUIRED`` is set (as in CI): then
they fail.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from relay._cli._html import page
from relay._cli._timeline import condense, read_timeline
from relay._cli._timeline_page import CONTEXT_COLOR, render_page
from relay._rollout._reader import parse_rollout, read_rollout
from tests.shells.timelines import eventful_rollout, long_rollout, read_page

pytestmark = pytest.mark.slow  # each test starts a browser: a second or two


@pytest.fixture(scope="module")
def chromium() -> str:
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


@pytest.fixture(scope="module")
def eventful_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    rollout = eventful_rollout(root)
    path = root / "session.html"
    path.write_text(render_page(condense(read_timeline(read_rollout(rollout)))))
    return path


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


def test_the_chart_is_drawn_with_no_error(chromium: str, eventful_page: Path) -> None:
    shown = loaded(chromium, eventful_page)
    assert shown.get("data-errors") is None
    data = read_page(eventful_page.read_text()).data()
    # The browser laid out the context line with one point per model call of the data.
    assert shown.get("data-drawn") == str(len(data["model_calls"])) != "0"


def test_following_a_compaction_mark_opens_its_summary(chromium: str, eventful_page: Path) -> None:
    closed = browse(chromium, eventful_page, "--dump-dom")
    assert "<details open" not in closed
    dom = browse(chromium, eventful_page, "--dump-dom", fragment="#compaction-2")
    row = dom[dom.index('<tr id="compaction-2">') :]
    row = row[: row.index("</tr>")]
    assert "<details open" in row and "Summary: the log and the notes were read." in row


def test_a_long_session_is_drawn_with_no_error(chromium: str, tmp_path: Path) -> None:
    path = tmp_path / "long.html"
    path.write_text(render_page(condense(read_timeline(parse_rollout(long_rollout(10_000))))))
    shown = loaded(chromium, path)
    assert shown.get("data-errors") is None
    data = read_page(path.read_text()).data()
    assert shown.get("data-drawn") == str(len(data["model_calls"]))
    assert int(str(shown.get("data-drawn"))) > 1000


def test_an_error_in_a_page_is_seen(chromium: str, tmp_path: Path) -> None:
    """The check above can fail: a page whose script throws says so in ``data-errors``."""
    path = tmp_path / "broken.html"
    script = 'console.error("drawn badly"); undefined_function();'
    path.write_text(page("broken", "<p>nothing</p>", script=script))
    errors = str(loaded(chromium, path).get("data-errors"))
    assert "drawn badly" in errors and "undefined_function" in errors


# --------------------------------------------------------------------------- the screenshot


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


def test_the_screenshot_shows_the_chart(chromium: str, eventful_page: Path) -> None:
    shot = eventful_page.parent / "shot.png"
    browse(chromium, eventful_page, f"--screenshot={shot}", "--window-size=1280,900")
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 900)
    colours = set(pixels)
    assert len(colours) > 50, "a blank (or nearly blank) screenshot"
    # The line of the context in use is on screen, in its colour.
    line = tuple(int(CONTEXT_COLOR[i : i + 2], 16) for i in (1, 3, 5))
    close = sum(1 for p in pixels if sum(abs(a - b) for a, b in zip(p, line, strict=True)) < 60)
    assert close > 200
    # And most of the page is not that one colour: there is text and ruling too.
    [(_, most)] = Counter(pixels).most_common(1)
    assert most < 0.97 * len(pixels)
