"""Sessions on a Ray cluster, which outlive their caller and move when their host is lost
(see ``docs/cluster.md``).

Needs the ``ray`` extra (``pip install 'relay-runtime[ray]'``); Ray is imported only when a
cluster is used. Run on asyncio: Ray's futures are asyncio futures.

A deployment started with ``relay cluster up``, from any number of processes::

    async with connect("ray-head:6379", namespace="relay") as client:
        async with client.open_session(relay.Config()) as session:
            await session.submit(relay.UserTurn(items=[relay.Text("hi")]))
            async for event in session.events():
                ...
        async with client.attach(session_id, after=57) as session:  # another process's
            ...

Hosts for the block of one program (Ray connected already)::

    async with open_session_pool(hosts=2) as pool:
        async with pool.open_session() as session:
            ...
"""

from ._cluster._client import ClusterClient as ClusterClient
from ._cluster._client import connect as connect
from ._cluster._deploy import PooledSession as PooledSession
from ._cluster._deploy import SessionPool as SessionPool
from ._cluster._deploy import open_session_pool as open_session_pool
from ._cluster._script import run_op_script as run_op_script
from ._cluster._session import ClusterSession as ClusterSession
from ._cluster._session import HostLostError as HostLostError
from ._cluster._session import NoHostError as NoHostError
from ._core._writer import Epoch as Epoch

__all__ = [
    "ClusterClient",
    "ClusterSession",
    "Epoch",
    "HostLostError",
    "NoHostError",
    "PooledSession",
    "SessionPool",
    "connect",
    "open_session_pool",
    "run_op_script",
]
