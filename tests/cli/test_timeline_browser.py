"""The timeline page as a person sees it: loaded by headless Chromium with no network.

Chromium comes from Debian's packages (``apt-get install chromium``; ``.ci/run`` installs it).
Without it these tests are skipped, unless ``RELAY_BROWSER_REQUIRED`` is set (as in CI): then
they fail.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from relay._cli._timeline import read_timeline
from relay._cli._timeline_condense import condense
from relay._cli._timeline_page import CONTEXT_COLOR, render_page
from relay._html import page
from relay._rollout._reader import parse_rollout, read_rollout
from tests.browser import browse, evaluate, find_chromium, loaded, png_pixels
from tests.cli.timelines import edits_rollout, eventful_rollout, long_rollout, read_page

pytestmark = pytest.mark.slow  # each test starts a browser: a second or two


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


@pytest.fixture(scope="module")
def eventful_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    rollout = eventful_rollout(root)
    path = root / "session.html"
    path.write_text(render_page(condense(read_timeline(read_rollout(rollout)))))
    return path


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


# --------------------------------------------------------------------------- patches

#: Opens every patch's diff, then reads what the browser shows of the first one.
READ_DIFFS = """(() => {
  document.querySelectorAll("details.patch").forEach((d) => { d.open = true; });
  const first = document.querySelector("pre.diff");
  const look = (cls) => {
    const line = first.querySelector("span." + cls);
    const style = getComputedStyle(line);
    return {text: line.textContent, background: style.backgroundColor, color: style.color,
            height: line.getBoundingClientRect().height};
  };
  return {
    errors: document.documentElement.getAttribute("data-errors"),
    scripts: document.scripts.length,
    images: document.images.length,
    add: look("add"),
    del: look("del"),
    ctx: look("ctx"),
  };
})()"""


def test_a_patch_s_diff_shows_added_and_removed_lines_apart(chromium: str, tmp_path: Path) -> None:
    hostile = "<img src=x onerror=alert(1)></pre><script>document.title='x'</script>"
    diff = f"@@ -1,2 +1,2 @@\n keep\n-{hostile}\n+new line\n"
    path = tmp_path / "edits.html"
    path.write_text(
        render_page(condense(read_timeline(parse_rollout(edits_rollout(app_diff=diff)))))
    )
    shown = evaluate(chromium, path, READ_DIFFS)
    assert shown["errors"] is None
    # The diff's markup is text: no element of it was made.
    assert (shown["scripts"], shown["images"]) == (3, 0)
    assert shown["del"]["text"] == "-" + hostile and shown["add"]["text"] == "+new line"
    # Added, removed and context lines look different, and each is laid out as a line.
    looks = {(shown[k]["background"], shown[k]["color"]) for k in ("add", "del", "ctx")}
    assert len(looks) == 3
    assert all(shown[k]["height"] > 0 for k in ("add", "del", "ctx"))
