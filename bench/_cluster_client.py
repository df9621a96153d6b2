"""One client process of the cluster throughput figure (``bench/cluster.py``).

``python -m bench._cluster_client ADDRESS NAMESPACE SESSIONS TURNS ROOT``: connects to the
deployment, opens ``SESSIONS`` sessions, prints ``ready``, waits for a line on standard input,
runs ``TURNS`` turns in every session at once (each turn after the last of its session), prints
``{"turns": N, "start": T0, "end": T1, "cpu": S}`` (wall clock; ``cpu``: this process's CPU
seconds over the turns) and shuts its sessions down.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import AsyncExitStack

import anyio

import relay


async def _main(address: str, namespace: str, sessions: int, turns: int, root: str) -> None:
    from relay.cluster import ClusterSession, connect

    config = relay.Config(cwd=root, rollout=relay.RolloutConfig(dir=f"{root}/sessions"))
    async with connect(address, namespace=namespace) as client, AsyncExitStack() as stack:
        opened: list[ClusterSession] = [
            await stack.enter_async_context(client.open_session(config)) for _ in range(sessions)
        ]
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        start = time.time()
        cpu = time.process_time()

        async def one(session: ClusterSession) -> None:
            events = aiter(session.events())
            for index in range(turns):
                turn_id = await session.submit(
                    relay.UserTurn(items=[relay.Text(f"question {index}")])
                )
                async for event in events:
                    if isinstance(event.msg, relay.TurnComplete) and event.id == turn_id:
                        break

        async with anyio.create_task_group() as tg:
            for session in opened:
                tg.start_soon(one, session)
        end = time.time()
        cpu = time.process_time() - cpu
        print(
            json.dumps({"turns": sessions * turns, "start": start, "end": end, "cpu": cpu}),
            flush=True,
        )


def main() -> None:
    address, namespace, sessions, turns, root = sys.argv[1:6]
    anyio.run(_main, address, namespace, int(sessions), int(turns), root, backend="asyncio")


if __name__ == "__main__":
    main()
