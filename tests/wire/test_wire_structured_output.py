"""Structured output on both wires, through the openai SDK to the loopback mock server: the
schema goes as the Responses API's ``text.format`` and as Chat Completions'
``response_format``, and the answer is read or refused (docs/session.md, Structured output).

These use the real clock (sockets do not run in virtual time) and wait for nothing but the
answers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import relay
from relay import testing
from relay._testing._mock_server import MockServer, open_mock_server
from relay._wire import open_http_client

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "population": {"type": "integer"},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
FIELDS = {"name": "codex_output_schema", "schema": SCHEMA, "strict": True}
WIRES = ("responses", "chat")
PATHS = {"responses": "/v1/responses", "chat": "/v1/chat/completions"}


def format_of(wire: str, body: dict[str, Any]) -> Any:
    """The response format a request body asks for, in its wire's place (None: none)."""
    if wire == "chat":
        return body.get("response_format")
    return body.get("text", {}).get("format")


def asked(wire: str) -> dict[str, Any]:
    """The response format of a request that asks for ``SCHEMA`` on ``wire``."""
    if wire == "chat":
        return {"type": "json_schema", "json_schema": FIELDS}
    return {"type": "json_schema", **FIELDS}


@asynccontextmanager
async def session_over(
    wire: str, script: dict[str, Any]
) -> AsyncIterator[tuple[testing.TestSession, MockServer]]:
    async with open_mock_server(script) as server:
        assert server.base_url is not None
        provider = relay.ProviderConfig(name="mock", base_url=server.base_url, wire_api=wire)
        config = relay.Config(
            rollout=relay.RolloutConfig(enabled=False),
            model_provider="mock",
            model_providers={"mock": provider},
        )
        async with (
            open_http_client(provider, api_key="sk-test") as client,
            testing.open_test_session(model=client, config=config) as t,  # type: ignore[arg-type]
        ):
            yield t, server


@pytest.mark.parametrize("wire", WIRES)
async def test_every_request_of_the_turn_asks_for_the_schema_and_the_answer_is_read(
    wire: str,
) -> None:
    script = {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {"path": "."}}},
            {"json": {"city": "Oslo", "population": 709000}},
            "In words: Oslo.",
        ]
    }
    async with session_over(wire, script) as (t, server):
        answer = await t.session.ask("Which city, and how many live there?", output_schema=SCHEMA)
        after = await t.session.ask("Say it in words.")
    assert answer.output == {"city": "Oslo", "population": 709000}
    assert answer.message == '{"city": "Oslo", "population": 709000}'
    assert (after.message, after.output) == ("In words: Oslo.", None)
    assert [entry["path"] for entry in server.requests] == [PATHS[wire]] * 3
    bodies = [entry["body"] for entry in server.requests]
    assert [format_of(wire, body) for body in bodies] == [asked(wire), asked(wire), None]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Oslo, about 709,000.", "invalid_output: the answer is not JSON: Expecting value"),
        (
            {"json": {"city": "Oslo", "population": "709k"}},
            "invalid_output: the answer does not fit the output schema at $.population: "
            "'709k' is not of type 'integer'",
        ),
    ],
    ids=["prose", "misfit"],
)
async def test_an_answer_that_does_not_fit_fails_the_turn(wire: str, reply: Any, why: str) -> None:
    async with session_over(wire, {"responses": [reply]}) as (t, _):
        with pytest.raises(relay.TurnFailed) as failed:
            await t.session.ask("Which city?", output_schema=SCHEMA)
    assert str(failed.value).startswith(f"turn sub-1 failed: {why}")
    (complete,) = t.recorder.of_type(relay.TurnComplete)
    assert complete.output is None
