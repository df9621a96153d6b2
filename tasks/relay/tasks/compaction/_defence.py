"""What keeps a tool output from steering a summary (docs/compaction.md, "What a tool output
cannot make a summary say").

A tool output is data the session received, never an instruction to the model that writes
the summary. With ``compaction.tool_outputs_as_data`` on (the default), the summary request
sees every tool output inside a fence that names it as such, and the prompt says that
nothing inside one is addressed to the model. These are plain functions over the history the
request is made of; the live history is never changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

import relay

OPEN = '<tool_output call="{call}">'
CLOSE = "</tool_output>"
#: How a closing marker inside an output is written, so no output can end its own fence.
ESCAPED_CLOSE = "<\\/tool_output>"


def fence(call_id: str, output: str) -> str:
    """``output`` inside a fence that names the call it answers."""
    call = call_id.replace('"', "'")
    return f"{OPEN.format(call=call)}\n{output.replace(CLOSE, ESCAPED_CLOSE)}\n{CLOSE}"


def fenced(history: Sequence[relay.ResponseItem]) -> list[relay.ResponseItem]:
    """``history`` with every tool output fenced (:func:`fence`); other items as they are."""
    out: list[relay.ResponseItem] = []
    for item in history:
        if isinstance(item, relay.FunctionCallOutput | relay.CustomToolCallOutput):
            item = attrs.evolve(item, output=fence(item.call_id, item.output))
        out.append(item)
    return out


__all__ = ["CLOSE", "ESCAPED_CLOSE", "OPEN", "fence", "fenced"]
