"""The registry's check that every serving host reads a session's model script and cwd, and
loads the factory of each of its tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import relay
from relay._cluster._checks import Confirmed, session_problem, unloadable
from relay._cluster._registry import HostRecord

RAY = SimpleNamespace(exceptions=SimpleNamespace(RayActorError=RuntimeError))


class Call:
    """One method of a host's handle, answered as a host would for what it refuses."""

    def __init__(self, refused: dict[str, str]) -> None:
        self.refused = refused
        self.asked: list[list[str]] = []

    def remote(self, needs: list[str] | dict[str, str]) -> Any:
        self.asked.append(list(needs))

        async def answer() -> dict[str, str]:
            return {key: self.refused[key] for key in needs if key in self.refused}

        return answer()


class Host:
    def __init__(
        self, paths: dict[str, str] | None = None, tasks: dict[str, str] | None = None
    ) -> None:
        self.unreadable = Call(paths or {})
        self.unloadable = Call(tasks or {})


def serving(host: Host) -> list[HostRecord]:
    return [HostRecord("h1", host, None, 0, 1.0, state="serving")]


def test_a_path_a_host_could_not_read_is_asked_again_once_it_can() -> None:
    host = Host(paths={"/models/m.json": "no such file"})
    confirmed = Confirmed()
    config = relay.Config(model_script="/models/m.json")

    def check() -> str | None:
        return asyncio.run(session_problem(RAY, serving(host), confirmed, config))

    refused = check()
    assert refused is not None and "host h1 cannot read the model script" in refused
    host.unreadable.refused.clear()  # the mount came back
    assert check() is None
    assert check() is None
    # Readable: asked no more.
    assert host.unreadable.asked == [["/models/m.json"], ["/models/m.json"]]


def test_a_task_a_host_cannot_load_names_the_op_type_and_is_asked_again_once_it_can() -> None:
    host = Host(tasks={"shout": "cannot import shoutpkg: No module named 'shoutpkg'"})
    confirmed = Confirmed()
    config = relay.Config(tasks={"shout": "shoutpkg.tasks:shout"})

    def check() -> str | None:
        return asyncio.run(session_problem(RAY, serving(host), confirmed, config))

    refused = check()
    assert refused == (
        "host h1 cannot load the task of op 'shout' (cannot import shoutpkg: No module named "
        "'shoutpkg'): every host must, since a session moves between them; relay cluster up "
        "--task carries a module to a deployment's hosts, or install it on every node"
    )
    host.unloadable.refused.clear()
    assert check() is None
    assert check() is None
    assert host.unloadable.asked == [["shout"], ["shout"]]


def test_a_host_loads_a_factory_it_can_import_and_names_the_op_of_one_it_cannot(
    tmp_path: Path,
) -> None:
    module = tmp_path / "shouting.py"
    module.write_text("def shout(op):\n    return None\n\nLOUD = 3\n", encoding="utf-8")
    found = unloadable(
        {
            "shout": f"{module}:shout",
            "loud": f"{module}:LOUD",
            "gone": "relay_no_such_package.tasks:make",
        }
    )
    assert set(found) == {"loud", "gone"}
    assert found["loud"] == f"factory '{module}:LOUD' is not callable"
    assert "cannot import relay_no_such_package.tasks" in found["gone"]


def test_what_hosts_could_do_is_kept_per_host_and_bounded() -> None:
    seen = Confirmed(kept=2)
    assert seen.unknown("h1", ["/a", "/b"]) == ["/a", "/b"]
    seen.confirm("h1", "/a")
    assert seen.unknown("h1", ["/a", "/b"]) == ["/b"]
    assert seen.unknown("h2", ["/a"]) == ["/a"]
    seen.confirm("h1", "/b")
    seen.confirm("h2", "/a")
    assert seen.unknown("h1", ["/a", "/b"]) == ["/a"]  # the oldest went first
    assert seen.unknown("h2", ["/a"]) == []
