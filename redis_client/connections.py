"""The connection classes every client of ``redis_client.connect`` uses: redis-py's, with
two of its failures made what they are.

A cancellation is never lost. On Python 3.11 ``asyncio.wait_for`` returns its inner
awaitable's result and drops a cancellation that lands as that awaitable completes
(CPython gh-86296, fixed in 3.12), and redis-py sends every command inside one
(``wait_for(writer.drain(), socket_timeout)``). A task cancelled then carries on as if it
had not been: a reader blocked in ``XREAD`` (``sync.subscriber``) read on until its block
ran out, and a process's shutdown waited a second for it (seen in every fourth test that
stopped an origin). A send during which the task was cancelled now ends in
``CancelledError``, the connection dropped (the command's reply would otherwise be read by
its next user).

A cluster node's connection torn down under its user fails as a connection error
(``ClusterConnection``).

The socket timeout bounds each read from the socket, not each reply (``TimesSocketReads``).
redis-py puts every reply it reads under its own ``asyncio.timeout``, a timer made and
cancelled per reply: for a pipeline of a thousand commands, whose replies arrive in a few
reads, a thousand timers, about a sixth of a stream worker's time when profiled. A
read that waits longer than ``socket_timeout`` still fails as redis-py's ``TimeoutError``
and drops the connection; a caller's own timeout for one read (a blocking read's) is kept.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from redis._parsers import _AsyncHiredisParser
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import HIREDIS_AVAILABLE

# What using a connection torn down under its user raises (see ``ClusterConnection``).
TORN_DOWN = (AttributeError, RuntimeError)


class KeepsCancellation(AbstractConnection):
    """A connection whose sends never swallow their task's cancellation."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        task = asyncio.current_task()
        before = 0 if task is None else task.cancelling()
        await super().send_packed_command(command, check_health)
        if task is not None and task.cancelling() > before:
            await self.disconnect(nowait=True)
            raise asyncio.CancelledError


class SocketTimedParser(_AsyncHiredisParser):
    """hiredis's parser, the connection's socket timeout applied to each read from the
    socket (``TimesSocketReads``)."""

    timeout_s: float | None = None

    def on_connect(self, connection: Any) -> None:
        super().on_connect(connection)  # type: ignore[no-untyped-call]
        self.timeout_s = connection.socket_timeout

    async def read_from_socket(self) -> bool:
        if self.timeout_s is None:
            return bool(await super().read_from_socket())  # type: ignore[no-untyped-call]
        try:
            async with asyncio.timeout(self.timeout_s):
                return bool(await super().read_from_socket())  # type: ignore[no-untyped-call]
        except TimeoutError as exc:
            # Not asyncio's TimeoutError, which redis-py takes for a caller's own timeout
            # (and answers None): its own, which drops the connection and is raised.
            raise RedisTimeoutError("Timeout reading from the socket") from exc


class TimesSocketReads(AbstractConnection):
    """A connection whose socket timeout bounds each socket read, not each reply."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if HIREDIS_AVAILABLE and "parser_class" not in kwargs:
            kwargs["parser_class"] = SocketTimedParser
        super().__init__(*args, **kwargs)

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,  # noqa: ASYNC109 - redis-py's signature
        *,
        disconnect_on_error: bool = True,
        push_request: bool | None = False,
    ) -> Any:
        if timeout is None and isinstance(self._parser, SocketTimedParser):
            timeout = math.inf  # no timer per reply: the parser times its socket reads
        return await super().read_response(
            disable_decoding,
            timeout,
            disconnect_on_error=disconnect_on_error,
            push_request=push_request,
        )


class NodeConnection(TimesSocketReads, KeepsCancellation, Connection):
    """A node's connection over TCP."""


class TLSNodeConnection(TimesSocketReads, KeepsCancellation, SSLConnection):
    """A node's connection over TLS (``rediss://``)."""


class SocketNodeConnection(TimesSocketReads, KeepsCancellation, UnixDomainSocketConnection):
    """A node's connection over a Unix socket (``unix://``)."""


class ClusterConnection(KeepsCancellation, Connection):
    """A cluster node's connection that fails like a connection when it is torn down
    under its user. redis-py 8.1's asyncio cluster client disconnects a node's connections
    when it refreshes the cluster's layout (after a ``MOVED`` storm or ``CLUSTERDOWN``,
    both seen around a failover), including connections another task is using; that task
    then meets ``AttributeError`` (its socket writer or reader is gone) or, under uvloop,
    ``RuntimeError`` (its transport is closed), which the client neither retries nor maps
    to a ``RedisError``. Here it becomes the ``ConnectionError`` it is, which the client
    retries on the refreshed layout (measured: a few per failover under 24 concurrent
    callers, ``tests/integration/test_redis_cluster.py``)."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        try:
            await super().send_packed_command(command, check_health)
        except TORN_DOWN as exc:
            raise RedisConnectionError("connection closed while in use") from exc

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except TORN_DOWN as exc:
            raise RedisConnectionError("connection closed while in use") from exc


class TLSClusterConnection(ClusterConnection, SSLConnection):
    """A cluster node's connection over TLS (``redis-cluster://`` with ``tls=1``)."""


# redis-py's class for a URL's scheme → ours.
NODE_CONNECTIONS: dict[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: NodeConnection,
    SSLConnection: TLSNodeConnection,
    UnixDomainSocketConnection: SocketNodeConnection,
}
