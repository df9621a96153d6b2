"""What an MCP tool's result reads as to the model (docs/tools.md).

A tool's output in relay is text. A result's text parts are joined by a newline; an image, an
audio clip or a binary resource is a marker that says what it was and its size
(``[image: image/png, 1234 bytes]``), because the model reads tool outputs as text and relay's
history keeps them so (masking, ``recall``, the work-state record and the rollout read them);
a text resource is its text. A result with no content part but structured content reads as
that content in JSON. These functions read the result in its JSON form (the wire's
``content``, ``structuredContent`` and ``isError``), so that they need no SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any


def result_text(result: Mapping[str, Any]) -> str:
    """The text of a ``tools/call`` result (its JSON form)."""
    content = result.get("content")
    if not isinstance(content, list):
        content = []
    parts = [part_text(part) for part in content if isinstance(part, Mapping)]
    if not parts and result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], ensure_ascii=False, sort_keys=True)
    return "\n".join(parts)


def is_error(result: Mapping[str, Any]) -> bool:
    """Whether the result reports that the tool failed."""
    return result.get("isError") is True


def part_text(part: Mapping[str, Any]) -> str:
    """One content part as text."""
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind in ("image", "audio"):
        return _marker(str(kind), part.get("mimeType"), _decoded_size(part.get("data")))
    if kind == "resource":
        resource = part.get("resource")
        if not isinstance(resource, Mapping):
            return "[resource]"
        if isinstance(resource.get("text"), str):
            return str(resource["text"])
        size = _decoded_size(resource.get("blob"))
        return _marker("resource", resource.get("mimeType"), size, resource.get("uri"))
    if kind == "resource_link":
        label = part.get("name") or part.get("title")
        uri = part.get("uri")
        return f"[resource link: {label} {uri}]" if label else f"[resource link: {uri}]"
    return f"[{kind or 'unknown'} content]"


def _marker(kind: str, mime: Any, size: int | None, uri: Any = None) -> str:
    details = [str(x) for x in (uri, mime) if x]
    if size is not None:
        details.append(f"{size} bytes")
    return f"[{kind}: {', '.join(details)}]" if details else f"[{kind}]"


def _decoded_size(data: Any) -> int | None:
    """The size of base64 ``data`` once decoded (None when it is not base64), counted
    without decoding it."""
    if not isinstance(data, str) or not _BASE64.fullmatch(data):
        return None
    text = "".join(data.split())
    return len(text) * 3 // 4 - len(text) + len(text.rstrip("="))


#: Base64 text, whitespace allowed.
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


__all__ = ["is_error", "part_text", "result_text"]
