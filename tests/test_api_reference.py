"""The API reference (``mkdocs build``): cross-references instead of Sphinx roles, attrs classes
with their constructor, members in declaration order."""

from __future__ import annotations

import html
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_roles_become_cross_references_and_unknown_names_are_reported() -> None:
    convert_roles = script("griffe_relay").convert_roles
    known = {"Session": "relay.Session", "relay.Session.ask": "relay.Session.ask"}
    text, unresolved = convert_roles(
        "Use :class:`Session`, :meth:`~relay.Session.ask`, :meth:`ask <relay.Session.ask>` "
        "and :func:`nowhere`.",
        known.get,
    )
    link = '<autoref identifier="{}" optional><code>{}</code></autoref>'
    assert text == (
        f"Use {link.format('relay.Session', 'Session')}, "
        f"{link.format('relay.Session.ask', 'ask')}, "
        f"{link.format('relay.Session.ask', 'ask')} and `nowhere`."
    )
    assert unresolved == ["nowhere"]


def test_a_role_shown_as_text_is_found_in_a_page() -> None:
    raw_roles = script("mkdocs_sources").raw_roles
    page = "<p>See :class:<code>Session</code> and <code>:class:</code> here, :meth:`x`.</p>"
    assert raw_roles(page) == [":class:<code>Session</code>", ":meth:`x`"]


def text_of(page: str, anchor: str, length: int = 3000) -> str:
    start = page.index(">", page.index(f'id="{anchor}"')) + 1
    chunk = re.sub(r"<[^>]+>", "", page[start : start + length])
    return html.unescape(" ".join(chunk.split()))


@pytest.mark.slow  # builds the whole site
def test_the_built_reference_links_names_and_shows_constructors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    pages = {path.parent.name: path.read_text() for path in (site / "api").glob("*/index.html")}
    assert set(pages) == {"relay", "protocol", "lowlevel", "testing", "tasks", "cluster"}
    for name, page in pages.items():
        assert not re.findall(r":[a-z]+:<code>", page), name
    relay_page = pages["relay"]
    protocol_page = pages["protocol"]
    # A role became a link to the object it names, on its own page or on another.
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="#relay.protocol.UserTurn"',
        protocol_page,
    )
    assert re.search(r'<a class="autorefs[^"]*"[^>]*href="\.\./relay/#relay"', protocol_page)
    assert re.search(
        r'<a class="autorefs[^"]*"[^>]*href="\.\./protocol/#relay\.protocol"', relay_page
    )
    # The protocol is shown on its page, and only there.
    assert 'id="relay.UserTurn"' not in relay_page
    user_turn = text_of(protocol_page, "relay.protocol.UserTurn")
    assert user_turn.startswith(
        "UserTurn ¶ UserTurn( items: tuple[InputItem, ...], model: str | None = None, "
        "cwd: str | None = None, effort: str | None = None, on_busy: OnBusy = OnBusy.STEER, "
        "pin: bool = False, final_output_json_schema: Mapping[str, Any] | None = None, )"
    )
    fields = re.findall(r'id="relay\.protocol\.UserTurn\.(\w+)"', protocol_page)
    assert fields == [
        "items",
        "model",
        "cwd",
        "effort",
        "on_busy",
        "pin",
        "final_output_json_schema",
    ]
    assert "a sequence of its items" in text_of(relay_page, "relay.Session.history")
    testing_page = pages["testing"]
    assert re.findall(r'id="relay\.testing\.TestSession\.(\w+)"', testing_page)[:3] == [
        "session",
        "model",
        "recorder",
    ]
    assert "t.model.requests holds" in text_of(testing_page, "relay.testing.TestSession.model")
