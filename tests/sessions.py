"""Sessions and configurations the tests share instead of copying."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs

import relay
from relay import testing
from relay._wire import open_http_client


@asynccontextmanager
async def sdk_session(
    script: dict[str, Any], config: relay.Config, *, api_key: str = "sk-test"
) -> AsyncIterator[tuple[testing.TestSession, testing.ScriptedTransport]]:
    """A test session whose model client is relay's HTTP client (the openai SDK) over the
    in-process transport that plays ``script``: the wire, with no socket. The client talks to
    the configured provider, at a base URL of its own."""
    http, transport = testing.scripted_http_client(script)
    provider = attrs.evolve(config.provider(), base_url="http://model.test/v1")
    async with (
        open_http_client(provider, api_key=api_key, http_client=http) as client,
        testing.open_test_session(config=config, model=client) as t,  # type: ignore[arg-type]
    ):
        yield t, transport


def codex_compacted_history(config: relay.Config | None = None) -> relay.Config:
    """``config`` (by default a test session's: no rollout) with relay's additions to a
    compacted history turned off: the work-state record, the files read placed back, and the
    cache-aware placement. A compaction then makes the history Codex makes."""
    config = config or relay.Config(rollout=relay.RolloutConfig(enabled=False))
    return attrs.evolve(
        config,
        features=attrs.evolve(config.features, work_state=False),
        recent_reads_token_budget=0,
        compaction=attrs.evolve(config.compaction, placement="codex"),
    )
