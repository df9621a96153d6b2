"""A mkdocs hook: the API reference reads the package as a wheel lays it out.

The package has two source roots (``runtime/relay`` and ``tasks/relay/tasks``), which an
installed wheel merges into one ``relay/`` folder. The reference's reader (griffe, through
mkdocstrings) reads sources, not the installed package, and would see the first root only; this
hook copies both into ``build/api-src/relay`` before any page is read.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "build" / "api-src"


def on_startup(command: str, dirty: bool) -> None:
    """Before the configuration is read (mkdocstrings looks for its paths then)."""
    del command, dirty
    shutil.rmtree(TARGET, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "runtime" / "relay", TARGET / "relay", ignore=ignore)
    shutil.copytree(ROOT / "tasks" / "relay" / "tasks", TARGET / "relay" / "tasks", ignore=ignore)
