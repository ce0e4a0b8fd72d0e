from __future__ import annotations

import hashlib
from typing import Any

import pytest

from edge.cache_key import cache_key, recent_hash, time_bucket, variant
from protocol.api import PersonalizeRequest
from protocol.segments import Segment

BASE: dict[str, Any] = {
    "user_id": "u-1",
    "page_type": "home",
    "segment": Segment.CASUAL,
    "geo": "us-west",
    "device": "mobile",
    "now_s": 1_767_225_600.0,  # on a 15-minute boundary
    "recent_items": ("it-1", "it-2"),
}


def key(**changes: Any) -> str:
    return cache_key(**{**BASE, **changes})


def test_key_is_sha256_of_the_seed_components() -> None:
    material = "home:casual:us-west:mobile:1767225600:"
    assert key() == hashlib.sha256(material.encode()).hexdigest()


@pytest.mark.parametrize(
    ("now_s", "bucket"),
    [
        (1_767_225_600.0, 1_767_225_600),
        (1_767_225_600.0 + 899.9, 1_767_225_600),
        (1_767_225_600.0 + 900.0, 1_767_226_500),
        (1_767_225_599.9, 1_767_224_700),
    ],
)
def test_time_bucket_is_15_minutes(now_s: float, bucket: int) -> None:
    assert time_bucket(now_s) == bucket


@pytest.mark.parametrize(
    "change",
    [
        {"page_type": "search"},
        {"segment": Segment.NEW},
        {"geo": "eu-west"},
        {"device": "tablet"},
        {"now_s": 1_767_225_600.0 + 900},
        {"variant_digest": "abc"},
    ],
)
def test_each_component_changes_the_key(change: dict[str, Any]) -> None:
    assert key(**change) != key()


def test_same_bucket_same_key() -> None:
    assert key(now_s=1_767_225_600.0 + 600) == key()


@pytest.mark.parametrize("segment", [Segment.NEW, Segment.CASUAL])
def test_coarse_segments_are_shared_by_every_user_of_the_segment(segment: Segment) -> None:
    assert key(segment=segment, recent_items=("x",)) == key(segment=segment, recent_items=())
    assert key(segment=segment, user_id="other") == key(segment=segment)


@pytest.mark.parametrize("segment", [Segment.ACTIVE, Segment.POWER])
def test_fine_segments_are_keyed_by_the_users_recent_interactions(segment: Segment) -> None:
    assert key(segment=segment, recent_items=("x",)) != key(segment=segment, recent_items=())
    # the same five clicks by another user never share an entry
    assert key(segment=segment, user_id="other") != key(segment=segment)


def _h(material: str) -> str:
    return hashlib.sha256(material.encode()).hexdigest()[:8]


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ((), ""),
        (("b", "a"), _h("u\x1fa,b")),
        (("a", "b"), _h("u\x1fa,b")),  # order-independent
        (("old", "1", "2", "3", "4", "5"), _h("u\x1f1,2,3,4,5")),  # only the last 5 count
    ],
)
def test_recent_hash(items: tuple[str, ...], expected: str) -> None:
    assert recent_hash("u", items) == expected


def _request(**parts: Any) -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        {"user_id": "u", "context": {"page_type": "home", "device": "mobile"}, **parts}
    )


@pytest.mark.parametrize(
    ("parts", "empty"),
    [
        ({}, True),
        # per-request fields are applied after the lookup: they never split the cache
        ({"constraints": {"count": 5, "exclude_items": ["a"]}}, True),
        ({"options": {"include_explanation": True}}, True),
        ({"constraints": {"categories": ["books"]}}, False),
        ({"constraints": {"price_range": {"max": 20}}}, False),
        ({"options": {"exploration_rate": 0.2}}, False),
        ({"options": {"diversity_weight": 0.5}}, False),
    ],
)
def test_variant_only_for_what_changes_the_ranking(parts: dict[str, Any], empty: bool) -> None:
    assert (variant(_request(**parts)) == "") is empty


def test_variant_ignores_category_order() -> None:
    a = _request(constraints={"categories": ["books", "toys-games"]})
    b = _request(constraints={"categories": ["toys-games", "books"]})
    assert variant(a) == variant(b)
