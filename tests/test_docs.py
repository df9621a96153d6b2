"""The documents that are generated from code match the code."""

from __future__ import annotations

from pathlib import Path

from runtime._protocol_doc import render

ROOT = Path(__file__).resolve().parent.parent


def test_protocol_document_matches_the_protocol_classes() -> None:
    # Regenerate with: python -m runtime._protocol_doc > docs/protocol.md
    assert (ROOT / "docs" / "protocol.md").read_text() == render()
