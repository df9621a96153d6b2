"""The ``pattern`` of a JSON Schema, matched in linear time: ECMA-262 syntax read into RE2's.

Theory of operation. JSON Schema writes its regular expressions in ECMA-262's dialect, not
anchored (a pattern matches when it matches anywhere in the text). Python's ``re`` backtracks:
``^(a+)+$`` against a long run of ``a`` and one ``!`` takes time exponential in the run, and an
answer to a structured turn is text the model chose. RE2 (``google-re2``) matches in time
linear in the text, and it has no backreferences and no lookaround, which need backtracking: a
pattern that uses them is refused when the schema is given (:class:`PatternRefused`, saying
why), never matched some other way.

RE2's syntax is close to ECMA-262's; :func:`to_re2` rewrites what differs in meaning:

- ``\\s`` and ``\\S`` are ECMA-262's white space and line terminators (RE2's ``\\s`` is ASCII's
  five); ``.`` matches anything but a line terminator (``\\n``, ``\\r``, U+2028, U+2029).
- ``\\uXXXX`` (a surrogate pair read as one character), ``\\u{X...}``, ``\\cX``, ``\\0`` are
  written as RE2's ``\\x{...}``; inside a class, ``\\b`` is backspace.
- ``[]`` matches nothing and ``[^]`` any character; ``[`` inside a class is a character (RE2
  would read ``[[:alpha:]]`` as a POSIX class).
- ``(?<name>...)`` is a group; ``\\p{General_Category=Lu}``, ``\\p{Script=Greek}`` and the long
  category names (``\\p{Letter}``) are RE2's short ones.
- ``\\d``, ``\\w``, ``\\b`` are ASCII in both; ``^`` and ``$`` are the text's ends in both
  (Python's ``$`` also matches before a final newline; ECMA-262's and RE2's do not).
- An escape ECMA-262 gives no meaning to (``\\A``, ``\\z``, ``\\Z``, a letter) is refused
  rather than guessed at; an escaped punctuation character is that character.

RE2 refuses, with its own reason, what it cannot compile in bounded memory or what is not a
regular expression (a repetition over 1,000, ``(?P=name)``, an unclosed group).
"""

from __future__ import annotations

import functools
from typing import Any

import re2  # type: ignore[import-untyped]

#: ECMA-262's white space and line terminators, as (first, last) code points.
_SPACE = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_LAST = 0x10FFFF


def _ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges)


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    start = 0
    for a, b in ranges:
        if a > start:
            out.append((start, a - 1))
        start = b + 1
    if start <= _LAST:
        out.append((start, _LAST))
    return tuple(out)


#: The members of ``\s`` and of ``\S``, to write inside a class.
SPACE = _ranges(_SPACE)
NOT_SPACE = _ranges(_complement(_SPACE))
#: ``.``: anything but a line terminator.
_DOT = "[^\\n\\r\\x{2028}\\x{2029}]"
_ANY = f"\\x{{0}}-\\x{{{_LAST:x}}}"
#: What a class escape that stands for a set of characters becomes inside a class.
_SETS = frozenset((SPACE, NOT_SPACE, "\\d", "\\D", "\\w", "\\W"))

