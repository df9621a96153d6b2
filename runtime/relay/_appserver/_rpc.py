"""The JSON-RPC of ``relay app-server``: one JSON object per line, without the ``"jsonrpc"``
member (docs/codex-compat.md).

What comes in is read into one of four shapes: a :class:`Request` (``id`` and ``method``), a
:class:`Notification` (``method``, no ``id``), a :class:`Reply` to a request the server sent
(``id`` with ``result`` or ``error``), or a :class:`Malformed` line, which is answered with an
error whose ``id`` is the line's when it has a usable one, else null. A request whose params
hold text that UTF-8 cannot carry (a lone surrogate, which JSON may escape: ``"\\ud800"``) is
one too, answered with ``-32602`` naming the field (docs/decisions.md, "Text that UTF-8 cannot
carry"): nothing of it reaches a thread. What goes out is built by :func:`result`,
:func:`error`, :func:`notification` and :func:`request` and written by :func:`encode`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from .._base._json import loads
from .._base._unicode import lone_surrogate_at, why_not_text

#: A request id: JSON-RPC allows a string or an integer (and relay's peer, no other).
RequestId: TypeAlias = str | int
#: One message, as the JSON object it is written as.
Message: TypeAlias = dict[str, Any]


class Code(enum.IntEnum):
    """The JSON-RPC error codes the server answers with."""

    PARSE_ERROR = -32700
    """The line is not JSON."""
    INVALID_REQUEST = -32600
    """The line is JSON but no request, or the request comes at the wrong time."""
    METHOD_NOT_FOUND = -32601
    """No such method, or a method relay has no counterpart for."""
    INVALID_PARAMS = -32602
    """A parameter is missing, of the wrong type, or names nothing."""
    INTERNAL_ERROR = -32603
    """The server failed."""
    SERVER_ERROR = -32000
    """What was asked could not be done (a session that would not open)."""


class RpcError(Exception):
    """A request that is answered with an error."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class Request:
    """A request from the client: it gets one answer."""

    id: RequestId
    """Its id, echoed by the answer."""
    method: str
    """What it asks for."""
    params: Any
    """Its parameters, as sent (None when absent)."""


@attrs.frozen
class Notification:
    """A notification from the client: it gets no answer."""

    method: str
    """What it says."""
    params: Any
    """Its parameters, as sent."""


@attrs.frozen
class Reply:
    """The client's answer to a request the server sent."""

    id: RequestId
    """The id of the server's request."""
    result: Any
    """The result (None with an error)."""
    error: Any = None
    """The error object, when the client answered with one."""


@attrs.frozen
class Malformed:
    """A line that is no message: answered with an error."""

    id: RequestId | None
    """The line's id when it has a usable one (the error answers it), else None."""
    code: Code
    """Which error."""
    message: str
    """What is wrong with it."""


Incoming: TypeAlias = Request | Notification | Reply | Malformed


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_line(line: bytes) -> Incoming:
    """What one line from the client is (its line break, if any, included)."""
    try:
        data = loads(line)
    except (ValueError, RecursionError) as exc:
        return Malformed(None, Code.PARSE_ERROR, f"parse error: the line is not JSON ({exc})")
    if not isinstance(data, Mapping):
        what = "a batch" if isinstance(data, list) else f"a JSON {type(data).__name__}"
        return Malformed(None, Code.INVALID_REQUEST, f"invalid request: {what}, not an object")
    raw_id = data.get("id")
    if raw_id is not None and not _is_id(raw_id):
        return Malformed(
            None, Code.INVALID_REQUEST, "invalid request: id must be a string or an integer"
        )
    line_id: RequestId | None = raw_id
    method = data.get("method")
    if method is None:
        if line_id is not None and ("result" in data or "error" in data):
            return Reply(line_id, data.get("result"), data.get("error"))
        return Malformed(
            line_id, Code.INVALID_REQUEST, "invalid request: no method, and no result nor error"
        )
    if not isinstance(method, str):
        return Malformed(line_id, Code.INVALID_REQUEST, "invalid request: method must be a string")
    params = data.get("params")
    if line_id is not None:
        found = lone_surrogate_at(params, "params")
        if found is not None:
            where, text = found
            field = where.removeprefix("params.")
            return Malformed(line_id, Code.INVALID_PARAMS, f"{field}: {why_not_text(text)}")
        return Request(line_id, method, params)
    return Notification(method, params)


def result(id: RequestId, value: Any) -> Message:
    """The answer to request ``id``."""
    return {"id": id, "result": value}


def error(id: RequestId | None, code: Code, message: str) -> Message:
    """An error answering request ``id`` (None: a line whose id could not be read)."""
    return {"id": id, "error": {"code": int(code), "message": message}}


def notification(method: str, params: Mapping[str, Any]) -> Message:
    """A notification to the client."""
    return {"method": method, "params": dict(params)}


def request(id: RequestId, method: str, params: Mapping[str, Any]) -> Message:
    """A request to the client, which it answers with a reply of the same id."""
    return {"id": id, "method": method, "params": dict(params)}


def encode(message: Message) -> bytes:
    """One line of UTF-8 JSON. Text that UTF-8 cannot carry (a lone surrogate) is written with
    JSON escapes instead."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, separators=(",", ":")) + "\n").encode("ascii")


__all__ = [
    "Code",
    "Incoming",
    "Malformed",
    "Message",
    "Notification",
    "Reply",
    "Request",
    "RequestId",
    "RpcError",
    "encode",
    "error",
    "notification",
    "parse_line",
    "request",
    "result",
]
