"""A loopback model server for trees of sessions: one model script per session, told apart
by each request's ``prompt_cache_key`` (the session's id), the first session to ask taking
the first script, the next one the second, and so on.
:func:`agent_model` runs it in a thread of the test's process and gives the options that make
it the model of ``relay``'s commands.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from relay._models._mock_transport import script_from
from relay._testing._mock_server import MockServer


class ByKey:
    """Model scripts by session: the ``n``-th session to send a request plays the ``n``-th
    script (the last one, once they run out)."""

    def __init__(self, scripts: list[Any]) -> None:
        self.scripts = [script_from(script) for script in scripts]
        self.by_key: dict[str, Any] = {}

    def _script(self, body: Mapping[str, Any]) -> Any:
        key = str(body.get("prompt_cache_key"))
        if key not in self.by_key:
            self.by_key[key] = self.scripts[min(len(self.by_key), len(self.scripts) - 1)]
        return self.by_key[key]

    def for_agent(self, agent: str | None) -> ByKey:
        return self

    def plan(self, body: Mapping[str, Any], *, purpose: str = "turn") -> Any:
        return self._script(body).plan(body, purpose=purpose)

    def plan_compact(self, body: Mapping[str, Any]) -> Any:
        return self._script(body).plan_compact(body)


@contextmanager
def agent_model(folder: Path, *scripts: Any) -> Iterator[list[str]]:
    """A running server of ``scripts`` (one per session, in the order they first ask), in a
    thread of the test's process, with its own event loop: the options that make it the model
    of a ``relay`` command. ``folder`` keeps the scripts, for reading after a failure."""
    (folder / "scripts.json").write_text(json.dumps(list(scripts)), encoding="utf-8")
    ready = threading.Event()
    held: dict[str, Any] = {}

    async def serve() -> None:
        server = MockServer(None, keep_requests=0)
        server.script = ByKey(list(scripts))  # type: ignore[assignment]
        async with trio.open_nursery() as nursery:
            held["base_url"] = await nursery.start(server.serve, "127.0.0.1", 0)
            held["token"], held["stop"] = trio.lowlevel.current_trio_token(), nursery.cancel_scope
            ready.set()

    thread = threading.Thread(target=trio.run, args=(serve,), daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the model server did not start"
        base_url = held["base_url"]
        yield [
            "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={json.dumps(base_url)}",
        ]  # fmt: skip
    finally:
        if "token" in held:
            held["token"].run_sync_soon(held["stop"].cancel)
        thread.join(30)
