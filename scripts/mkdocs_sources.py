"""A mkdocs hook: the API reference reads the package as a wheel lays it out, and no page
shows a Sphinx role as text.

The package has two source roots (``runtime/relay`` and ``tasks/relay/tasks``), which an
installed wheel merges into one ``relay/`` folder. The reference's reader (griffe, through
mkdocstrings) reads sources, not the installed package, and would see the first root only; this
hook copies both into ``build/api-src/relay`` before any page is read.

Docstrings name objects with Sphinx roles (``:class:`Session```), which
``scripts/griffe_relay.py`` turns into cross-references. A role that reaches a built page as
text (one the extension does not know, or a page it does not read) is a warning here, so that
``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "build" / "api-src"

#: A Sphinx role as a page shows it: ``:class:`` before the name, in code or in backquotes.
RAW_ROLE = re.compile(r":(?:py:)?[a-z]+:(?:<code>[^<]*</code>|`[^`]*`)")

logger = logging.getLogger("mkdocs.hooks.mkdocs_sources")


def raw_roles(html: str) -> list[str]:
    """The Sphinx roles shown as text in a built page, each as it appears."""
    return RAW_ROLE.findall(html)


def on_startup(command: str, dirty: bool) -> None:
    """Before the configuration is read (mkdocstrings looks for its paths then)."""
    del command, dirty
    shutil.rmtree(TARGET, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "runtime" / "relay", TARGET / "relay", ignore=ignore)
    shutil.copytree(ROOT / "tasks" / "relay" / "tasks", TARGET / "relay" / "tasks", ignore=ignore)


def on_post_page(output: str, page: Any, config: Any) -> str:
    """After each page is built: a role shown as text is a warning (an error with --strict)."""
    del config
    for role in raw_roles(output):
        logger.warning("%s shows a Sphinx role as text: %s", page.file.src_uri, role)
    return output
