"""The documents that are generated from code match the code, and their examples run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from relay import testing
from relay._base import _protocol as p
from relay._base._agents_config import AgentsConfig
from relay._base._codec import type_tag
from relay._base._config import Config, load_config
from relay._cli._config_doc import EXAMPLES, documented_keys
from relay._cli._config_doc import render as render_config
from relay._cli._protocol_doc import render
from relay._models._script import parse_model_script

ROOT = Path(__file__).resolve().parent.parent


def test_protocol_document_matches_the_protocol_classes() -> None:
    # Regenerate with: python -m relay._cli._protocol_doc > docs/protocol.md
    assert (ROOT / "docs" / "protocol.md").read_text() == render()


def test_configuration_document_matches_the_config_classes() -> None:
    # Regenerate with: python -m relay._cli._config_doc > docs/config.md
    assert (ROOT / "docs" / "config.md").read_text() == render_config()


def test_the_built_in_tools_arguments_in_the_tools_document_are_their_schemas() -> None:
    # Regenerate with: python -m relay._cli._tools_doc --write docs/tools.md
    from relay._cli._tools_doc import BEGIN, END, render

    document = (ROOT / "docs" / "tools.md").read_text()
    assert document.count(BEGIN) == document.count(END) == 1
    assert document.split(BEGIN)[1].split(END)[0] == render()
    for tool in ("read_file", "list_dir", "sleep", "shell", "recall", "new_context_window"):
        assert f"#### `{tool}`" in render()


def test_the_read_only_list_of_the_approvals_page_is_the_codes() -> None:
    # Regenerate with: python -c 'from relay._exec._readonly import document; print(document())'
    from relay._exec import _readonly

    page = (ROOT / "docs" / "approvals.md").read_text()
    begin = (
        "<!-- the read-only list: tests/test_docs.py checks it against relay._exec._readonly -->\n"
    )
    assert page.count(begin) == 1
    listed = page.split(begin)[1].split("<!-- end of the read-only list -->")[0]
    assert listed == _readonly.document()
    assert "git" not in _readonly.READ_ONLY_PROGRAMS


def _value_at(config: Config, path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        if part == "*":
            tables = node.roles if isinstance(node, AgentsConfig) else node
            node = next(iter(tables.values()))  # the example's one table
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
            expected = next(iter(expected.values()))
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


def _json_examples(document: str) -> dict[str, list[Any]]:
    """The JSON code blocks of a document, by the heading they stand under."""
    examples: dict[str, list[Any]] = {}
    for match in re.finditer(r"^```json\n(.*?)^```", document, flags=re.MULTILINE | re.DOTALL):
        before = document[: match.start()]
        titles = re.findall(r"^## (.+)$", before, flags=re.MULTILINE)
        heading = titles[-1] if titles else ""
        examples.setdefault(heading, []).append(json.loads(match[1]))
    return examples


def test_every_model_script_example_loads_as_its_form() -> None:
    examples = _json_examples((ROOT / "docs" / "model-script.md").read_text())
    scripts = {
        title: [parse_model_script(data) for data in found] for title, found in examples.items()
    }
    (first,) = scripts["A reply in words"]
    assert [r.output for r in first.responses] == [
        (p.assistant_message("Hello! How can I help?"),),
        (p.assistant_message("Anything else?"),),
    ]
    (calls,) = scripts["A tool call"]
    assert calls.responses[0].output == (
        p.FunctionCall(name="list_dir", arguments='{"path": "."}', call_id="call-ls"),
    )
    (items,) = scripts["Any output items"]
    assert [type(item) for item in items.responses[0].output] == [
        p.Reasoning,
        p.FunctionCall,
        p.FunctionCall,
    ]
    assert scripts["A delay"][0].responses[0].delay_ms == 1500
    assert scripts["A stall"][0].responses[0].stall_ms == 200
    errors = scripts["An HTTP error"][0].responses
    assert [e.http_error.status for e in errors if e.http_error] == [429, 400]
    failing = scripts["A stream that fails"][0].responses
    assert failing[0].stream_error == {"code": "server_error", "message": "overloaded"}
    assert failing[1].cut_after_events == 2
    usage = scripts["Usage"][0].responses
    assert usage[0].usage == p.TokenUsage(9000, 8000, 300, 120, 9300)
    assert usage[1].usage == p.TokenUsage(total_tokens=120)
    assert scripts["A remote V2 compaction"][0].responses[0].output == (
        p.Compaction(encrypted_content="c2VhbGVkIHN1bW1hcnk="),
    )
    compact = scripts["Remote V1 compaction replies"][0].compact
    assert [bool(c.http_error) for c in compact] == [False, False, True]
    assert compact[0].delay_ms == 100


def _python_blocks(document: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", document, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.slow  # a pytest run of its own
def test_the_test_module_of_writing_a_task_passes(tmp_path: Path) -> None:
    blocks = _python_blocks((ROOT / "docs" / "tasks.md").read_text(encoding="utf-8"))
    module = tmp_path / "test_tasks_doc.py"
    module.write_text(blocks[-1], encoding="utf-8")
    plugins = ["-p", "no:cacheprovider", "-p", "trio", "-p", "no:xdist"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, str(module)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_the_first_task_of_writing_a_task_does_what_the_page_says() -> None:
    blocks = _python_blocks((ROOT / "docs" / "tasks.md").read_text(encoding="utf-8"))
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "docs/tasks.md", "exec"), namespace)

    async def main() -> list[p.EventMsg]:
        async with testing.open_test_session(
            {"responses": []}, tasks={"shout": namespace["shout"]}
        ) as t:
            await t.submit(p.CustomOp("shout", {"text": "hi"}), id="s1")
            await t.wait_for(p.TurnComplete)
        return [e.msg for e in t.recorder.events if e.id == "s1"]

    msgs = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [type_tag(type(m)) for m in msgs] == [
        "turn_started",
        "item_started",
        "item_completed",
        "agent_message",
        "turn_complete",
    ]
    assert msgs[-1] == p.TurnComplete("s1", "HI", 0)
