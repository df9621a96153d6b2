"""The Responses API as plain data: request bodies and the stream event parser.

Both the embedded scripted model and the HTTP client (through the openai SDK) go through
:class:`ResponseStreamParser`, so that a scripted failure and a real one are reported the same
way. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._base import _protocol as p
from .._base._codec import DecodeError, decode_response_item, encode_response_item
from .._base._errors import ContextWindowExceeded, ModelError, StreamError, classify_http_error
from .._base._model import (
    CUT_AT_LIMIT,
    CompactRequest,
    Completed,
    ModelEvent,
    OutputItemDone,
    OutputTextDelta,
    Prompt,
    SummaryTextDelta,
)
from .._base._output_schema import FORMAT_NAME
from .._base._unicode import mend_json, mended_arguments

#: Header that tells a server which kind of request this is (``turn`` or ``compact``).
PURPOSE_HEADER = "x-relay-request"
#: The header that names a sub-agent's place in its tree (``/root/1``); a root sends none.
AGENT_HEADER = "x-relay-agent"


def request_body(prompt: Prompt, *, shared_input: bool = False) -> dict[str, Any]:
    """The JSON body of ``POST /responses`` for ``prompt`` (docs/session.md).

    With ``shared_input``, ``input`` is the prompt's own read-only ``wire_input`` when nothing
    trails it, not a copy: for an in-process model, which reads the body and never sends it.
    """
    wire = prompt.wire_input
    body_input: Sequence[Any]
    if shared_input and wire is not None and not prompt.trailing_input:
        body_input = wire
    else:
        body_input = [
            *(wire if wire is not None else [encode_response_item(i) for i in prompt.input]),
            *(dict(extra) for extra in prompt.trailing_input),
        ]
    body: dict[str, Any] = {
        "model": prompt.model,
        "instructions": prompt.instructions,
        "input": body_input,
        "tools": [tool.to_wire() for tool in prompt.tools],
        "tool_choice": prompt.tool_choice,
        "parallel_tool_calls": prompt.parallel_tool_calls,
        "store": False,
        "stream": True,
        "prompt_cache_key": prompt.prompt_cache_key,
    }
    if prompt.max_output_tokens is not None:
        body["max_output_tokens"] = prompt.max_output_tokens
    if prompt.effort is not None:
        body["reasoning"] = {"effort": prompt.effort}
        body["include"] = ["reasoning.encrypted_content"]
    if prompt.output_schema is not None:
        body["text"] = {
            "format": {"type": "json_schema", **json_schema_format(prompt.output_schema)}
        }
    return body


def json_schema_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``name``, ``schema`` and ``strict`` of a JSON Schema response format: the
    Responses API's ``text.format`` holds them beside its ``type``, Chat Completions'
    ``response_format`` under ``json_schema``."""
    return {"name": FORMAT_NAME, "schema": dict(schema), "strict": True}


