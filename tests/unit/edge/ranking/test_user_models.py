from __future__ import annotations

import numpy as np
import pytest

from edge.ranking.user_models import ENTRY_OVERHEAD_BYTES, UserModels
from relevance.user_model import UserModel

DIM = 4
COST = 2 * 4 * DIM + ENTRY_OVERHEAD_BYTES  # two float32 vectors and the overhead


def model(value: float, dim: int = DIM) -> UserModel:
    return UserModel(np.full(dim, value, np.float32), np.full(dim, 0.5, np.float32))


@pytest.mark.parametrize(
    ("updates", "version", "mean"),
    [
        ([(1, 0.1)], 1, 0.1),
        ([(1, 0.1), (2, 0.2)], 2, 0.2),
        ([(2, 0.2), (1, 0.1)], 2, 0.2),  # an older update arriving late changes nothing
        ([(2, 0.2), (2, 0.9)], 2, 0.2),  # a redelivery (same version) changes nothing
        ([(1, 0.1), (5, 0.5), (3, 0.3)], 5, 0.5),
    ],
    ids=["one", "newer", "older-late", "same-again", "out-of-order"],
)
def test_versions_never_go_back(
    updates: list[tuple[int, float]], version: int, mean: float
) -> None:
    table = UserModels(10_000, DIM)
    for v, m in updates:
        table.apply("ann", v, model(m))
    held = table.get("ann")
    assert held is not None
    assert (held.version, float(held.model.mean[0])) == (version, pytest.approx(mean))


def test_apply_says_whether_it_changed_anything() -> None:
    table = UserModels(10_000, DIM)
    assert table.apply("ann", 2, model(0.2)) is True
    assert table.apply("ann", 1, model(0.1)) is False
    assert table.apply("ann", 2, model(0.1)) is False
    assert table.apply("ann", 3, model(0.3)) is True


def test_the_budget_drops_the_least_recently_used() -> None:
    table = UserModels(3 * COST, DIM)
    for user in ("ann", "bob", "cid"):
        table.apply(user, 1, model(0.1))
    assert table.bytes == 3 * COST
    assert table.get("ann") is not None  # ann used: bob is now the least recent
    table.apply("dee", 1, model(0.1))
    assert table.get("bob") is None
    assert {u for u in ("ann", "cid", "dee") if table.get(u) is not None} == {"ann", "cid", "dee"}
    assert (len(table), table.evicted, table.bytes) == (3, 1, 3 * COST)


def test_peeking_leaves_the_order_of_eviction_alone() -> None:
    table = UserModels(3 * COST, DIM)
    for user in ("ann", "bob", "cid"):
        table.apply(user, 1, model(0.1))
    held = table.peek("ann")
    assert held is not None
    assert held.version == 1
    assert table.peek("eve") is None
    table.apply("dee", 1, model(0.1))
    assert table.peek("ann") is None  # still the least recently used: gone first


def test_a_newer_model_replaces_the_older_ones_cost() -> None:
    table = UserModels(10 * COST, DIM)
    table.apply("ann", 1, model(0.1))
    table.apply("ann", 2, model(0.2))
    table.forget("ann")
    table.forget("nobody")
    assert (len(table), table.bytes) == (0, 0)


def test_a_model_of_another_dimension_is_refused() -> None:
    table = UserModels(10 * COST, DIM)
    with pytest.raises(ValueError, match="dimension 8, the edge's is 4"):
        table.apply("ann", 1, model(0.1, dim=8))
    assert table.get("ann") is None


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget_bytes"):
        UserModels(0, DIM)


def test_a_user_is_ready_once_their_preferences_are_known() -> None:
    table = UserModels(10 * COST + 1000, DIM)
    table.apply("ann", 3, model(0.3))
    assert table.get("ann") is not None
    assert table.ready("ann") is None  # a pushed model alone: not rankable at the edge
    table.complete("ann", 3, model(0.3), {"books": -1.0})
    held = table.ready("ann")
    assert held is not None
    assert held.preferences == {"books": -1.0}
    # a later pushed model keeps the preferences
    table.apply("ann", 4, model(0.4))
    held = table.ready("ann")
    assert held is not None
    assert (held.version, held.preferences) == (4, {"books": -1.0})


@pytest.mark.parametrize(
    ("pushed", "fetched", "version", "mean"),
    [
        (None, 2, 2, 0.2),  # nothing pushed yet: the fetched model
        (1, 2, 2, 0.2),  # the fetch is newer
        (5, 2, 5, 0.5),  # the stream is ahead of the fetch: its model stays
        (2, 2, 2, 0.2),
    ],
    ids=["fetch-only", "fetch-newer", "stream-newer", "same"],
)
def test_a_fetch_never_takes_the_model_back(
    pushed: int | None, fetched: int, version: int, mean: float
) -> None:
    table = UserModels(10**6, DIM)
    if pushed is not None:
        table.apply("ann", pushed, model(pushed / 10))
    table.complete("ann", fetched, model(fetched / 10), {})
    held = table.ready("ann")
    assert held is not None
    assert (held.version, float(held.model.mean[0])) == (version, pytest.approx(mean))


def test_preferences_count_against_the_budget() -> None:
    table = UserModels(10**6, DIM)
    table.complete("ann", 1, model(0.1), {})
    bare = table.bytes
    table.complete("ann", 1, model(0.1), {"books": 1.0, "toys": -0.5}, preferences_version=3)
    assert table.bytes > bare
    table.forget("ann")
    assert table.bytes == 0


P = {"books": -1.0}  # the preferences of version 2
Q = {"toys": 0.5}  # of version 5, stated after


@pytest.mark.parametrize(
    ("steps", "ready_with"),
    [
        ([("push", 2, P)], P),  # an update with the preferences: ready, nothing fetched
        ([("push", 2, P), ("push", 5, Q)], Q),
        ([("push", 5, Q), ("push", 2, P)], Q),  # an older read arriving late: refused
        ([("push", 2, P), ("change",)], None),  # a change forgets them
        ([("push", 2, P), ("change",), ("push", 2, P)], None),  # read before the change
        ([("push", 2, P), ("change",), ("fetch", 2, P)], None),  # the same, fetched
        ([("push", 2, P), ("change",), ("fetch", 5, Q)], Q),  # read after it
        ([("push", 2, P), ("change",), ("push", 5, Q)], Q),
        ([("fetch", 0, {})], {}),  # never stated any: version 0
        ([("push", None, None)], None),  # a model without preferences: not ready
    ],
    ids=[
        "pushed",
        "newer",
        "older-late",
        "changed",
        "stale-push-after-change",
        "stale-fetch-after-change",
        "fetch-after-change",
        "push-after-change",
        "never-stated",
        "model-only",
    ],
)
def test_preferences_versions_never_go_back(
    steps: list[tuple[object, ...]], ready_with: dict[str, float] | None
) -> None:
    table = UserModels(10**6, DIM)
    for model_version, step in enumerate(steps, start=1):
        if step[0] == "change":
            table.forget_preferences("ann")
        elif step[0] == "push":
            _, version, preferences = step
            if preferences is None:
                table.apply("ann", model_version, model(0.1))
            else:
                assert isinstance(version, int)
                assert isinstance(preferences, dict)
                table.apply("ann", model_version, model(0.1), preferences, version)
        else:
            _, version, preferences = step
            assert isinstance(version, int)
            assert isinstance(preferences, dict)
            table.complete("ann", model_version, model(0.1), preferences, version)
    held = table.ready("ann")
    assert (held.preferences if held is not None else None) == ready_with
