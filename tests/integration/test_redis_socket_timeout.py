"""The socket timeout bounds each read from the socket, not each reply
(``redis_client.connections.TimesSocketReads``): a server that stops answering still fails
a command with redis-py's ``TimeoutError`` after ``socket_timeout`` and the connection is
dropped; a pipeline's thousands of replies are read without a timer each."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from redis_client.client import RedisClient, connect
from redis_client.connections import SocketTimedParser

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def serving(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"redis://127.0.0.1:{port}/0"


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(-1)  # reads every command, answers none
    writer.close()


async def half_a_reply(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readline()
    writer.write(b"$10\r\nhalf")  # a bulk string of 10 bytes, 4 of them sent
    await writer.drain()
    await reader.read(-1)
    writer.close()


@pytest.fixture
async def slow_servers() -> AsyncIterator[list[asyncio.Server]]:
    servers: list[asyncio.Server] = []
    yield servers
    for server in servers:
        server.close()


@pytest.mark.parametrize("handler", [silent, half_a_reply], ids=["silent", "half-a-reply"])
async def test_a_server_that_stops_answering_times_out_and_the_connection_goes(
    slow_servers: list[asyncio.Server], handler: Handler
) -> None:
    server, url = await serving(handler)
    slow_servers.append(server)
    client = connect(url, socket_timeout=0.3)
    started = time.perf_counter()
    with pytest.raises(RedisTimeoutError):
        await client.get("k")
    took = time.perf_counter() - started
    assert 0.25 <= took < 2.0
    pool = client.connection_pool  # type: ignore[union-attr]
    assert not pool._in_use_connections
    await client.aclose()


async def test_a_pipelines_replies_are_read_without_a_timer_each(redis: RedisClient) -> None:
    connection = await redis.connection_pool.get_connection()  # type: ignore[union-attr]
    try:
        assert isinstance(connection._parser, SocketTimedParser)
    finally:
        await redis.connection_pool.release(connection)  # type: ignore[union-attr]
    async with redis.pipeline(transaction=False) as pipe:
        for n in range(5000):
            pipe.set(f"timeout-test:{n}", n)
        for n in range(5000):
            pipe.get(f"timeout-test:{n}")
        replies = await pipe.execute()
    assert replies[5000:] == [str(n).encode() for n in range(5000)]
