from __future__ import annotations

import gc
import tracemalloc

import orjson
import pytest

from edge.cache.entry import CachedItem, Entry
from edge.cache.render import personalize_body
from protocol.api import Explanation, ItemMetadata, PersonalizeResponse, RankedItem
from tests.entries import SHARED


def ranked(n: int, *, explained: bool = True) -> RankedItem:
    return RankedItem(
        item_id=f"it-{n}",
        rank=n,
        score=1.0 - n / 100,
        source="trending",
        explanation=Explanation(primary_reason="Popular", signals=["trending"])
        if explained
        else None,
        metadata=ItemMetadata(title=f"Item {n}", category="Books", price=9.99, image_url="u"),
    )


def entry(n_items: int, *, complete: bool = False, expires_at: float = 1e12) -> Entry:
    return Entry(
        audience=SHARED,
        items=tuple(CachedItem.of(ranked(n)) for n in range(1, n_items + 1)),
        complete=complete,
        model_version="m",
        exploration_applied=False,
        expires_at=expires_at,
    )


@pytest.mark.parametrize(
    ("n_items", "complete", "count", "exclude", "expected"),
    [
        (5, False, 3, set(), ["it-1", "it-2", "it-3"]),
        (5, False, 3, {"it-2"}, ["it-1", "it-3", "it-4"]),
        (5, False, 5, set(), ["it-1", "it-2", "it-3", "it-4", "it-5"]),
        (5, False, 5, {"it-1"}, None),  # cannot fill: ask the origin
        (5, True, 5, {"it-1"}, ["it-2", "it-3", "it-4", "it-5"]),  # nothing more exists
        (2, True, 10, set(), ["it-1", "it-2"]),
    ],
)
def test_select_applies_exclusions_and_count_after_the_lookup(
    n_items: int, complete: bool, count: int, exclude: set[str], expected: list[str] | None
) -> None:
    chosen = entry(n_items, complete=complete).select(count, exclude)
    if expected is None:
        assert chosen is None
        return
    assert chosen is not None
    assert [i.item_id for i in chosen] == expected


def test_partial_select_serves_what_there_is() -> None:
    chosen = entry(5).select(5, {"it-1"}, partial=True)
    assert [i.item_id for i in chosen] == ["it-2", "it-3", "it-4", "it-5"]


@pytest.mark.parametrize("explained", [True, False])
@pytest.mark.parametrize("explain", [True, False])
def test_rendered_body_is_the_api_response(explained: bool, explain: bool) -> None:
    items = [CachedItem.of(ranked(n, explained=explained)) for n in (7, 3)]
    metadata = {
        "latency_ms": 0.1,
        "tier": "edge",
        "cache_hit": True,
        "exploration_applied": False,
        "model_version": "m",
        "degraded": False,
    }
    raw = personalize_body(
        request_id="r-1", user_id="u-1", items=items, explain=explain, metadata=metadata
    )
    response = PersonalizeResponse.model_validate_json(raw)
    assert [(i.item_id, i.rank) for i in response.items] == [("it-7", 1), ("it-3", 2)]
    assert (response.request_id, response.user_id) == ("r-1", "u-1")
    original = ranked(7, explained=explained)
    assert response.items[0].metadata == original.metadata
    assert response.items[0].score == original.score
    expect_explanation = original.explanation if explain else None
    assert response.items[0].explanation == expect_explanation
    assert orjson.loads(raw)["metadata"] == metadata


@pytest.mark.parametrize("n_tags", [0, 50])
def test_the_budget_charges_at_least_what_an_entry_really_costs(n_tags: int) -> None:
    items = [ranked(n) for n in range(50)]
    CachedItem.of(items[0])  # first-use allocations are not the entry's
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cached = Entry(
        audience=SHARED,
        items=tuple(CachedItem.of(i) for i in items),
        complete=False,
        model_version="nn-slice-1",
        exploration_applied=False,
        expires_at=1.0,
        filled_at=0.5,
        stale_until=2.0,
        generation=123_456_789,
        tags=tuple(f"item-{n:06d}" for n in range(n_tags)),
    )
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert cached.size >= used
    assert cached.size < 2 * used  # and not wildly more


def test_stale_until_defaults_to_the_end_of_freshness() -> None:
    plain = entry(1, expires_at=160.0)
    assert plain.stale_until == 160.0
    assert (plain.filled_at, plain.generation, plain.tags) == (0.0, 0, ())


def test_an_entry_cannot_stop_being_servable_while_fresh() -> None:
    with pytest.raises(ValueError, match="stale_until"):
        Entry(
            audience=SHARED,
            items=(),
            complete=True,
            model_version="m",
            exploration_applied=False,
            expires_at=160.0,
            stale_until=159.0,
        )
