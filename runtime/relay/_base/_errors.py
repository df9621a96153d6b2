"""relay's exceptions.

Every exception relay raises on purpose, and every exception its public modules export,
derives from :class:`RelayError`. They are public in :mod:`relay` unless marked
``[lowlevel]`` (:mod:`relay.lowlevel`, for authors of tasks, backends and model clients) or
``[cluster]`` (:mod:`relay.cluster`)::

    RelayError
    ├── ConfigError               bad configuration: unknown key, wrong type, missing API key
    ├── InvalidOpError            an op that cannot be decoded or has invalid field values
    ├── DecodeError               JSON that is not the protocol type expected
    ├── ScriptError               an unreadable or malformed op script / model script
    ├── RolloutError              a rollout file that cannot be written or read
    │   └── RolloutLockedError    another session is appending to it
    ├── ClosedSessionError        the session was shut down: your code closed it
    ├── TurnFailed                a turn asked for with Session.ask did not answer
    ├── ToolError                 a tool failed in a way the model should read
    ├── StopTurn                  [lowlevel] a task ends its turn; the reason was reported
    ├── CompactionFailed          [lowlevel] a backend could not make a new history
    ├── HostLostError             [cluster] a session's host was lost before it acknowledged
    ├── NoHostError               [cluster] no host can take a session
    └── ModelError                the model call failed (carries an ErrorCode and retry advice)
        ├── ContextWindowExceeded the prompt does not fit the model's window
        └── StreamError           transport broke mid-stream (retryable)

``InvalidOpError`` and ``DecodeError`` are also ``ValueError``.

Messages follow one rule: a message says what went wrong, in lower case, naming its subject
first when it has one (the file, the key, the op), without a full stop and without the prefix
of where it is reported. Whoever reports it adds that prefix, once: the command line
``relay: `` (``relay: warning: `` for a warning), a tool's output ``error: `` (a
``ToolError``), a compaction's ``error`` event its backend's ``error_prefix`` (Codex's
``Error running local compact task: ``), for a ``CompactionFailed`` and a ``ModelError``
alike. ``tests/base/test_errors.py`` checks the tree above and every message relay writes.

Errors from the outside world (HTTP, the SDK, hook processes) are translated into this tree in
exactly one place each (:func:`classify_http_error` for model servers), with ``raise ... from``.
"""

from __future__ import annotations

import enum

from ._unicode import mended


class ErrorCode(enum.StrEnum):
    """The ``code`` of an ``error`` event (docs/session.md)."""

    CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
    QUOTA_EXCEEDED = "quota_exceeded"
    USAGE_LIMIT = "usage_limit"
    UNAUTHORIZED = "unauthorized"
    BAD_REQUEST = "bad_request"
    SERVER_ERROR = "server_error"
    STREAM = "stream"
    INVALID_OP = "invalid_op"
    INVALID_OUTPUT = "invalid_output"
    ACTIVE_TURN_NOT_STEERABLE = "active_turn_not_steerable"
    HOOK = "hook"
    COMPACTION_LOOP = "compaction_loop"
    STEP_LIMIT = "step_limit"
    TOOL_LOOP = "tool_loop"
    ROLLOUT = "rollout"
    TASK_FAILED = "task_failed"
    UNKNOWN_APPROVAL = "unknown_approval"
    INTERNAL = "internal"


class RelayError(Exception):
    """Base class of every error relay raises on purpose."""


class ConfigError(RelayError):
    """The configuration is invalid; the message names the key or variable."""


class InvalidOpError(RelayError, ValueError):
    """An op could not be decoded or has invalid field values."""


class ScriptError(RelayError):
    """An op script or model script is unreadable or malformed."""


class RolloutError(RelayError):
    """A rollout file cannot be written or read."""


class RolloutLockedError(RolloutError):
    """Another session, in this process or another, is appending to the rollout file."""


class ClosedSessionError(RelayError):
    """The session has shut down; no more ops are accepted."""


#: Error codes after which retrying the same request is pointless.
_NOT_RETRYABLE = frozenset(
    {
        ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ErrorCode.QUOTA_EXCEEDED,
        ErrorCode.USAGE_LIMIT,
        ErrorCode.UNAUTHORIZED,
        ErrorCode.BAD_REQUEST,
        ErrorCode.INVALID_OUTPUT,
    }
)


class ModelError(RelayError):
    """A model request failed.

    Attributes:
        code: the error code reported in the ``error`` event.
        retry_after: seconds the server asked to wait before retrying, if it said.
    """

    def __init__(self, message: str, code: ErrorCode, *, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed if sent again."""
        return self.code not in _NOT_RETRYABLE


class ContextWindowExceeded(ModelError):
    """The prompt does not fit the model's context window.

    Attributes:
        prompt_tokens: the server's own count of the prompt, when it said (llama-server's
            ``n_prompt_tokens``).
        context_window: the server's window, when it said (llama-server's ``n_ctx``).
    """

    def __init__(
        self,
        message: str = "the prompt exceeds the model's context window",
        *,
        prompt_tokens: int | None = None,
        context_window: int | None = None,
    ):
        super().__init__(message, ErrorCode.CONTEXT_WINDOW_EXCEEDED)
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


class StreamError(ModelError):
    """The response stream broke before it completed; retryable."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message, ErrorCode.STREAM, retry_after=retry_after)


_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "exceed_context_size_error",
    "maximum context length",
    "context window",
)


def classify_http_error(
    status: int | None,
    *,
    code: str | None = None,
    message: str = "",
    type_: str | None = None,
    retry_after: float | None = None,
) -> ModelError:
    """Translate what a model server said about a failure into a :class:`ModelError`.

    This is the one place where server error forms (HTTP status + body, in-stream ``error``
    events, ``response.failed``) become relay error codes. ``status`` is None for errors that
    arrived inside a stream.
    """
    # A server's text is carried with U+FFFD for a lone surrogate, as its answers are
    # (docs/decisions.md, "Text that UTF-8 cannot carry").
    message = mended(message)
    text = " ".join(part for part in (code, type_, message) if part).lower()
    if any(marker in text for marker in _CONTEXT_MARKERS):
        return ContextWindowExceeded(message or "the prompt exceeds the model's context window")
    if code == "insufficient_quota" or type_ == "insufficient_quota":
        return ModelError(message or "quota exceeded", ErrorCode.QUOTA_EXCEEDED)
    if code in {"usage_limit_reached", "usage_not_included"}:
        return ModelError(message or "usage limit reached", ErrorCode.USAGE_LIMIT)
    if status in {401, 403} or code in {"invalid_api_key", "unauthorized"}:
        return ModelError(message or "unauthorized", ErrorCode.UNAUTHORIZED)
    if status == 429 or code in {"rate_limit_exceeded", "rate_limit"}:
        return ModelError(
            message or "rate limited", ErrorCode.SERVER_ERROR, retry_after=retry_after
        )
    if status is not None and 400 <= status < 500 and status not in {408, 409}:
        return ModelError(message or f"HTTP {status}", ErrorCode.BAD_REQUEST)
    if status is None:
        return StreamError(message or "the model reported an error", retry_after=retry_after)
    return ModelError(message or f"HTTP {status}", ErrorCode.SERVER_ERROR, retry_after=retry_after)
