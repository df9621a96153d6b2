"""A turn's final answer read and checked against its output schema off the event loop.

The check is bounded (``relay._base._schema_check``) but may still take seconds on a large
answer or a schema that multiplies the work; on the loop it would hold up every session the
loop serves (the app-server's threads) and the handling of signals. So a turn runs it in a
worker thread, as real work (:func:`~._real_work.in_thread`). An abort does not wait for it:
the thread is left to finish its bounded work, and its result is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._base._output_schema import parse_output
from ._real_work import in_thread


async def read_output(text: str | None, schema: Mapping[str, Any]) -> Any:
    """The JSON value of ``text``, a turn's final answer, checked against ``schema`` (a
    JSON Schema that ``relay.UserTurn`` accepted) in a worker thread, in bounded work.

    Raises:
        relay.ModelError: ``invalid_output``, naming what did not fit: the answer is missing,
            is not JSON (``the answer is not JSON: ...``), does not fit the schema (the path
            of the first value that does not, and why), or goes over a bound of the check
            (``the answer is nested more than 64 levels deep, ...``, ``checking the answer
            against the output schema takes more than 500,000 steps, ...``).
    """
    return await in_thread(parse_output, text, schema, abandon_on_cancel=True)


__all__ = ["read_output"]
