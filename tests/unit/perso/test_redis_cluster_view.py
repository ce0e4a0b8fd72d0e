"""Reading a node's view of the cluster (``CLUSTER NODES``): whether any slot is still given
to a node flagged as failing (``perso.redis_cluster.slots_served``)."""

from __future__ import annotations

import pytest

from perso.redis_cluster import slots_served

A = "a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460"
B = "b2 127.0.0.1:7002@17002 master - 0 1 2 connected 5461-10922"
C = "c3 127.0.0.1:7003@17003 master - 0 1 3 connected 10923-16383"
C_FAILED = "c3 127.0.0.1:7003@17003 master,fail - 0 1 3 disconnected 10923-16383"
C_SUSPECT = "c3 127.0.0.1:7003@17003 master,fail? - 0 1 3 disconnected 10923-16383"
C_GONE = "c3 127.0.0.1:7003@17003 master,fail - 0 1 3 disconnected"
F_PROMOTED = "f6 127.0.0.1:7006@17006 master - 0 1 7 connected 10923-16383"
E_REPLICA_FAILED = "e5 127.0.0.1:7005@17005 slave,fail b2 0 1 2 disconnected"


def reply(*lines: str) -> str:
    body = "\n".join(lines) + "\n"
    return f"${len(body)}\r\n{body}\r\n"


@pytest.mark.parametrize(
    ("lines", "served"),
    [
        ((A, B, C), True),  # healthy
        ((A, B, C_FAILED), False),  # a dead primary still holds its slots in this view
        ((A, B, C_SUSPECT), False),  # suspected by this node alone, still holding slots
        ((A, B, C_GONE, F_PROMOTED), True),  # failed over: its replica holds them now
        ((A, B, C, E_REPLICA_FAILED), True),  # a failed replica holds nothing
    ],
)
def test_a_view_is_served_when_no_failing_node_holds_slots(
    lines: tuple[str, ...], served: bool
) -> None:
    assert slots_served(reply(*lines)) is served