#: ECMA-262's long general category names, by RE2's short ones.
_CATEGORIES = {
    "Letter": "L",
    "Cased_Letter": "LC",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Mark": "M",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Number": "N",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Punctuation": "P",
    "punct": "P",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Symbol": "S",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Separator": "Z",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Other": "C",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Private_Use": "Co",
    "Unassigned": "Cn",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_SYNTAX = frozenset("^$\\.*+?()[]{}|/-")
#: Escapes RE2 reads as ECMA-262 does.
_SAME = frozenset("dDwWtnvfr")


class PatternRefused(ValueError):
    """A pattern relay cannot match in linear time, or that is not a regular expression; the
    message says why."""


def _hex(text: str, start: int, count: int) -> int | None:
    digits = text[start : start + count]
    if len(digits) != count or not set(digits) <= _HEX:
        return None
    return int(digits, 16)


def _code_point(point: int) -> str:
    return f"\\x{{{point:x}}}"


class _Reader:
    """One pass over an ECMA-262 pattern, writing RE2's."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0
        self.out: list[str] = []

    def unicode_escape(self) -> str:
        """``\\u...`` at ``self.at`` (the ``u``): one character, a pair of surrogates read as
        one."""
        text, at = self.text, self.at
        if text.startswith("{", at + 1):
            end = text.find("}", at + 2)
            digits = text[at + 2 : end] if end > 0 else ""
            if not digits or not set(digits) <= _HEX or int(digits, 16) > _LAST:
                raise PatternRefused("\\u{...} holds no code point")
            self.at = end + 1
            point = int(digits, 16)
        else:
            found = _hex(text, at + 1, 4)
            if found is None:
                raise PatternRefused("\\u is not followed by four hex digits")
            point, self.at = found, at + 5
            if 0xD800 <= point < 0xDC00 and text.startswith("\\u", self.at):
                low = _hex(text, self.at + 2, 4)
                if low is not None and 0xDC00 <= low < 0xE000:
                    point = 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)
                    self.at += 6
        if 0xD800 <= point < 0xE000:
            raise PatternRefused(f"\\u{point:04x} is half a surrogate pair, which no text holds")
        return _code_point(point)

    def property_escape(self, letter: str) -> str:
        text, at = self.text, self.at
        end = text.find("}", at + 1)
        if not text.startswith("{", at + 1) or end < 0:
            raise PatternRefused(f"\\{letter} is not followed by a property in braces")
        name = text[at + 2 : end]
        key, _, value = name.partition("=")
        if value:
            if key not in ("General_Category", "gc", "Script", "sc"):
                raise PatternRefused(f"\\{letter}{{{name}}}: relay knows no property {key!r}")
            name = value
        self.at = end + 1
        return f"\\{letter}{{{_CATEGORIES.get(name, name)}}}"

    def escape(self, in_class: bool) -> str:
        """The escape at ``self.at`` (its backslash), in RE2's words."""
        text = self.text
        self.at += 1
        if self.at >= len(text):
            raise PatternRefused("it ends with a lone backslash")
        c = text[self.at]
        if c == "u":
            return self.unicode_escape()
        if c in "pP":
            return self.property_escape(c)
        self.at += 1
        if c in _SAME:
            return "\\" + c
        if c == "s":
            return SPACE if in_class else f"[{SPACE}]"
        if c == "S":
            return NOT_SPACE if in_class else f"[{NOT_SPACE}]"
        if c == "b":
            return "\\x{8}" if in_class else "\\b"
        if c == "B" and not in_class:
            return "\\B"
        if c == "0" and not text[self.at : self.at + 1].isdigit():
            return "\\x{0}"
        if c.isdigit() or (c == "k" and text.startswith("<", self.at)):
            if in_class:
                raise PatternRefused(
                    f"\\{c} in a class is an octal escape, which relay does not read"
                )
            raise PatternRefused(
                f"\\{c} is a backreference, which needs backtracking: relay matches patterns "
                "in linear time, without it"
            )
        if c == "x":
            found = _hex(text, self.at, 2)
            if found is None:
                raise PatternRefused("\\x is not followed by two hex digits")
            self.at += 2
            return _code_point(found)
        if c == "c":
            letter = text[self.at : self.at + 1]
            if not (letter.isascii() and letter.isalpha()):
                raise PatternRefused("\\c is not followed by a letter")
            self.at += 1
            return _code_point(ord(letter) % 32)
        if c in _SYNTAX or (c.isascii() and not c.isalnum() and c != "_"):
            return "\\" + c
        if c == "_" or not c.isascii():
            return c
        raise PatternRefused(f"\\{c} is no escape of ECMA-262's regular expressions")

    def char_class(self) -> str:
        """The class at ``self.at`` (its ``[``), through its ``]``."""
        text = self.text
        negated = text.startswith("[^", self.at)
        self.at += 2 if negated else 1
        if text.startswith("]", self.at):
            self.at += 1
            # ECMA-262's empty class matches nothing, and its negation any character.
            return f"[{_ANY}]" if negated else f"[^{_ANY}]"
        parts = ["[^" if negated else "["]
        while self.at < len(text):
            c = text[self.at]
            if c == "]":
                self.at += 1
                parts.append("]")
                return "".join(parts)
            if c == "\\":
                parts.append(self.escape(in_class=True))
                if parts[-1] in _SETS and text.startswith("-", self.at):
                    # A set cannot end a range: ECMA-262 reads the hyphen as itself.
                    parts.append("\\-")
                    self.at += 1
            else:
                parts.append("\\[" if c == "[" else c)
                self.at += 1
        raise PatternRefused("a character class is not closed (missing ])")

    def group(self) -> str:
        text, at = self.text, self.at
        for opening in ("(?=", "(?!", "(?<=", "(?<!"):
            if text.startswith(opening, at):
                raise PatternRefused(
                    f"{opening}...) is a lookaround, which needs backtracking: relay matches "
                    "patterns in linear time, without it"
                )
        if text.startswith("(?<", at):
            self.at += 3
            return "(?P<"
        self.at += 1
        return "("

    def read(self) -> str:
        text = self.text
        while self.at < len(text):
            c = text[self.at]
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.out.append(self.char_class())
            elif c == "(":
                self.out.append(self.group())
            elif c == ".":
                self.out.append(_DOT)
                self.at += 1
            else:
                self.out.append(c)
                self.at += 1
        return "".join(self.out)


def to_re2(pattern: str) -> str:
    """``pattern``, an ECMA-262 regular expression, in RE2's syntax with the same meaning.

    Raises:
        PatternRefused: it uses what RE2 cannot match (a backreference, a lookaround) or an
            escape ECMA-262 gives no meaning to; the message says which.
    """
    return _Reader(pattern).read()


def _options() -> Any:
    options = re2.Options()
    # A refused pattern is an error relay reports; RE2 would also log it to stderr.
    options.log_errors = False
    # Only whether it matches is asked: without captures RE2 may use its fastest matcher.
    options.never_capture = True
    return options


@functools.lru_cache(maxsize=512)
def compiled(pattern: str) -> Any:
    """``pattern`` (ECMA-262) compiled by RE2, kept for the next use.

    Raises:
        PatternRefused: RE2 cannot match it (see :func:`to_re2`), or cannot compile it (its
            reason, e.g. ``invalid repetition size: {1001}``).
    """
    translated = to_re2(pattern)
    try:
        return re2.compile(translated, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternRefused(str(reason)) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (ECMA-262) matches somewhere in ``text``, in time linear in
    ``text``."""
    return compiled(pattern).search(text) is not None


__all__ = ["NOT_SPACE", "SPACE", "PatternRefused", "compiled", "search", "to_re2"]
