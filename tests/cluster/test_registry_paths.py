"""The registry's check that every serving host reads a session's model script and cwd."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import relay
from relay._cluster._registry import HostRecord, ReadablePaths, Registry


class Host:
    """A host's handle that answers ``unreadable`` as a host would, for the paths it refuses."""

    def __init__(self, refused: dict[str, str]) -> None:
        self.refused = refused
        self.asked: list[list[str]] = []
        self.unreadable = self

    def remote(self, paths: list[str]) -> Any:
        self.asked.append(list(paths))

        async def answer() -> dict[str, str]:
            return {p: self.refused[p] for p in paths if p in self.refused}

        return answer()


def registry_with(host: Host) -> Registry:
    registry = Registry("relay", 10.0, "/shared", detached=False)
    registry._ray = SimpleNamespace(exceptions=SimpleNamespace(RayActorError=RuntimeError))
    registry._hosts["h1"] = HostRecord("h1", host, None, 0, 1.0, state="serving")
    return registry


def test_a_path_a_host_could_not_read_is_asked_again_once_it_can() -> None:
    host = Host({"/models/m.json": "no such file"})
    registry = registry_with(host)
    config = relay.Config(model_script="/models/m.json")
    refused = asyncio.run(registry._unreadable_paths(config))
    assert refused is not None and "host h1 cannot read the model script" in refused
    host.refused.clear()  # the mount came back
    assert asyncio.run(registry._unreadable_paths(config)) is None
    assert asyncio.run(registry._unreadable_paths(config)) is None
    assert host.asked == [["/models/m.json"], ["/models/m.json"]]  # readable: asked no more


def test_readable_paths_are_kept_per_host_and_bounded() -> None:
    seen = ReadablePaths(kept=2)
    assert seen.unknown("h1", ["/a", "/b"]) == ["/a", "/b"]
    seen.readable("h1", "/a")
    assert seen.unknown("h1", ["/a", "/b"]) == ["/b"]
    assert seen.unknown("h2", ["/a"]) == ["/a"]
    seen.readable("h1", "/b")
    seen.readable("h2", "/a")
    assert seen.unknown("h1", ["/a", "/b"]) == ["/a"]  # the oldest went first
    assert seen.unknown("h2", ["/a"]) == []
