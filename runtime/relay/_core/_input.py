"""User input as history items: what a submitted turn becomes once recorded."""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Iterable
from pathlib import Path
from typing import assert_never

import anyio

from .._base import _protocol as p


def input_text(items: Iterable[p.InputItem]) -> str:
    """The text of the input's text items, one per line (the legacy ``user_message`` event)."""
    return "\n".join(item.text for item in items if isinstance(item, p.Text))


def user_message_of(items: Iterable[p.InputItem]) -> p.Message:
    """The user message that records ``items``; an unloaded local image becomes a note."""
    parts: list[p.ContentPart] = []
    for item in items:
        match item:
            case p.Text(text=text):
                parts.append(p.InputText(text))
            case p.Image(image_url=url):
                parts.append(p.InputImage(url))
            case p.LocalImage(path=path):
                parts.append(p.InputText(f"[image not loaded: {path}]"))
            case _:
                assert_never(item)
    return p.Message("user", tuple(parts))


async def resolve_image(item: p.InputItem, cwd: str) -> p.InputItem:
    """A local image becomes a ``data:`` URL image; an unreadable one stays a local image."""
    if not isinstance(item, p.LocalImage):
        return item
    path = Path(cwd) / item.path
    try:
        data = await anyio.Path(path).read_bytes()
    except OSError:
        return item
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return p.Image(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}")


__all__ = ["input_text", "resolve_image", "user_message_of"]
