"""Give the model a tool of your own: a name, a JSON schema and an async function."""

from collections.abc import Mapping
from typing import Any

import trio

import relay
from relay.testing import ScriptedModel


async def count_words(args: Mapping[str, Any], ctx: relay.ToolContext) -> str:
    text = args.get("text")
    if not isinstance(text, str):
        # A ToolError becomes the tool's output: the model reads it and can try again.
        raise relay.ToolError("text must be a string")
    return str(len(text.split()))


WORD_COUNT = relay.Tool(
    name="count_words",
    description="Count the words of a text.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    handler=count_words,
)

MODEL = ScriptedModel(
    {
        "responses": [
            {
                "function_call": {
                    "name": "count_words",
                    "arguments": {"text": "structured concurrency is a good idea"},
                }
            },
            {"text": "That sentence has six words."},
        ]
    }
)


async def main() -> None:
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config, model=MODEL, tools=[WORD_COUNT]) as session:
        await session.submit(relay.UserTurn(items=[relay.Text("How many words?")]))
        async for event in session.events():
            match event.msg:
                case relay.ItemCompleted(item=relay.ToolCallItem(name=name, output=output)):
                    print(f"{name} -> {output}")
                case relay.TurnComplete(last_agent_message=text):
                    print(f"model: {text}")
                    await session.submit(relay.Shutdown())


if __name__ == "__main__":
    trio.run(main)
