"""The documents that are generated from code match the code."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from runtime._config import Config, load_config
from runtime._config_doc import EXAMPLES, documented_keys
from runtime._config_doc import render as render_config
from runtime._protocol_doc import render

ROOT = Path(__file__).resolve().parent.parent


def test_protocol_document_matches_the_protocol_classes() -> None:
    # Regenerate with: python -m runtime._protocol_doc > docs/protocol.md
    assert (ROOT / "docs" / "protocol.md").read_text() == render()


def test_configuration_document_matches_the_config_classes() -> None:
    # Regenerate with: python -m runtime._config_doc > docs/config.md
    assert (ROOT / "docs" / "config.md").read_text() == render_config()


def _value_at(config: Config, path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        if part == "*":
            node = node["local"]
        elif part.endswith("[]"):
            node = node.pre_compact[0]
        else:
            node = node[part] if isinstance(node, Mapping) else getattr(node, part)
    return node


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        # A table: the keys an example leaves out keep their defaults.
        return _plain(attrs.asdict(value, recurse=False))
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("path", documented_keys())
def test_every_configuration_example_loads_into_the_value_it_shows(
    tmp_path: Path, path: str
) -> None:
    example = EXAMPLES[path]
    file = tmp_path / "config.toml"
    file.write_text(example, encoding="utf-8")
    config = load_config(file)
    expected: Any = tomllib.loads(example)
    for part in path.split("."):
        if part == "*":
            expected = expected["local"]
        elif part.endswith("[]"):
            expected = expected["pre_compact"][0]
        else:
            expected = expected[part]
    found = _plain(_value_at(config, path))
    if isinstance(expected, list) and expected and isinstance(expected[0], dict):
        found = [
            {key: entry[key] for key in wanted}
            for entry, wanted in zip(found, expected, strict=True)
        ]
    assert found == _plain(expected)
