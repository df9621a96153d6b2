"""Embed a relay session in an asyncio program: the same API, another event loop."""

import asyncio

import relay


async def main() -> None:
    # No model script: the embedded scripted model echoes the user's text.
    config = relay.Config(rollout=relay.RolloutConfig(enabled=False))
    async with relay.open_session(config) as session:
        for text in ["first question", "second question"]:
            await session.submit(relay.UserTurn(items=[relay.Text(text)], on_busy="queue"))
        done = 0
        async for event in session.events():
            if isinstance(event.msg, relay.TurnComplete):
                print(f"{event.id}: {event.msg.last_agent_message}")
                done += 1
                if done == 2:
                    await session.submit(relay.Shutdown())


if __name__ == "__main__":
    asyncio.run(main())
