"""Text made safe to show: control characters written out, HTML escaped, data embedded.

What a model, a tool or a server wrote can hold escape sequences (``\\x1b[2J``), bidirectional
overrides and markup. :func:`visible` writes every control character out, so a terminal (the
transcript of ``relay run --pretty`` and ``relay show``) shows it and never acts on it; the
pages escape it on top (:func:`text`, :func:`attr`) and embed their data as JSON that no text
inside it can end early (:func:`json_script`).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

#: What a terminal would act on rather than show: C0 controls but tab and newline, DEL, C1
#: controls (0x9b is a one-byte CSI), and the bidirectional overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written out (``\\x1b``, ``\\u202e``): escape
    sequences from a model, a tool or a server are shown, never acted on by the terminal."""
    return _CONTROL.sub(_escape, text)


def text(value: object) -> str:
    """``value`` as HTML text: escaped, control characters written out (``\\x1b``)."""
    return html.escape(visible(str(value)), quote=True)


def attr(value: object) -> str:
    """``value`` as a quoted attribute value."""
    return f'"{text(value)}"'


def json_script(element_id: str, data: Any) -> str:
    """``data`` as ``<script type="application/json">``: JSON that no text inside it can end
    early (``</script>``, ``<!--``) and that parses back to ``data``."""
    encoded = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    encoded = (
        encoded.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return f'<script type="application/json" id={attr(element_id)}>{encoded}</script>'


__all__ = ["attr", "json_script", "text", "visible"]
