"""A small window and a small model, as llama-server serves them (``tests/runtime/captured.py``):
answer limits, cut answers, overflows only the server can count, slow prompt reading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import pytest
import trio
import trio.testing

import relay
from relay import testing
from relay._wire import open_http_client
from tests.runtime.captured import (
    Answer,
    CapturedServer,
    chat_answer,
    overflow_answer,
    responses_answer,
)

WIRES = ("chat", "responses")
WINDOW = 2048


def provider(wire: str, **fields: Any) -> relay.ProviderConfig:
    table: dict[str, Any] = {
        "name": "llama",
        "base_url": "http://llama.invalid/v1",
        "wire_api": wire,
        "stream_max_retries": 3,
        **fields,
    }
    return relay.ProviderConfig(**table)


def answer(wire: str, pieces: Sequence[str], *, prompt_tokens: int = 149, **kw: Any) -> Answer:
    if wire == "chat":
        return chat_answer(pieces, finish=kw.pop("finish", "stop"), prompt_tokens=prompt_tokens, **kw)
    kw.pop("finish", None)
    return responses_answer(pieces, prompt_tokens=prompt_tokens, **kw)


@asynccontextmanager
async def llama_session(
    wire: str,
    answers: Sequence[Any],
    *,
    provider_fields: dict[str, Any] | None = None,
    **config: Any,
) -> AsyncIterator[tuple[testing.TestSession, CapturedServer]]:
    server = CapturedServer(answers)
    table = provider(wire, **(provider_fields or {}))
    settings: dict[str, Any] = {
        "model": "smollm2",
        "model_provider": "llama",
        "model_providers": {"llama": table},
        "model_context_window": WINDOW,
        "rollout": relay.RolloutConfig(enabled=False),
        **config,
    }
    async with (
        httpx2.AsyncClient(transport=server) as http,
        open_http_client(table, api_key=None, http_client=http) as client,
        testing.open_test_session(model=client, config=relay.Config(**settings)) as t,  # type: ignore[arg-type]
    ):
        yield t, server


def limit_in(wire: str, body: dict[str, Any]) -> Any:
    return body.get("max_tokens" if wire == "chat" else "max_output_tokens")


# -- an answer limit


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({}, None),
        ({"model_max_output_tokens": 64}, 64),
        ({"provider_fields": {"max_output_tokens": 32}}, 32),
        ({"model_max_output_tokens": 64, "provider_fields": {"max_output_tokens": 32}}, 32),
    ],
)
async def test_the_answer_limit_is_sent_on_both_wires(
    wire: str, where: dict[str, Any], expected: int | None, autojump_clock: trio.abc.Clock
) -> None:
    async with llama_session(wire, [answer(wire, ["Paris", "."])], **where) as (t, server):
        await t.turn("What is the capital of France?")
        await t.wait_for(relay.TurnComplete)
    (body,) = server.bodies
    assert limit_in(wire, body) == expected
    other = "max_output_tokens" if wire == "chat" else "max_tokens"
    assert other not in body
    if expected is None:
        assert "max_completion_tokens" not in body


def test_the_answer_limit_is_kept_free_when_fitting_the_window() -> None:
    limit = relay.compaction.auto_compact_limit
    assert limit(None, 2048) == 1843
    assert limit(None, 2048, reserved_output=512) == 1536
    assert limit(None, 272_000, reserved_output=512) == 244_800
    assert limit(1000, 2048, reserved_output=512) == 1000
    assert limit(None, None, reserved_output=512) is None


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["model_max_output_tokens=0"], "model_max_output_tokens must be positive"),
        (
            ['model_providers.l.base_url="http://x/v1"', "model_providers.l.max_output_tokens=-1"],
            "model_providers.l.max_output_tokens must be positive",
        ),
    ],
)
def test_a_bad_answer_limit_is_refused(overrides: list[str], says: str) -> None:
    with pytest.raises(relay.ConfigError, match=says):
        relay.load_config(overrides=overrides)
