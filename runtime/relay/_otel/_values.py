"""What relay's spans record, as plain functions over plain data (no OpenTelemetry in here).

Content (prompts, answers, tool arguments and outputs) is recorded only when asked for
(:func:`records_content`), as JSON text in the shape of the GenAI semantic conventions
(``[{"role": ..., "parts": [...]}]``), cut to :data:`CONTENT_LIMIT` characters keeping the
newest messages; the caller redacts it. An error's message is content too (a server quotes
what it refused, an op quotes itself): without content it is left out, and a span says the
error's kind alone (:func:`error_text`), unless relay words the message itself from figures
(:data:`PLAIN_ERRORS`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._base import _protocol as p
from .._base._config import Config
from .._base._errors import ErrorCode
from .._base._model import CUT_AT_LIMIT

#: The variable the GenAI instrumentations read to record message content.
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: The most characters one content attribute holds; older messages are left out first.
CONTENT_LIMIT = 32_768
#: The most characters of an error message kept in a span's status.
MESSAGE_LIMIT = 500

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

#: The errors whose message relay words from its own settings and counts, never from what
#: the session holds: recorded whether content is or not.
PLAIN_ERRORS = frozenset(
    {
        ErrorCode.STEP_LIMIT.value,
        ErrorCode.TOOL_LOOP.value,
        ErrorCode.COMPACTION_LOOP.value,
        ErrorCode.ACTIVE_TURN_NOT_STEERABLE.value,
    }
)


def error_text(kind: str, message: str, *, content: bool, redact: Callable[[str], str]) -> str:
    """What a span records of an error of kind ``kind`` (its ``error.type``): its message,
    redacted and cut to :data:`MESSAGE_LIMIT`, when content is recorded or the message is one
    of :data:`PLAIN_ERRORS`; else the kind alone, and that the message was left out."""
    if content or kind in PLAIN_ERRORS:
        return redact(message)[:MESSAGE_LIMIT]
    return f"{kind}: the message is left out (content recording is off)"


def records_content(config: Config, environ: Mapping[str, str]) -> bool:
    """Whether spans record content: ``[otel] record_content = true``, or the GenAI variable
    set to ``true`` (any case)."""
    return config.otel.record_content or environ.get(
        CAPTURE_CONTENT_VARIABLE, ""
    ).strip().lower() in {"true", "1"}


def mcp_server(tool: str) -> str | None:
    """The server of a tool named ``mcp__SERVER__TOOL``, else None."""
    if not tool.startswith("mcp__"):
        return None
    server, sep, rest = tool[5:].partition("__")
    return server if sep and server and rest else None


def finish_reasons(incomplete: str | None, output: Sequence[p.ResponseItem]) -> tuple[str, ...]:
    """``gen_ai.response.finish_reasons`` of a completed response: ``length`` for an answer cut
    at the answer limit (another reason as the server gave it), ``tool_calls`` when the model
    asked for a tool, else ``stop``."""
    if incomplete is not None:
        return ("length" if incomplete == CUT_AT_LIMIT else incomplete,)
    if any(isinstance(item, p.FunctionCall | p.CustomToolCall) for item in output):
        return ("tool_calls",)
    return ("stop",)


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    part = {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}
    return {"role": "assistant", "parts": [part]}


def message(item: p.ResponseItem) -> dict[str, Any] | None:
    """One history item as a GenAI message, or None for what carries no content (a
    compaction's opaque item, a snapshot)."""
    match item:
        case p.Message(role=role):
            return {"role": role, "parts": [_text(item.text())]}
        case p.FunctionCall(name=name, arguments=arguments, call_id=call_id):
            return _call(call_id, name, arguments)
        case p.CustomToolCall(name=name, input=text, call_id=call_id):
            return _call(call_id, name, text)
        case (
            p.FunctionCallOutput(call_id=call_id, output=output)
            | p.CustomToolCallOutput(call_id=call_id, output=output)
        ):
            return {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": call_id, "response": output}],
            }
        case p.Reasoning(summary=summary) if summary:
            text = "\n".join(part.text for part in summary)
            return {"role": "assistant", "parts": [{"type": "reasoning", "content": text}]}
        case _:
            return None


def _plain(text: str) -> str:
    return text


def messages_json(
    items: Sequence[p.ResponseItem],
    limit: int = CONTENT_LIMIT,
    redact: Callable[[str], str] = _plain,
) -> tuple[str, bool]:
    """The newest of ``items`` as GenAI messages in JSON, every text passed through
    ``redact``, at most about ``limit`` characters; and whether anything was left out or cut.
    Only the items that fit (and the one that does not) are looked at."""
    kept: list[str] = []
    size = 2
    cut = False
    for index in range(len(items) - 1, -1, -1):
        shaped = message(items[index])
        if shaped is None:
            continue
        text = _ENCODER.encode(_redacted(shaped, redact, None))
        if size + len(text) + 1 > limit:
            cut = True
            if not kept:
                kept.append(_ENCODER.encode(_redacted(shaped, redact, limit // 2)))
            break
        kept.append(text)
        size += len(text) + 1
    return "[" + ",".join(reversed(kept)) + "]", cut


def _redacted(
    shaped: dict[str, Any], redact: Callable[[str], str], room: int | None
) -> dict[str, Any]:
    """A message with every text of its parts redacted (and cut to ``room``, when given): cut
    after redaction, so that a cut never leaves part of a key behind."""
    parts = [
        {
            key: (redact(value)[:room] if room is not None else redact(value))
            if isinstance(value, str) and key != "type"
            else value
            for key, value in part.items()
        }
        for part in shaped["parts"]
    ]
    return {**shaped, "parts": parts}


def text_messages_json(
    role: str, text: str, limit: int = CONTENT_LIMIT, redact: Callable[[str], str] = _plain
) -> tuple[str, bool]:
    """One text message as GenAI messages in JSON, its text redacted, then cut to ``limit``."""
    text = redact(text)
    return _ENCODER.encode([{"role": role, "parts": [_text(text[:limit])]}]), len(text) > limit


def instructions_json(
    text: str, limit: int = CONTENT_LIMIT, redact: Callable[[str], str] = _plain
) -> tuple[str, bool]:
    """Instructions as ``gen_ai.system_instructions`` in JSON, redacted, then cut to
    ``limit``."""
    text = redact(text)
    return _ENCODER.encode([_text(text[:limit])]), len(text) > limit


def clip(
    text: str, limit: int = CONTENT_LIMIT, redact: Callable[[str], str] = _plain
) -> tuple[str, bool]:
    """``text`` redacted, then cut to ``limit`` characters; and whether it was cut."""
    text = redact(text)
    return (text[:limit], True) if len(text) > limit else (text, False)


__all__ = [
    "PLAIN_ERRORS",
    "error_text",
    "CAPTURE_CONTENT_VARIABLE",
    "CONTENT_LIMIT",
    "MESSAGE_LIMIT",
    "clip",
    "finish_reasons",
    "instructions_json",
    "mcp_server",
    "message",
    "messages_json",
    "records_content",
    "text_messages_json",
]
