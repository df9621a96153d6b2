"""Embed a relay session in a trio program: submit a turn, print what happens."""

import trio

import relay
from relay.testing import ScriptedModel

MODEL = ScriptedModel(
    {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "c1"}},
            {"text": "I looked around; the listing is above."},
        ]
    }
)


async def main() -> None:
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=MODEL) as session:
        await session.submit(relay.UserTurn(items=[relay.Text("Look around.")]))
        async for event in session.events():
            match event.msg:
                case relay.ItemCompleted(item=relay.ToolCallItem(name=name)):
                    print(f"tool {name} ran")
                case relay.AgentMessage(message=text):
                    print(f"model: {text}")
                case relay.TurnComplete():
                    await session.submit(relay.Shutdown())
                case relay.ShutdownComplete():
                    print("done")


if __name__ == "__main__":
    trio.run(main)
