"""An embedded session that asks before it acts: a callback approves what only reads and
denies the rest (docs/approvals.md).

``approval_policy = "untrusted"`` runs the commands on relay's short list of read-only ones
unasked and asks about every other. The callback, given each request, approves the programs
this program knows to only read (``READERS``) and denies everything else: the model reads
that it was denied, and the turn goes on. The model is scripted (``approvals.model.json``,
beside this file): it lists this folder (``ls``: unasked), sums a file (approved) and tries
to write one (denied). Run it from anywhere:

    python examples/approvals.py

``examples/approvals.jsonl`` is the same session driven by ``relay run``, answered by ops.
"""

from pathlib import Path

import trio

import relay
from relay.testing import ScriptedModel

HERE = Path(__file__).resolve().parent

#: Programs this program knows to only read, besides relay's read-only list.
READERS = frozenset({"du", "md5sum", "sha256sum"})


def approve_reads(request: relay.ExecApprovalRequest) -> relay.ReviewDecision:
    """Approve a command whose program only reads; deny any other call (a tool's too)."""
    command = request.command
    if not isinstance(command, relay.ToolInvocation) and Path(command[0]).name in READERS:
        return relay.ReviewDecision.APPROVED
    return relay.ReviewDecision.DENIED


async def main() -> None:
    config = relay.Config(
        approval_policy="untrusted",
        tools={"shell": True},
        cwd=str(HERE),
        rollout=relay.RolloutConfig(enabled=False),
    )
    model = ScriptedModel(HERE / "approvals.model.json")
    async with relay.open_session(config, model=model, on_approval=approve_reads) as session:
        ask = "Sum approvals.model.json and write the sum to summed.txt."
        await session.submit(relay.UserTurn(items=[relay.Text(ask)]))
        async for event in session.events():
            match event.msg:
                case relay.ExecApprovalRequest(call_id=call_id, command=command, reason=why):
                    shown = command.tool if isinstance(command, relay.ToolInvocation) else command
                    print(f"{call_id} asks: {' '.join(shown)} ({why})")
                case relay.ItemCompleted(item=relay.ToolCallItem(id=call_id, output=output)):
                    first = (output or "").strip().splitlines()[0]
                    print(f"{call_id}: {first}")
                case relay.TurnComplete(last_agent_message=text):
                    print(f"model: {text}")
                    await session.submit(relay.Shutdown())
    print(f"summed.txt written: {(HERE / 'summed.txt').exists()}")


if __name__ == "__main__":
    trio.run(main)
