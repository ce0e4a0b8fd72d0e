from __future__ import annotations

import pytest

from redis_client.durable import Durability, NotReplicated


@pytest.mark.parametrize(
    ("durability", "reply", "ok"),
    [
        (Durability(replicas=1), 1, True),
        (Durability(replicas=1), 2, True),
        (Durability(replicas=1), 0, False),
        (Durability(replicas=2), b"1", False),
        (Durability(replicas=2), b"2", True),
        (Durability(replicas=1), None, False),
        (Durability(replicas=0), 0, True),
    ],
)
def test_check(durability: Durability, reply: object, ok: bool) -> None:
    if ok:
        durability.check(reply)
    else:
        with pytest.raises(NotReplicated, match="replicas confirmed"):
            durability.check(reply)


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"replicas": -1}, "replicas"), ({"replicas": 1, "timeout_ms": 0}, "timeout_ms")],
)
def test_bad_settings_are_refused(fields: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Durability(**fields)


def test_no_replica_required_waits_for_none() -> None:
    assert not Durability().waits
    assert Durability(replicas=1).waits
