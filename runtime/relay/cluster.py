"""Sessions on a Ray cluster, with failover through the rollout (see ``docs/cluster.md``).

Needs the ``ray`` extra (``pip install 'relay-runtime[ray]'``); Ray is imported only when a
pool is opened. Connect first (``ray.init(...)``) and run on asyncio::

    async with open_session_pool(hosts=2) as pool:
        async with pool.open_session() as session:
            await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
            async for event in session.events():
                ...
"""

from ._base._protocol import SessionResumed as SessionResumed
from ._cluster._pool import HostLostError as HostLostError
from ._cluster._pool import NoHostError as NoHostError
from ._cluster._pool import PooledSession as PooledSession
from ._cluster._pool import SessionPool as SessionPool
from ._cluster._pool import open_session_pool as open_session_pool
from ._cluster._script import run_op_script as run_op_script

__all__ = [
    "HostLostError",
    "NoHostError",
    "PooledSession",
    "SessionPool",
    "SessionResumed",
    "open_session_pool",
    "run_op_script",
]