def compact_request_body(request: CompactRequest) -> dict[str, Any]:
    """The JSON body of ``POST /responses/compact`` (docs/compaction.md)."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": [encode_response_item(item) for item in request.input],
        "instructions": request.instructions,
        "tools": [tool.to_wire() for tool in request.tools],
        "parallel_tool_calls": request.parallel_tool_calls,
    }
    if request.effort is not None:
        body["reasoning"] = {"effort": request.effort}
    return body


def usage_from_json(data: Any) -> p.TokenUsage | None:
    """Token usage from a Responses ``usage`` object, or None if absent or malformed."""
    if not isinstance(data, Mapping):
        return None

    def number(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    input_details = data.get("input_tokens_details") or {}
    output_details = data.get("output_tokens_details") or {}
    input_tokens = number(data.get("input_tokens"))
    output_tokens = number(data.get("output_tokens"))
    total = number(data.get("total_tokens")) or input_tokens + output_tokens
    return p.TokenUsage(
        input_tokens=input_tokens,
        cached_input_tokens=number(
            input_details.get("cached_tokens") if isinstance(input_details, Mapping) else 0
        ),
        output_tokens=output_tokens,
        reasoning_output_tokens=number(
            output_details.get("reasoning_tokens") if isinstance(output_details, Mapping) else 0
        ),
        total_tokens=total,
    )


_RETRY_IN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)", re.IGNORECASE)


def retry_after_from_message(message: str) -> float | None:
    """A wait hinted in an error message ("try again in 1.5s"), in seconds."""
    match = _RETRY_IN.search(message)
    if match is None:
        return None
    value = float(match.group(1))
    return value / 1000 if match.group(2).lower() == "ms" else value


def error_from_payload(error: Any, *, default: str) -> ModelError:
    """Translate an in-stream error object (any of its shapes) into a :class:`ModelError`."""
    if not isinstance(error, Mapping):
        return StreamError(default)
    code = error.get("code")
    message = error.get("message")
    kind = error.get("type")
    text = message if isinstance(message, str) and message else default
    return with_server_counts(
        classify_http_error(
            None,
            code=code if isinstance(code, str) else None,
            message=text,
            type_=kind if isinstance(kind, str) else None,
            retry_after=retry_after_from_message(text),
        ),
        error,
    )


def with_server_counts(error: ModelError, body: object) -> ModelError:
    """``error``, carrying the server's own token counts when it is an overflow whose error
    object (``body``, nested under ``error`` or not) has them: llama-server's
    ``n_prompt_tokens`` (its count of the prompt) and ``n_ctx`` (its window)."""
    if not isinstance(error, ContextWindowExceeded) or not isinstance(body, Mapping):
        return error
    nested = body.get("error")
    fields: Mapping[str, Any] = nested if isinstance(nested, Mapping) else body

    def count(key: str) -> int | None:
        value = fields.get(key)
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        )

    error.prompt_tokens = count("n_prompt_tokens")
    error.context_window = count("n_ctx")
    return error


class ResponseStreamParser:
    """Turns Responses stream events (as dicts) into :data:`ModelEvent` values.

    Raises :class:`ModelError` for ``error`` and ``response.failed`` events, for a
    ``response.incomplete`` other than one cut at the answer limit (which completes the answer)
    and for malformed frames; :meth:`finish` raises :class:`StreamError` when the stream
    ended without ``response.completed``.

    Text that UTF-8 cannot carry (a lone surrogate, which the JSON of a frame may escape) is
    carried with U+FFFD in its place: the parser is where a model's text comes in, and a
    frame a retry would only send again is no reason to fail the turn (docs/decisions.md,
    "Text that UTF-8 cannot carry").
    """

    def __init__(self) -> None:
        self.completed = False

    def feed(self, event: Mapping[str, Any]) -> list[ModelEvent]:
        """The model events carried by one stream event."""
        event = mend_json(event)
        kind = event.get("type")
        match kind:
            case "response.output_text.delta":
                delta = event.get("delta")
                item_id = event.get("item_id")
                if not isinstance(delta, str):
                    raise StreamError("malformed response.output_text.delta: no delta text")
                return [OutputTextDelta(item_id if isinstance(item_id, str) else "", delta)]
            case "response.reasoning_summary_text.delta":
                delta, item_id = event.get("delta"), event.get("item_id")
                index = event.get("summary_index")
                if not isinstance(delta, str):
                    raise StreamError("malformed response.reasoning_summary_text.delta: no delta")
                return [
                    SummaryTextDelta(
                        item_id if isinstance(item_id, str) else "",
                        delta,
                        index if isinstance(index, int) and not isinstance(index, bool) else 0,
                    )
                ]
            case "response.output_item.done":
                try:
                    item = decode_response_item(event.get("item"))
                except DecodeError as exc:
                    raise StreamError(f"malformed output item from the model: {exc}") from exc
                if isinstance(item, p.FunctionCall):
                    # The escape of a lone surrogate inside the arguments' JSON is one too,
                    # once a tool reads them.
                    item = attrs.evolve(item, arguments=mended_arguments(item.arguments))
                return [OutputItemDone(item)]
            case "response.completed":
                response = event.get("response")
                if not isinstance(response, Mapping):
                    raise StreamError("malformed response.completed: no response object")
                self.completed = True
                response_id = response.get("id")
                return [
                    Completed(
                        response_id if isinstance(response_id, str) else "",
                        usage_from_json(response.get("usage")),
                    )
                ]
            case "response.failed":
                response = event.get("response")
                error = response.get("error") if isinstance(response, Mapping) else None
                raise error_from_payload(error, default="the response failed")
            case "response.incomplete":
                response = event.get("response")
                details = (
                    response.get("incomplete_details") if isinstance(response, Mapping) else None
                )
                reason = details.get("reason") if isinstance(details, Mapping) else None
                if reason != CUT_AT_LIMIT or not isinstance(response, Mapping):
                    raise StreamError(f"incomplete response: {reason or 'unknown reason'}")
                # Cut at the answer limit: what arrived is the answer.
                self.completed = True
                response_id = response.get("id")
                return [
                    Completed(
                        response_id if isinstance(response_id, str) else "",
                        usage_from_json(response.get("usage")),
                        incomplete=reason,
                    )
                ]
            case "error":
                nested = event.get("error")
                payload = nested if isinstance(nested, Mapping) else event
                raise error_from_payload(payload, default="the model reported an error")
            case _:
                return []

    def finish(self) -> None:
        """Call when the stream ended; raises if it never completed."""
        if not self.completed:
            raise StreamError("stream closed before response.completed")


def stream_events_for(
    response_id: str,
    output: list[p.ResponseItem],
    usage: p.TokenUsage | None,
    *,
    chunks: int = 2,
) -> list[dict[str, Any]]:
    """The stream events a server sends for a response with this output (used by the models
    of :mod:`relay.testing`)."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
    ]
    for index, item in enumerate(output):
        wire = encode_response_item(item)
        if isinstance(item, p.Message) and item.role == "assistant":
            item_id = item.id or f"{response_id}-msg-{index}"
            wire["id"] = item_id
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**wire, "content": []},
                }
            )
            for piece in _split(item.text(), chunks):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item_id,
                        "output_index": index,
                        "content_index": 0,
                        "delta": piece,
                    }
                )
        else:
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": wire}
            )
            if isinstance(item, p.Reasoning) and item.id:
                events += _summary_deltas(item.id, index, item, chunks)
        events.append({"type": "response.output_item.done", "output_index": index, "item": wire})
    completed: dict[str, Any] = {"id": response_id, "status": "completed", "output": []}
    if usage is not None:
        completed["usage"] = {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_output_tokens},
            "total_tokens": usage.total_tokens,
        }
    events.append({"type": "response.completed", "response": completed})
    return events


def _summary_deltas(
    item_id: str, index: int, item: p.Reasoning, chunks: int
) -> list[dict[str, Any]]:
    """The summary text deltas of a reasoning item, as a server streams them."""
    return [
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": item_id,
            "output_index": index,
            "summary_index": part_index,
            "delta": piece,
        }
        for part_index, part in enumerate(item.summary)
        for piece in _split(part.text, chunks)
    ]


def _split(text: str, chunks: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, chunks)))
    return [text[i : i + size] for i in range(0, len(text), size)]
