"""Text that UTF-8 cannot carry: lone surrogates, found and mended (docs/decisions.md,
"Text that UTF-8 cannot carry").

A Python string can hold a surrogate that is half of nothing: JSON may escape one
(``"\\ud800"``), and a file name that is not UTF-8 reaches Python as one. No rollout line,
event, request or terminal takes it, so relay decides at each edge where text comes in: what
a client sends is refused there, naming the field (:func:`lone_surrogate_at`,
:func:`why_not_text`); what a model sends is carried with U+FFFD in place of each lone
surrogate (:func:`mend_json`), as a decoder does with bytes that are not UTF-8.

All of it is plain functions of their arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

#: One surrogate code point. A pair that Python holds as two code points matches too: UTF-8
#: cannot carry it either until it is joined (:func:`mended` joins it).
_SURROGATE = re.compile("[\ud800-\udfff]")

#: What stands for a character that cannot be carried.
REPLACEMENT = "\ufffd"


def holds_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, which UTF-8 cannot encode."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def written_out(text: str) -> str:
    """``text`` with each surrogate code point written as its escape (``\\ud800``): for a
    message that names it."""
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def why_not_text(text: str) -> str:
    """Why ``text`` is refused, naming its first lone surrogate and where it is."""
    found = _SURROGATE.search(text)
    assert found is not None, "why_not_text of text that UTF-8 can carry"
    escape = written_out(found.group())
    return (
        f"holds a lone surrogate ({escape} at character {found.start()}), which is no "
        "character: UTF-8 cannot carry it"
    )


def mended(text: str) -> str:
    """``text`` that UTF-8 can carry: two surrogates that make a pair joined into their
    character, every other surrogate replaced by U+FFFD. Text without one is returned as is."""
    if not holds_lone_surrogate(text):
        return text
    # UTF-16 is where surrogates belong: through it, pairs join and halves become U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _holds_any(value: Any) -> bool:
    if isinstance(value, str):
        return holds_lone_surrogate(value)
    if isinstance(value, Mapping):
        return any(_holds_any(key) or _holds_any(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_any(item) for item in value)
    return False


def _mend(value: Any) -> Any:
    if isinstance(value, str):
        return mended(value)
    if isinstance(value, Mapping):
        return {_mend(key): _mend(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_mend(item) for item in value]
    return value


def mend_json(value: Any) -> Any:
    """A JSON value (as parsed: dicts, lists, strings, numbers) with every string, member
    names too, :func:`mended`. A value with nothing to mend is returned itself, uncopied."""
    return _mend(value) if _holds_any(value) else value


#: The JSON escape of a surrogate: where a JSON text may hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def mended_arguments(text: str) -> str:
    """A model's JSON arguments (a tool call's) whose strings, once parsed, are text that
    UTF-8 can carry: written again from the :func:`mend_json` of their value when an escape
    in them stands for a lone surrogate; else ``text`` itself, as the model wrote it (JSON
    that does not parse included: the tool says so)."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if lone_surrogate_at(value) is None:
        return text
    return json.dumps(mend_json(value), ensure_ascii=False)


def lone_surrogate_at(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first string of a JSON value that holds a lone surrogate, member names too, and
    where it is, as a field is named (``input[0].text``; ``where`` names ``value`` itself); or
    None when every string is text."""
    if isinstance(value, str):
        return ((where or "value"), value) if holds_lone_surrogate(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            name = written_out(str(key))
            name = f"{where}.{name}" if where else name
            if isinstance(key, str) and holds_lone_surrogate(key):
                return name, key
            found = lone_surrogate_at(item, name)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = lone_surrogate_at(item, f"{where}[{index}]")
            if found is not None:
                return found
    return None


__all__ = [
    "REPLACEMENT",
    "holds_lone_surrogate",
    "lone_surrogate_at",
    "mend_json",
    "mended",
    "mended_arguments",
    "why_not_text",
    "written_out",
]
