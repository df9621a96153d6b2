"""The remote V1 backend: the provider compacts the history itself (docs/compaction.md).

The history, normalised and fitted to the context window, goes to ``POST
{base_url}/responses/compact`` through the session's model client (which owns the request's
retries). The answer's ``output`` is checked item by item, then filtered down to what a model
may be shown again: real user messages, assistant messages and ``compaction`` items.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

import relay
from relay.lowlevel import (
    BackendContext,
    BackendResult,
    CompactionFailed,
    CompactionRequest,
    CompactRequest,
    Prompt,
    decode_response_item,
)

from ._history import filter_remote_output, fit_to_window

ERROR_PREFIX = "Error running remote compact task: "


class RemoteV1Backend:
    """Ask the provider's ``/responses/compact`` endpoint for the new history."""

    name = "remote_v1"
    error_prefix = ERROR_PREFIX

    async def compact(self, ctx: BackendContext, request: CompactionRequest) -> BackendResult:
        prompt = fitted_prompt(ctx, request.model)
        answer = await ctx.remote_compact(CompactRequest.of(prompt))
        try:
            output = compact_output(answer)
        except InvalidAnswer as problem:
            raise CompactionFailed(str(problem), relay.ErrorCode.SERVER_ERROR) from problem
        return BackendResult(filter_remote_output(output))


def fitted_prompt(ctx: BackendContext, model: str | None) -> Prompt:
    """A request over the normalised history whose trailing tool outputs were cut down until
    the estimate (base instructions included) fits the model's context window, less the
    answer limit when one is set."""
    prompt = ctx.prompt(model=model)
    window = ctx.budget(prompt.model).window
    if window is not None and prompt.max_output_tokens:
        window = max(0, window - prompt.max_output_tokens)
    fitted = fit_to_window(prompt.input, prompt.instructions, window)
    return attrs.evolve(prompt, input=tuple(fitted))


class InvalidAnswer(ValueError):
    """The answer of ``/responses/compact`` is not ``{"output": [item, ...]}``."""


def compact_output(answer: object) -> list[relay.ResponseItem]:
    """The items of a ``/responses/compact`` answer.

    Raises:
        InvalidAnswer: naming what is wrong: not an object, no ``output``, an ``output`` that
            is not a list, or an entry that is not a response item.
    """
    if not isinstance(answer, Mapping):
        raise InvalidAnswer(f"the answer is not a JSON object (it is {_json_kind(answer)})")
    if "output" not in answer:
        raise InvalidAnswer("the answer has no output")
    output = answer["output"]
    if not isinstance(output, list):
        raise InvalidAnswer(f"output is not a list (it is {_json_kind(output)})")
    items: list[relay.ResponseItem] = []
    for index, entry in enumerate(output):
        try:
            items.append(decode_response_item(entry))
        except relay.DecodeError as exc:
            raise InvalidAnswer(f"output[{index}] is not a valid item: {exc}") from exc
    return items


def _json_kind(value: object) -> str:
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "a list"
        case Mapping():
            return "an object"
        case _:
            return type(value).__name__
