"""Embed a relay session in a trio program: submit a turn, print what happens."""

import trio

import runtime
from runtime.testing import ScriptedModel

MODEL = ScriptedModel(
    {
        "responses": [
            {"function_call": {"name": "list_dir", "arguments": {"path": "."}, "call_id": "c1"}},
            {"text": "I looked around; the listing is above."},
        ]
    }
)


async def main() -> None:
    config = runtime.Config(rollout=runtime.RolloutConfig(enabled=False))
    async with runtime.open_session(config, model=MODEL) as session:
        await session.submit(runtime.UserTurn(items=[runtime.Text("Look around.")]))
        async for event in session.events():
            match event.msg:
                case runtime.ItemCompleted(item=runtime.ToolCallItem(name=name)):
                    print(f"tool {name} ran")
                case runtime.AgentMessage(message=text):
                    print(f"model: {text}")
                case runtime.TurnComplete():
                    await session.submit(runtime.Shutdown())
                case runtime.ShutdownComplete():
                    print("done")


if __name__ == "__main__":
    trio.run(main)
