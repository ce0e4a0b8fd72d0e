"""Redlock's arithmetic: quorum, drift, validity, the grant rule, fencing and the
majority view (``coordination.redlock``), as tables."""

from __future__ import annotations

import pytest

from coordination.lock import LockInfo
from coordination.redlock import (
    NodeView,
    drift_ms,
    fencing_of,
    granted,
    majority_holder,
    quorum,
    validity_ms,
)


@pytest.mark.parametrize(
    ("nodes", "needed"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)]
)
def test_quorum_is_a_strict_majority(nodes: int, needed: int) -> None:
    assert quorum(nodes) == needed
    # Two quorums always share a node.
    assert 2 * needed > nodes


@pytest.mark.parametrize(
    ("ttl_ms", "drift"), [(1, 2.01), (40, 2.4), (1000, 12.0), (5000, 52.0), (60_000, 602.0)]
)
def test_drift_is_one_percent_plus_two_ms(ttl_ms: int, drift: float) -> None:
    assert drift_ms(ttl_ms) == pytest.approx(drift)


@pytest.mark.parametrize(
    ("ttl_ms", "elapsed_ms", "validity"),
    [
        (10_000, 0.0, 9898.0),
        (10_000, 100.0, 9798.0),
        (10_000, 9898.0, 0.0),
        (10_000, 12_000.0, -2102.0),
        (100, 5.0, 92.0),
        (40, 37.6, 0.0),
    ],
)
def test_validity_is_the_ttl_less_the_round_and_the_drift(
    ttl_ms: int, elapsed_ms: float, validity: float
) -> None:
    assert validity_ms(ttl_ms, elapsed_ms) == pytest.approx(validity)


@pytest.mark.parametrize(
    ("votes", "nodes", "validity", "expected"),
    [
        (3, 3, 100.0, True),
        (2, 3, 100.0, True),  # one node down
        (1, 3, 100.0, False),  # two down
        (0, 3, 100.0, False),
        (3, 3, 0.0, False),  # every vote, but the round ate the TTL
        (3, 3, -5.0, False),
        (2, 3, 0.001, True),
        (3, 5, 1.0, True),
        (2, 5, 1.0, False),
        (2, 4, 1.0, False),  # half is not a majority
        (1, 1, 1.0, True),
    ],
)
def test_a_grant_needs_a_majority_and_time_left(
    votes: int, nodes: int, validity: float, expected: bool
) -> None:
    assert granted(votes, nodes, validity) is expected


@pytest.mark.parametrize(
    ("counters", "fencing", "write_back"),
    [
        ([1], 1, False),
        ([4, 4, 4], 4, False),
        ([4, 4], 4, False),
        ([4, 1], 4, True),  # a node restarted without its data
        ([1, 4], 4, True),
        ([7, 5, 6], 7, True),  # failed attempts drew on some nodes only
    ],
)
def test_the_fencing_token_is_the_highest_counter(
    counters: list[int], fencing: int, write_back: bool
) -> None:
    assert fencing_of(counters) == (fencing, write_back)


def test_fencing_needs_a_granting_node() -> None:
    with pytest.raises(ValueError, match="granting node"):
        fencing_of([])


def test_write_back_keeps_tokens_increasing_where_max_alone_would_not() -> None:
    """Nodes A, B, C at 2; C restarts empty; B is down for a grant on A and C; then A is
    down and B restarts empty for a grant on B and C. Without the write-back C would draw 2
    after a grant of 3."""
    counters = {"a": 2, "b": 2, "c": 0}
    first, write_back = fencing_of([counters["a"] + 1, counters["c"] + 1])
    assert (first, write_back) == (3, True)
    counters.update(a=3, c=first)  # the write-back lifted C
    counters["b"] = 0
    second, _ = fencing_of([counters["b"] + 1, counters["c"] + 1])
    assert second == 4 > first
    without_write_back, _ = fencing_of([0 + 1, 1 + 1])
    assert without_write_back < first


def _view(token: str, remaining_ms: int = 1000, fencing: int = 1) -> NodeView:
    return token, remaining_ms, fencing


@pytest.mark.parametrize(
    ("views", "nodes", "expected"),
    [
        ([None, None, None], 3, None),
        ([_view("x"), None, None], 3, None),  # a minority's leftover
        ([_view("x"), _view("y"), None], 3, None),  # split: nobody holds it
        ([_view("x", 900, 3), _view("x", 700, 3), None], 3, LockInfo("r", "x", 3, 700)),
        ([_view("x", 900, 3), _view("x", 800, 1), _view("x", 950, 3)], 3,
         LockInfo("r", "x", 3, 800)),  # a node whose write-back reply was lost
        ([_view("x"), _view("x")], 3, LockInfo("r", "x", 1, 1000)),  # one node did not answer
        ([_view("x"), _view("x"), _view("y"), None, None], 5, None),
        ([_view("x"), _view("x"), _view("x"), _view("y"), None], 5, LockInfo("r", "x", 1, 1000)),
    ],
)  # fmt: skip
def test_the_holder_is_the_token_of_a_majority_of_all_nodes(
    views: list[NodeView | None], nodes: int, expected: LockInfo | None
) -> None:
    assert majority_holder("r", views, nodes) == expected
