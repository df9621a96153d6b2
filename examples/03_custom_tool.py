"""Give the model a tool of your own: a name, a JSON schema and an async function."""

from collections.abc import Mapping
from typing import Any

import trio

import runtime
from runtime.testing import ScriptedModel


async def count_words(args: Mapping[str, Any], ctx: runtime.ToolContext) -> str:
    text = args.get("text")
    if not isinstance(text, str):
        # A ToolError becomes the tool's output: the model reads it and can try again.
        raise runtime.ToolError("text must be a string")
    return str(len(text.split()))


WORD_COUNT = runtime.Tool(
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
    config = runtime.Config(rollout=runtime.RolloutConfig(enabled=False))
    async with runtime.open_session(config, model=MODEL, tools=[WORD_COUNT]) as session:
        await session.submit(runtime.UserTurn(items=[runtime.Text("How many words?")]))
        async for event in session.events():
            match event.msg:
                case runtime.ItemCompleted(item=runtime.ToolCallItem(name=name, output=output)):
                    print(f"{name} -> {output}")
                case runtime.TurnComplete(last_agent_message=text):
                    print(f"model: {text}")
                    await session.submit(runtime.Shutdown())


if __name__ == "__main__":
    trio.run(main)
