from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.cache.key import (
    OPTION_STEP,
    CacheKey,
    audience_for,
    bucketed,
    bucketed_options,
    cache_key,
    encode,
    key_material,
    pool_cache_key,
    time_bucket,
    variant,
)
from protocol.api import Options, PersonalizeRequest
from protocol.audience import Audience, Personal, Shared
from protocol.segments import Segment

BASE: dict[str, Any] = {
    "audience": Shared("casual"),
    "page_type": "home",
    "segment": "casual",
    "geo": "us-west",
    "device": "mobile",
    "now_s": 1_767_225_600.0,  # on a 15-minute boundary
    "recent_items": ("it-1", "it-2"),
}


def key(**changes: Any) -> CacheKey:
    return cache_key(**{**BASE, **changes})


def test_a_key_carries_its_audience() -> None:
    assert key().audience == Shared("casual")
    assert key(audience=Personal("u-1")).audience == Personal("u-1")


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
        {"segment": "new"},
        {"geo": "eu-west"},
        {"device": "tablet"},
        {"now_s": 1_767_225_600.0 + 900},
        {"variant_parts": ("abc",)},
        {"audience": Shared("new")},
        {"audience": Personal("u-1")},
    ],
)
def test_each_component_changes_the_key(change: dict[str, Any]) -> None:
    assert key(**change).digest != key().digest


def test_same_bucket_same_key() -> None:
    assert key(now_s=1_767_225_600.0 + 600) == key()


def test_shared_keys_ignore_the_users_history() -> None:
    assert key(recent_items=("x",)) == key(recent_items=())


def test_personal_keys_name_the_user_even_without_any_history() -> None:
    """The privacy incident of issue 15: an edge that knew none of two power users'
    interactions keyed both to the same entry, and served one's ranking to the other."""
    a = key(audience=Personal("user-a"), segment="power", recent_items=())
    b = key(audience=Personal("user-b"), segment="power", recent_items=())
    assert a.digest != b.digest
    assert a.audience != b.audience


def test_personal_keys_change_with_the_last_five_interactions() -> None:
    personal = {"audience": Personal("u"), "segment": "power"}
    assert key(**personal, recent_items=("x",)) != key(**personal, recent_items=())
    # order-independent, and only the last five count
    assert key(**personal, recent_items=("b", "a")) == key(**personal, recent_items=("a", "b"))
    five = ("1", "2", "3", "4", "5")
    assert key(**personal, recent_items=("old", *five)) == key(**personal, recent_items=five)


@pytest.mark.parametrize(
    ("segment", "audience"),
    [
        (Segment.NEW, Shared("new")),
        (Segment.CASUAL, Personal("u")),  # one signal is enough to be one's own
        (Segment.ACTIVE, Personal("u")),
        (Segment.POWER, Personal("u")),
    ],
)
def test_only_users_with_nothing_known_share_their_segments_answer(
    segment: Segment, audience: Audience
) -> None:
    assert audience_for(segment, "u") == audience


@pytest.mark.parametrize(
    ("parts", "encoded"),
    [
        ((), b""),
        (("",), b"0:"),
        (("a", "bc"), b"1:a2:bc"),
        (("a:b",), b"3:a:b"),
        (("é",), b"2:\xc3\xa9"),  # lengths in bytes
    ],
)
def test_encode_is_length_prefixed(parts: tuple[str, ...], encoded: bytes) -> None:
    assert encode(parts) == encoded


def _request(**parts: Any) -> PersonalizeRequest:
    return PersonalizeRequest.model_validate(
        {"user_id": "u", "context": {"page_type": "home", "device": "mobile"}, **parts}
    )


PLAIN = variant(_request())


@pytest.mark.parametrize(
    ("parts", "plain"),
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
def test_variant_only_for_what_changes_the_ranking(parts: dict[str, Any], plain: bool) -> None:
    assert (variant(_request(**parts)) == PLAIN) is plain


def test_variant_treats_categories_as_a_set() -> None:
    a = _request(constraints={"categories": ["books", "toys-games"]})
    b = _request(constraints={"categories": ["toys-games", "books", "books"]})
    assert variant(a) == variant(b)


def test_a_comma_in_a_category_is_not_two_categories() -> None:
    """Issue 15: ``["computers,electronics"]`` (no items) was stored under the key of
    ``["computers", "electronics"]`` and served to every new user asking for the latter."""
    one = _request(constraints={"categories": ["computers,electronics"]})
    two = _request(constraints={"categories": ["computers", "electronics"]})
    assert variant(one) != variant(two)
    assert key(variant_parts=variant(one)) != key(variant_parts=variant(two))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (0.0, 0.0),
        (0.024, 0.0),
        (0.026, 0.05),
        (0.31, 0.3),
        (0.123456789, 0.1),
        (1.0, 1.0),
    ],
)
def test_options_are_bucketed(value: float | None, expected: float | None) -> None:
    assert bucketed(value) == expected


