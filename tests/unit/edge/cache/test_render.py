from __future__ import annotations

import uuid

import orjson

from edge.cache.entry import CachedItem
from edge.cache.http_cache import items_digest
from edge.cache.render import RenderCache, new_request_id, personalize_body, render_items
from protocol.api import Explanation, ItemMetadata, RankedItem


def item(n: int) -> CachedItem:
    return CachedItem.of(
        RankedItem(
            item_id=f"it-{n}",
            rank=n,
            score=0.5,
            source="trending",
            explanation=Explanation(primary_reason="Popular", signals=["trending"]),
            metadata=ItemMetadata(title="t", category="c", price=1.0, image_url="u"),
        )
    )


ITEMS = [item(n) for n in range(1, 6)]


def test_request_ids_are_version_4_uuids() -> None:
    ids = {new_request_id() for _ in range(1000)}
    assert len(ids) == 1000
    for text in list(ids)[:50]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
        assert str(parsed) == text


def test_a_prerendered_body_is_the_same_json() -> None:
    metadata = {"latency_ms": 1.0}
    direct = personalize_body(
        request_id="r", user_id="u", items=ITEMS, explain=True, metadata=metadata
    )
    spliced = personalize_body(
        request_id="r",
        user_id="u",
        items=render_items(ITEMS, explain=True),
        explain=True,
        metadata=metadata,
    )
    assert direct == spliced
    assert [i["rank"] for i in orjson.loads(direct)["items"]] == [1, 2, 3, 4, 5]


def test_the_render_cache_keys_by_generation_count_and_explanation() -> None:
    cache = RenderCache(max_entries=3)
    first = cache.get("k", 1, ITEMS[:3], explain=False)
    assert first == (render_items(ITEMS[:3], explain=False), items_digest(["it-1", "it-2", "it-3"]))
    assert cache.get("k", 1, ITEMS[:3], explain=False) is first
    assert cache.get("k", 1, ITEMS[:3], explain=True)[0] != first[0]
    assert cache.get("k", 2, ITEMS[:2], explain=False)[0] == render_items(ITEMS[:2], explain=False)
    cache.get("k", 3, ITEMS, explain=False)
    assert len(cache) == 3
