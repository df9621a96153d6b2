"""What relay reads of an MCP server's answers, and what it says of one it cannot read
(docs/tools.md).

An answer is read up to the server's ``tool_output_max_bytes``, whatever the transport: a line
of a stdio server (:class:`Lines`), the body of an HTTP answer or one event of its stream
(``._http``). An answer that is longer, or that is no JSON-RPC message relay can read (bytes
that are not UTF-8, the escape of a lone surrogate, JSON nested deeper than the reader goes),
fails the request it answers at once with an error whose data is :class:`Unreadable`: the
call's output says that the answer could not be read, and why. Which request an answer that
cannot be read was meant for is read from the ``"id"`` it names (:func:`answer_ids`); the
connection goes on.

Plain functions over bytes, tested without a server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

#: What of a line over the bound is kept to find the request it answers.
HEAD_BYTES = 4096

RequestId = int | str


@attrs.frozen
class Unreadable:
    """The data of the error relay makes in place of an answer it could not read (a server's
    own error never carries it: it is no JSON value)."""

    why: str
    """Why, as a clause (``it is over 1,024 bytes (tool_output_max_bytes)``)."""


def over_bound(bound: int) -> str:
    """Why an answer over ``bound`` bytes is not read."""
    return f"it is over {bound:,} bytes (tool_output_max_bytes)"


def why_unreadable(line: bytes, error: ValueError) -> str:
    """Why ``line``, which the message reader refused with ``error``, cannot be read."""
    return why_json(_json_error(error), line)


def why_reported(message: str) -> str:
    """Why an answer cannot be read, from what the SDK's HTTP transport said of it
    (``Failed to parse JSON response: ...``, with the reader's error in it)."""
    found = _INVALID_JSON.search(message)
    return why_json(found.group(1).strip() if found else None, None)


def why_json(detail: str | None, line: bytes | None) -> str:
    """Why an answer cannot be read: ``detail`` is what the JSON reader said (None: it was
    JSON, but no JSON-RPC message), ``line`` the answer when it is at hand."""
    if line is not None:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"it is not UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start:,})"
    if detail is None:
        return "it is not a JSON-RPC message"
    if "recursion limit" in detail:
        return f"it is JSON nested deeper than relay reads ({detail})"
    if "unicode code point" in detail:
        return f"it is not UTF-8 ({detail})"
    surrogate = _LONE_SURROGATE.search(line) if line is not None else None
    if surrogate is not None:
        escape = surrogate.group().decode("ascii")
        return f"it holds {escape}, the escape of a lone surrogate, which is no character"
    if "hex escape" in detail:
        return f"it holds an escape that is no character ({detail})"
    return f"it is not JSON ({detail})"


def _json_error(error: ValueError) -> str | None:
    """What the JSON reader said of ``error`` (pydantic's ``json_invalid``), or None when the
    text was JSON and the message was what was wrong."""
    errors = getattr(error, "errors", None)
    if errors is None:
        return str(error)
    for found in errors(include_url=False, include_input=False):
        if found.get("type") == "json_invalid":
            detail = (found.get("ctx") or {}).get("error") or found.get("msg")
            return str(detail)
    return None


#: What pydantic's message says of JSON it could not read.
_INVALID_JSON = re.compile(r"Invalid JSON: ([^\[\n]+)")

#: ``\\uD800``-``\\uDBFF`` not followed by a low surrogate, or ``\\uDC00``-``\\uDFFF`` not
#: after a high one.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)

#: An ``"id"`` member and its value (a number or a short string).
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,200}")')


def answer_ids(raw: bytes) -> list[RequestId]:
    """The request ids ``raw`` (an answer, or the head of one) names, in order: every
    ``"id"`` member, the answer's own and any its result holds."""
    found: list[RequestId] = []
    for match in _ID.finditer(raw):
        value = match.group(1)
        if value.startswith(b'"'):
            found.append(value[1:-1].decode("utf-8", "replace"))
        else:
            found.append(int(value))
    return found


def request_key(request_id: RequestId) -> RequestId:
    """``request_id`` as the client session matches answers to requests (``"7"`` is 7)."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id


@attrs.frozen
class Overlong:
    """A line over the bound: its first :data:`HEAD_BYTES`; the rest is not kept."""

    head: bytes


class Lines:
    """The lines of a stream, each at most ``bound`` bytes: a longer one is an
    :class:`Overlong` as soon as it passes the bound, and the rest of it is skipped."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._pending: list[bytes] = []
        self._size = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> Iterator[bytes | Overlong]:
        """The lines ``chunk`` ends (without their newline), in order."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not self._skipping:
                self._pending.append(piece)
                self._size += len(piece)
                if self._size > self.bound:
                    head = b"".join(self._pending)[:HEAD_BYTES]
                    self._pending, self._size, self._skipping = [], 0, True
                    yield Overlong(head)
            if end < 0:
                return
            if self._skipping:
                self._skipping = False
            else:
                yield b"".join(self._pending)
            self._pending, self._size = [], 0
            start = end + 1


__all__ = [
    "HEAD_BYTES",
    "Lines",
    "Overlong",
    "RequestId",
    "Unreadable",
    "answer_ids",
    "over_bound",
    "request_key",
    "why_json",
    "why_reported",
    "why_unreadable",
]
