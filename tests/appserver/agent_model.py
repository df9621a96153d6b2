"""A loopback model server for trees of sessions: one model script per session, told apart
by each request's ``prompt_cache_key`` (the session's id), the first session to ask taking
the first script, the next one the second, and so on.

Run as a program (``python agent_model.py SCRIPTS.json``, a JSON list of model scripts): it
prints its base URL on one line and serves until it is terminated. :func:`agent_model` runs
it for a test and gives the options that make it the model of ``relay``'s commands.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__)


class ByKey:
    """Model scripts by session: the ``n``-th session to send a request plays the ``n``-th
    script (the last one, once they run out)."""

    def __init__(self, scripts: list[Any]) -> None:
        from relay._models._mock_transport import script_from

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


def main(path: str) -> None:
    import trio

    from relay._testing._mock_server import MockServer

    scripts = json.loads(Path(path).read_text(encoding="utf-8"))

    async def run() -> None:
        server = MockServer(None, keep_requests=0)
        server.script = ByKey(scripts)  # type: ignore[assignment]
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                base_url = await nursery.start(server.serve, "127.0.0.1", 0)
                print(base_url, flush=True)
                async for _ in signals:
                    break
                nursery.cancel_scope.cancel()

    trio.run(run)


@contextmanager
def agent_model(folder: Path, *scripts: Any) -> Iterator[list[str]]:
    """A running server of ``scripts`` (one per session, in the order they first ask): the
    options that make it the model of a ``relay`` command."""
    from tests.pipes import LineReader

    file = folder / "scripts.json"
    file.write_text(json.dumps(list(scripts)), encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, str(HERE), str(file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        base_url = LineReader(server.stdout, timeout=30).readline().strip()
        assert base_url.startswith("http://"), base_url
        yield [
            "-c", "model_provider=mock",
            "-c", "model=mock-model",
            "-c", "model_providers.mock.name=mock",
            "-c", f"model_providers.mock.base_url={json.dumps(base_url)}",
        ]  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main(sys.argv[1])
