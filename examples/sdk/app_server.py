"""Drive ``relay app-server`` as any client of Codex's app-server protocol does: JSON-RPC, one
JSON object per line, over the server's standard input and output (docs/codex-compat.md).

The program starts a thread whose commands need approval, runs two turns, and answers each
approval request as a person at a prompt would: yes to the first command, no to the second.
relay's scripted model answers from ``app_server.model.json``, so nothing leaves the machine;
run the server without ``--model-script`` and the configured provider answers instead.

    python examples/sdk/app_server.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class AppServer:
    """A ``relay app-server`` process and the client's end of its protocol."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "relay", "app-server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("relay app-server ended its output")
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its result; what comes before the answer is shown."""
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.receive()
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']['message']}")
                return message["result"]
            self.handle(message)

    def run_turn(self, thread_id: str, prompt: str, *, approve: bool) -> dict[str, Any]:
        """Run one turn; every approval request it makes is answered ``approve``."""
        self.request(
            "turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": prompt}]}
        )
        while True:
            message = self.receive()
            if message.get("method") == "item/commandExecution/requestApproval":
                params = message["params"]
                decision = "accept" if approve else "decline"
                print(f"approve `{params['command']}`? ({params['reason']}) -> {decision}")
                self.send({"id": message["id"], "result": {"decision": decision}})
            elif message.get("method") == "turn/completed":
                turn: dict[str, Any] = message["params"]["turn"]
                return turn
            else:
                self.handle(message)

    def handle(self, message: dict[str, Any]) -> None:
        """Show what a notification says."""
        params = message.get("params", {})
        match message.get("method"):
            case "item/completed" if params["item"]["type"] == "commandExecution":
                item = params["item"]
                print(f"command `{item['command']}`: {item['status']}")
            case "item/completed" if params["item"]["type"] == "agentMessage":
                print(f"model: {params['item']['text']}")

    def close(self) -> int:
        """Close the server's input: it shuts every session down and exits."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(timeout=30)


def main() -> None:
    script = HERE / "app_server.model.json"
    server = AppServer("--model-script", str(script), "-c", "tools.shell=true")
    with tempfile.TemporaryDirectory() as workspace:
        server.request("initialize", {"clientInfo": {"name": "example", "version": "1.0"}})
        server.send({"method": "initialized"})
        thread = server.request(
            "thread/start",
            {"cwd": workspace, "approvalPolicy": "untrusted", "ephemeral": True},
        )["thread"]
        print(f"thread {thread['id']} in {thread['cwd']}")
        first = server.run_turn(thread["id"], "Create notes.txt.", approve=True)
        second = server.run_turn(thread["id"], "Now remove it.", approve=False)
        print(f"turns: {first['status']}, {second['status']}")
        print(f"notes.txt exists: {(Path(workspace) / 'notes.txt').exists()}")
        print(f"relay app-server exited with {server.close()}")


if __name__ == "__main__":
    main()
