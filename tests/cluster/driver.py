"""A client process for the tests of a deployment: run with ``python tests/cluster/driver.py``
inside the cluster's network namespace. It prints one JSON object per line.

- ``open``: open sessions (left running), run turns in each, optionally start one more turn
  that a tool keeps busy; print each session.
- ``follow``: follow sessions from now; print every event; once every session has moved
  (``session_resumed``), run one more turn in each; print ``done``.
- ``watch``: follow sessions from the event after ``--after``; print every event until each
  session has shut down; print ``done``.
- ``again``: attach to each session in turn, run one more turn in it; print where it ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio

import relay
from relay.cluster import ClusterSession, connect


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def turn(text: str) -> relay.UserTurn:
    return relay.UserTurn(items=[relay.Text(text)])


async def until(events: Any, kind: type, turn_id: str | None = None) -> list[relay.Event]:
    seen = []
    async for event in events:
        seen.append(event)
        if isinstance(event.msg, kind) and (turn_id is None or event.id == turn_id):
            return seen
    raise RuntimeError(f"the stream ended before {kind.__name__}")


async def open_sessions(args: argparse.Namespace) -> None:
    config = relay.Config(
        model_script=args.model, rollout=relay.RolloutConfig(dir=args.rollout_dir)
    )
    async with connect(args.address, namespace=args.namespace) as client, AsyncExitStack() as stack:
        opened = []
        for n in range(args.count):
            session = await stack.enter_async_context(client.open_session(config))
            session.detach()
            events = aiter(session.events())
            done = []
            for k in range(args.turns):
                turn_id = await session.submit(turn(f"turn {k} of {n}"), id=f"s{n}-t{k}")
                await until(events, relay.TurnComplete, turn_id)
                done.append(turn_id)
            opened.append((n, session, events, done))
        # The busy turns start together, once every session is open: each is still at work
        # when the caller goes on, however long the opening took on a loaded machine.
        for n, session, events, done in opened:
            busy = None
            if args.busy:
                busy = await session.submit(turn(f"busy {n}"), id=f"s{n}-busy")
                await until(events, relay.ItemStarted)
            say(
                id=session.id,
                host=session.host,
                rollout=session.rollout_path,
                completed=done,
                busy=busy,
                seq=session.taken_seq,
            )


async def follow(args: argparse.Namespace) -> None:
    async with connect(args.address, namespace=args.namespace) as client, AsyncExitStack() as stack:
        sessions: list[ClusterSession] = [
            await stack.enter_async_context(client.attach(key)) for key in args.sessions
        ]
        say(ready=True, at=time.time())
        moved = anyio.Event()
        pending = {session.id for session in sessions}
        finished = {session.id: anyio.Event() for session in sessions}

        async def read(session: ClusterSession) -> None:
            async for event in session.events():
                msg = relay.lowlevel.to_json(event.msg)
                say(
                    session=session.id,
                    seq=event.seq,
                    id=event.id,
                    type=msg["type"],
                    epoch=session.epoch,
                    host=session.host,
                    at=time.time(),
                    msg=msg,
                )
                if isinstance(event.msg, relay.SessionResumed):
                    pending.discard(session.id)
                    if not pending:
                        moved.set()
                if isinstance(event.msg, relay.TurnComplete) and event.id.endswith("-after"):
                    finished[session.id].set()

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(read, session)
            await moved.wait()
            for session in sessions:
                await session.submit(turn("after the move"), id=f"{session.id[:8]}-after")
            for session in sessions:
                await finished[session.id].wait()
            say(done=True, at=time.time())
            tg.cancel_scope.cancel()


async def watch(args: argparse.Namespace) -> None:
    async with connect(args.address, namespace=args.namespace) as client, AsyncExitStack() as stack:
        sessions: list[ClusterSession] = [
            await stack.enter_async_context(client.attach(key, after=args.after))
            for key in args.sessions
        ]
        say(ready=True, at=time.time())

        async def read(session: ClusterSession) -> None:
            async for event in session.events():
                msg = relay.lowlevel.to_json(event.msg)
                say(session=session.id, seq=event.seq, id=event.id, type=msg["type"])

        async with anyio.create_task_group() as tg:
            for session in sessions:
                tg.start_soon(read, session)
        say(done=True, at=time.time())


async def again(args: argparse.Namespace) -> None:
    async with connect(args.address, namespace=args.namespace) as client:
        for key in args.sessions:
            async with client.attach(key) as session:
                events = aiter(session.events())
                turn_id = await session.submit(turn("once more"), id=f"{key[:8]}-again")
                seen = await until(events, relay.TurnComplete, turn_id)
                say(id=key, host=session.host, epoch=session.epoch, seen=len(seen))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["open", "follow", "watch", "again"])
    parser.add_argument("sessions", nargs="*")
    parser.add_argument("--address", required=True)
    parser.add_argument("--namespace", default="relay")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--rollout-dir")
    parser.add_argument("--after", type=int)
    args = parser.parse_args()
    actions = {"open": open_sessions, "follow": follow, "watch": watch, "again": again}
    anyio.run(actions[args.action], args, backend="asyncio")


if __name__ == "__main__":
    sys.exit(main())