def test_a_client_varying_exploration_rate_finds_few_keys() -> None:
    """Issue 15 item 8: a rate that changes on every request forced a fill each time."""
    rates = [i / 1000 for i in range(1001)]
    digests = {
        key(variant_parts=variant(_request(options={"exploration_rate": r}))).digest for r in rates
    }
    assert len(digests) == round(1 / OPTION_STEP) + 1


def test_the_fill_asks_for_the_bucketed_options() -> None:
    options = Options(exploration_rate=0.123, diversity_weight=0.5, include_explanation=True)
    assert bucketed_options(options) == Options(
        exploration_rate=0.1, diversity_weight=0.5, include_explanation=True
    )
    unchanged = Options(exploration_rate=0.1)
    assert bucketed_options(unchanged) is unchanged


# Components drawn from small alphabets that include the characters a naive join would use
# as separators, so that ambiguities are found quickly if the encoding had any.
_text = st.text(alphabet="ab:,|\x1f0", max_size=4)
_audiences = st.one_of(st.builds(Shared, _text), st.builds(Personal, _text))
_components = st.fixed_dictionaries(
    {
        "audience": _audiences,
        "page_type": _text,
        "segment": _text,
        "geo": _text,
        "device": _text,
        "now_s": st.sampled_from([0.0, 900.0]),
        "recent_items": st.lists(_text, max_size=3).map(tuple),
        "variant_parts": st.lists(_text, max_size=3).map(tuple),
    }
)


def _meaning(parts: dict[str, Any]) -> tuple[Any, ...]:
    """What a key must tell apart: its components as the key reads them."""
    recent = tuple(sorted(parts["recent_items"])) if isinstance(parts["audience"], Personal) else ()
    return (
        parts["audience"],
        parts["page_type"],
        parts["segment"],
        parts["geo"],
        parts["device"],
        time_bucket(parts["now_s"]),
        recent,
        tuple(parts["variant_parts"]),
    )


@settings(max_examples=3000, deadline=None)
@given(_components, _components)
def test_different_components_never_make_the_same_key(a: dict[str, Any], b: dict[str, Any]) -> None:
    # The material is what is hashed: if it is injective, keys collide only if sha256 does.
    same_material = key_material(**a) == key_material(**b)
    assert same_material == (_meaning(a) == _meaning(b))


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.text(alphabet="ab,", min_size=1, max_size=3), min_size=1, max_size=3),
    st.lists(st.text(alphabet="ab,", min_size=1, max_size=3), min_size=1, max_size=3),
)
def test_different_category_sets_never_share_a_variant(a: list[str], b: list[str]) -> None:
    va = variant(_request(constraints={"categories": a}))
    vb = variant(_request(constraints={"categories": b}))
    assert (va == vb) == (set(a) == set(b))


POOL: dict[str, Any] = {"segment": "power", "device": "mobile", "variant_parts": ("0",)}


@pytest.mark.parametrize(
    "change",
    [{"segment": "active"}, {"device": "desktop"}, {"variant_parts": ("1", "books")}],
)
def test_each_part_of_a_pool_key_changes_it(change: dict[str, Any]) -> None:
    assert pool_cache_key(**{**POOL, **change}) != pool_cache_key(**POOL)


def test_a_pool_key_is_the_segments_and_names_no_one() -> None:
    assert pool_cache_key(**POOL).audience == Shared("power")


@pytest.mark.parametrize(
    "answer",
    [
        {"audience": Shared("power"), "segment": "power", "device": "mobile"},
        {"audience": Personal("power"), "segment": "power", "device": "mobile"},
        {"audience": Shared("power"), "segment": "power", "device": "mobile", "page_type": ""},
    ],
)
def test_a_pool_key_is_never_an_answers_key(answer: dict[str, Any]) -> None:
    answer_key = key(**{**answer, "recent_items": (), "variant_parts": ("0",)})
    assert answer_key.digest != pool_cache_key(**POOL).digest
