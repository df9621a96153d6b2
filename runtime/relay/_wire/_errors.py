"""How failures of the SDK and the transport become relay errors: translated here and
nowhere else, with the API key kept out of every message."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Mapping

import anyio
import httpx2

from .._base._errors import (
    ContextWindowExceeded,
    ErrorCode,
    ModelError,
    StreamError,
    classify_http_error,
)
from .._base._json import JsonRejected
from .._base._secret import redact
from .._models._responses import error_from_payload, retry_after_from_message
from ._sdk import APIConnectionError, APIError, APIStatusError, APITimeoutError, OpenAIError

#: What the SDK and the transport raise; everything else is a bug and propagates as it is.
FAILURES: tuple[type[BaseException], ...] = (
    OpenAIError,
    httpx2.HTTPError,
    json.JSONDecodeError,
    JsonRejected,
    UnicodeDecodeError,
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    OSError,
)


class ForeignRedirect(OpenAIError):
    """The server redirected a request to another origin, which relay does not follow: the
    request carries the conversation and the provider's headers."""

    def __init__(self, origin: str, target: str) -> None:
        super().__init__(f"redirect from {origin} to {target}")
        self.origin = origin
        self.target = target


class ErrorAnswer(APIStatusError):
    """An answer with an error status (4xx, 5xx), whose body relay read with its bounds
    (:func:`~relay._wire._body.read_error_answer`) before the SDK could read all of it.

    Attributes:
        body: as the SDK gives it: the error object of a JSON body, else the text.
        late: the body did not arrive within ``within_s`` of the status line.
    """

    def __init__(
        self, response: httpx2.Response, body: object, *, late: bool, within_s: float
    ) -> None:
        super().__init__(f"Error code: {response.status_code}", response=response, body=body)
        self.late = late
        self.within_s = within_s


def origin_of(url: httpx2.URL) -> str:
    """``scheme://host[:port]`` of ``url``: what a redirect may not leave."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


async def refuse_foreign_redirect(response: httpx2.Response) -> None:
    """A response hook: raises :class:`ForeignRedirect` for a redirect to another origin."""
    if not response.has_redirect_location:
        return
    here = response.request.url
    target = here.join(response.headers["location"])
    if origin_of(target) != origin_of(here):
        raise ForeignRedirect(origin_of(here), origin_of(target))


#: Longest server error text kept in a message when the body is not JSON.
_MAX_BODY_TEXT = 500


def translate(exc: BaseException, *, secret: str | None) -> ModelError:
    """The relay error for a failure raised by the SDK or the transport.

    This is the one place where SDK exceptions become relay errors; callers raise the result
    ``from exc``. HTTP status errors go through :func:`classify_http_error` with the server's
    code, message, type and retry-after; anything that broke the connection or the stream
    becomes a retryable :class:`StreamError`.
    """
    match exc:
        case ForeignRedirect():
            return ModelError(
                f"the model server at {exc.origin} redirected the request to another origin, "
                f"{exc.target}; relay does not follow it (set the provider's base_url to the "
                "new address if you trust it)",
                ErrorCode.BAD_REQUEST,
            )
        case APIStatusError():
            code, message, kind = _error_fields(exc.body)
            status = exc.status_code
            if isinstance(exc, ErrorAnswer) and exc.late:
                message = (
                    f"HTTP {status}; the model server did not send its error body within "
                    f"{exc.within_s:g} s"
                )
            text = _cut(redact(message or _body_text(exc.body) or f"HTTP {status}", secret))
            retry_after = _retry_after(exc.response.headers)
            if retry_after is None:
                retry_after = retry_after_from_message(text)
            return classify_http_error(
                status, code=code, message=text, type_=kind, retry_after=retry_after
            )
        case APITimeoutError():
            return StreamError(
                redact(f"the model server did not answer in time: {_cause(exc)}", secret)
            )
        case APIConnectionError():
            return StreamError(
                redact(f"connection to the model server failed: {_cause(exc)}", secret)
            )
        case APIError():
            # Any other SDK error that carries a server's error object.
            body = exc.body if isinstance(exc.body, Mapping) else {"message": exc.message}
            return redact_error(error_from_payload(body, default=exc.message), secret)
        case httpx2.TimeoutException():
            # Raised by the body of a streamed response, which the SDK does not wrap.
            return StreamError(redact(f"the model server did not answer in time: {exc}", secret))
        case httpx2.HTTPError() | anyio.EndOfStream() | anyio.BrokenResourceError() | OSError():
            return StreamError(
                redact(f"connection to the model server failed: {_describe(exc)}", secret)
            )
        case json.JSONDecodeError() | UnicodeDecodeError():
            return StreamError(
                redact(f"malformed event from the model server (invalid JSON): {exc}", secret)
            )
        case JsonRejected():
            return StreamError(f"malformed event from the model server: {exc}")
        case _:
            return StreamError(redact(f"the model request failed: {_describe(exc)}", secret))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return _describe(cause) if cause is not None else str(exc)


def _error_fields(body: object) -> tuple[str | None, str | None, str | None]:
    """``(code, message, type)`` of an error body, in its nested or flat form."""
    if isinstance(body, Mapping):
        nested = body.get("error")
        if isinstance(nested, Mapping):
            body = nested
        elif isinstance(nested, str) and nested:
            return None, nested, None
    if not isinstance(body, Mapping):
        return None, None, None
    code = body.get("code")
    message = body.get("message")
    kind = body.get("type")
    return (
        code if isinstance(code, str) and code else None,
        message if isinstance(message, str) and message else None,
        kind if isinstance(kind, str) and kind else None,
    )


def _body_text(body: object) -> str | None:
    if isinstance(body, str) and body.strip():
        return body.strip()
    return None


def _cut(text: str) -> str:
    """``text`` cut to :data:`_MAX_BODY_TEXT` characters; cut only once redacted, so that no
    part of a key straddling the cut is left."""
    return text if len(text) <= _MAX_BODY_TEXT else text[:_MAX_BODY_TEXT] + "…"


def _retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(value) and value >= 0:
                return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return value if math.isfinite(value) and value >= 0 else None


def redact_error(error: ModelError, secret: str | None) -> ModelError:
    """``error`` with every form of ``secret`` taken out of its message (itself when none)."""
    message = redact(error.message, secret)
    if message == error.message:
        return error
    return with_message(error, message, retry_after=error.retry_after)


def with_message(error: ModelError, message: str, *, retry_after: float | None) -> ModelError:
    """An error of ``error``'s kind and code with another message and retry-after."""
    if isinstance(error, ContextWindowExceeded):
        return ContextWindowExceeded(message)
    if isinstance(error, StreamError):
        return StreamError(message, retry_after=retry_after)
    return ModelError(message, error.code, retry_after=retry_after)
