"""A provider's API key in ``relay app-server`` is the key of the threads on that provider only:
it is taken out of the server's environment (``/proc/PID/environ`` included) when the server
starts, kept in memory for the sessions that read it, and never reaches the commands of any
thread. The real command over pipes, the model served by ``relay mock-server``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .client import AppServer, app_server, mock_server, write_script

#: Thread A's key: long enough to be redacted, and found in no other text.
KEY = "sk-thread-a-8Qw3ZrT1vLmN4pXk"
KEY_ENV = "THREAD_A_PROVIDER_KEY"


def text(value: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": value}]


def keyed_provider(mock_args: list[str]) -> list[str]:
    """``-c`` options of a provider ``keyed`` served by the same mock server, whose key is in
    :data:`KEY_ENV`."""
    prefix = "model_providers.mock.base_url="
    base_url = next(arg.removeprefix(prefix) for arg in mock_args if arg.startswith(prefix))
    return [
        "-c", "model_providers.keyed.name=keyed",
        "-c", f"model_providers.keyed.base_url={base_url}",
        "-c", f"model_providers.keyed.env_key={KEY_ENV}",
    ]  # fmt: skip


def command_output(server: AppServer, thread: str) -> str:
    """The output of the next command ``thread`` runs, once it has completed."""
    item = server.next("item/completed", threadId=thread)["item"]
    while item["type"] != "commandExecution":
        item = server.next("item/completed", threadId=thread)["item"]
    assert item["status"] == "completed", item
    output: str = item["aggregatedOutput"]
    return output


@pytest.mark.slow  # an app-server, its thread's commands and /proc read: about 1.5 s
def test_a_threads_key_reaches_no_command_and_leaves_the_servers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)  # the server's process inherits it
    env_call = {"name": "shell", "arguments": {"argv": ["env"]}, "call_id": "env"}
    script = write_script(
        tmp_path / "model.json",
        "thread A answers",
        {"function_call": env_call},
        "thread B looked",
    )
    with mock_server(script) as mock:
        args = [*mock, *keyed_provider(mock), "-c", "tools.shell=true"]
        with app_server(*args, cwd=tmp_path) as server:
            server.initialize()
            # Thread A runs on the keyed provider: its session finds the key.
            a = server.start_thread(cwd=str(tmp_path), modelProvider="keyed", ephemeral=True)
            server.call("turn/start", {"threadId": a, "input": text("hi")})
            done = server.next("turn/completed", threadId=a)["turn"]
            assert done["status"] == "completed", done
            # Thread B, on a provider without a key, prints its command's environment.
            b = server.start_thread(cwd=str(tmp_path), ephemeral=True)
            server.call("turn/start", {"threadId": b, "input": text("env")})
            output = command_output(server, b)
            assert "PATH=" in output  # the command did print its environment
            assert KEY_ENV not in output
            assert KEY[:12] not in output and KEY[::-1][:12] not in output
            server.next("turn/completed", threadId=b)
            environ = Path(f"/proc/{server.process.pid}/environ").read_bytes()
            for form in (KEY, KEY[::-1]):
                assert form[:12].encode() not in environ, form
            assert server.close_input() == 0
