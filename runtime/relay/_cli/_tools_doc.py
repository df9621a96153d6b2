"""Renders the arguments of the built-in tools in ``docs/tools.md`` from the tools' own schemas.

``python -m relay._cli._tools_doc --write docs/tools.md`` replaces what lies between
:data:`BEGIN` and :data:`END` in the file; without ``--write`` it prints the section. A test
checks that the file holds what this renders, so the document cannot drift from the schemas
the model is sent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .._codex._defaults import CODEX_TOOLS
from .._core._agent_tools import AGENT_TOOLS
from .._core._builtin import BUILTIN_TOOLS
from .._core._tools import CONTEXT_TOOLS, Tool, recall_tool

BEGIN = "<!-- the built-in tools' arguments: python -m relay._cli._tools_doc -->\n"
END = "<!-- end of the built-in tools' arguments -->\n"

_TYPES = {"string": "string", "number": "number", "integer": "integer", "boolean": "boolean"}


def _tools() -> Iterator[tuple[Tool, str]]:
    for tool, default in BUILTIN_TOOLS.values():
        when = "On by default" if default else f"On with `tools.{tool.name} = true`"
        if tool.name in AGENT_TOOLS:
            when = "On with `features.multi_agent` (off with `tools.{tool.name} = false`)"
            when = when.replace("{tool.name}", tool.name)
        elif tool.name in CODEX_TOOLS:
            when += " (on by default in `relay exec` and `relay app-server`)"
        yield tool, when
    yield recall_tool({}), "On with `features.tool_output_masking`"
    for tool in CONTEXT_TOOLS:
        yield tool, "On with `features.token_budget`"


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items", {})
        return f"array of {_type(items)}s"
    text = _TYPES.get(str(kind), str(kind))
    if "minimum" in schema:
        text += f" ≥ {schema['minimum']}"
    return text


def _argument(name: str, schema: Mapping[str, Any], required: bool) -> str:
    if required:
        need = "required"
    elif "default" in schema:
        need = f"default `{json.dumps(schema['default'])}`"
    else:
        need = "optional"
    return f"| `{name}` | {_type(schema)} | {need} | {schema.get('description', '')} |"


def render() -> str:
    """The section: for each built-in tool, when it is on and its arguments."""
    lines: list[str] = []
    for tool, when in _tools():
        head, _, rest = tool.description.partition("\n")
        lines += ["", f"#### `{tool.name}`", "", f"{when}. {head}", ""]
        if rest:
            # The rest of a long description (a format, an example) as the model reads it.
            lines += ["```text", rest, "```", ""]
        properties: Mapping[str, Any] = tool.parameters.get("properties", {})
        required = set(tool.parameters.get("required", ()))
        if not properties:
            lines.append("No arguments: `{}`.")
            continue
        lines += ["| argument | type | | |", "|---|---|---|---|"]
        lines += [_argument(name, schema, name in required) for name, schema in properties.items()]
    return "\n".join(lines).lstrip("\n") + "\n"


def update(document: str) -> str:
    """``document`` with the section between :data:`BEGIN` and :data:`END` rendered anew."""
    head, _, rest = document.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}{render()}{END}{tail}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        path = Path(sys.argv[2])
        path.write_text(update(path.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(render())
