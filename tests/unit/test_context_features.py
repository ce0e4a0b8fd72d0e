from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from origin.context_features import (
    FEATURES,
    UserProfile,
    context_segment,
    daypart,
    extract,
    local_time,
    profile_of,
)
from origin.item_index import ItemIndex
from origin.user_state import Interaction, RequestContext, UserState
from protocol.api import Device
from protocol.segments import Segment
from tests.unit.catalogs import make_catalog

# A Wednesday, 14:30 UTC.
WEDNESDAY = datetime(2025, 6, 11, 14, 30, tzinfo=UTC)
NOW_MS = int(WEDNESDAY.timestamp() * 1000)
IDLE_MS = 30 * 60_000


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    catalog = make_catalog(400, 5, 16)
    items = list(catalog.items)
    # rows 0-4: one of every content type, in order
    for row, kind in enumerate(("physical", "media", "consumable", "apparel", "digital")):
        items[row] = replace(items[row], content_type=kind)
    return ItemIndex(items, catalog.vectors)


def profile(**changes: object) -> UserProfile:
    base = UserProfile(segment=None, device=None, local=WEDNESDAY)
    return replace(base, **changes)  # type: ignore[arg-type]


def rows(*values: int) -> np.ndarray:
    return np.array(values, np.intp)


def ix(index: ItemIndex, row: int, action: str, age_ms: int = 0) -> Interaction:
    item = index.items[row]
    return Interaction(
        interaction_id=f"{row}-{action}-{age_ms}",
        item_id=item.item_id,
        action=action,
        timestamp_ms=NOW_MS - age_ms,
        category=item.category,
    )


@pytest.mark.parametrize(
    ("hour", "expected"),
    [
        (0, "night"),
        (5, "night"),
        (6, "morning"),
        (11, "morning"),
        (12, "afternoon"),
        (17, "afternoon"),
        (18, "evening"),
        (23, "evening"),
    ],
    ids=str,
)
def test_daypart(hour: int, expected: str) -> None:
    assert daypart(WEDNESDAY.replace(hour=hour, minute=59)) == expected


@pytest.mark.parametrize(
    ("device", "hour", "expected"),
    [
        (Device.MOBILE, 19, "mobile_evening"),
        (Device.DESKTOP, 9, "desktop_morning"),
        (Device.TABLET, 12, "tablet_afternoon"),
        (Device.TV, 3, "tv_night"),
        (None, 0, "any_night"),
    ],
    ids=["mobile", "desktop", "tablet", "tv", "no-device"],
)
def test_context_segment(device: Device | None, hour: int, expected: str) -> None:
    assert context_segment(device, WEDNESDAY.replace(hour=hour)) == expected


@pytest.mark.parametrize(
    ("offset_min", "client_time", "expected_hour", "expected_offset_min"),
    [
        (0, None, 14, 0),
        (120, None, 16, 120),
        (-330, None, 9, -330),
        (600, None, 0, 600),  # next day in the user's zone
        # a client time with a zone wins over the stored offset
        (120, datetime(2025, 6, 11, 21, 0, tzinfo=timezone(timedelta(hours=-3))), 21, -180),
        # a naive client time says nothing about the zone: ignored
        (120, datetime(2025, 6, 11, 3, 0), 16, 120),
    ],
    ids=["utc", "plus-2h", "minus-5h30", "crosses-midnight", "client-zone", "naive-client"],
)
def test_local_time(
    offset_min: int,
    client_time: datetime | None,
    expected_hour: int,
    expected_offset_min: int,
) -> None:
    local = local_time(NOW_MS, offset_min, client_time)
    assert local.hour == expected_hour
    offset = local.utcoffset()
    assert offset is not None
    assert offset == timedelta(minutes=expected_offset_min)


def test_extract_shape_and_dtype(index: ItemIndex) -> None:
    x = extract(profile(), index, rows(0, 1, 2, 3))
    assert x.shape == (4, FEATURES) == (4, 64)
    assert x.dtype == np.float32
    assert np.isfinite(x).all()


@pytest.mark.parametrize(
    ("segment", "bit"),
    [
        (Segment.NEW, 0),
        (Segment.CASUAL, 1),
        (Segment.ACTIVE, 2),
        (Segment.POWER, 3),
        (None, 4),
    ],
    ids=["new", "casual", "active", "power", "unknown"],
)
def test_segment_one_hot(index: ItemIndex, segment: Segment | None, bit: int) -> None:
    x = extract(profile(segment=segment), index, rows(0, 7))
    expected = np.zeros(5, np.float32)
    expected[bit] = 1.0
    assert (x[:, 0:5] == expected).all()


@pytest.mark.parametrize(
    ("device", "bit"),
    [(Device.MOBILE, 5), (Device.DESKTOP, 6), (Device.TABLET, 7), (Device.TV, 8), (None, None)],
    ids=["mobile", "desktop", "tablet", "tv", "missing"],
)
def test_device_one_hot(index: ItemIndex, device: Device | None, bit: int | None) -> None:
    x = extract(profile(device=device), index, rows(0))
    expected = np.zeros(4, np.float32)
    if bit is not None:
        expected[bit - 5] = 1.0
    assert x[0, 5:9].tolist() == expected.tolist()


@pytest.mark.parametrize(
    ("local", "time_angle", "day_angle"),
    [
        (datetime(2025, 6, 9, 0, 0, tzinfo=UTC), 0.0, 0.0),  # Monday midnight
        (datetime(2025, 6, 9, 6, 0, tzinfo=UTC), math.pi / 2, 2 * math.pi * 0.25 / 7),
        (datetime(2025, 6, 11, 12, 0, tzinfo=UTC), math.pi, 2 * math.pi * 2.5 / 7),
        (
            datetime(2025, 6, 15, 18, 30, tzinfo=UTC),
            2 * math.pi * 18.5 / 24,
            2 * math.pi * 6.75 / 7,
        ),
    ],
    ids=["monday-midnight", "monday-6am", "wednesday-noon", "sunday-evening"],
)
def test_cyclic_time(
    index: ItemIndex, local: datetime, time_angle: float, day_angle: float
) -> None:
    x = extract(profile(local=local), index, rows(0))
    assert x[0, 9:11].tolist() == pytest.approx(
        [math.sin(time_angle), math.cos(time_angle)], abs=1e-6
    )
    assert x[0, 11:13].tolist() == pytest.approx(
        [math.sin(day_angle), math.cos(day_angle)], abs=1e-6
    )


@pytest.mark.parametrize(
    ("length", "bit"),
    [(0, 13), (1, 14), (3, 14), (4, 15), (10, 15), (11, 16), (200, 16)],
    ids=str,
)
def test_session_length_bucket(index: ItemIndex, length: int, bit: int) -> None:
    x = extract(profile(session_length=length), index, rows(0))
    expected = [0.0] * 4
    expected[bit - 13] = 1.0
    assert x[0, 13:17].tolist() == expected


def test_recent_category_distribution(index: ItemIndex) -> None:
    a = [r for r in range(len(index)) if index.category[r] == 0][:3]
    b = [r for r in range(len(index)) if index.category[r] == 1][:1]
    recent = tuple(ix(index, r, "view") for r in (*a, *b))
    x = extract(profile(recent=recent, recent_rows=(*a, *b)), index, rows(0))
    shares = np.array([0.75, 0.25])
    entropy = -float(np.sum(shares * np.log(shares))) / math.log(len(index.category_names))
    assert x[0, 17:20].tolist() == pytest.approx([0.75, 0.25, entropy], abs=1e-6)
    # nothing recent: zeros
    assert extract(profile(), index, rows(0))[0, 17:20].tolist() == [0.0, 0.0, 0.0]


def test_item_columns(index: ItemIndex) -> None:
    r = np.arange(len(index), dtype=np.intp)
    x = extract(profile(), index, r)
    assert np.array_equal(x[:, 20:28], index.category_embedding[index.category[r]])
    price = x[:, 28:33]
    assert (price.sum(axis=1) == 1).all()
    assert np.array_equal(np.argmax(price, axis=1), index.price_bucket[r])
    assert np.array_equal(x[:, 33], index.freshness[r])
    assert np.array_equal(x[:, 34], index.popularity[r])
    kind = x[:, 35:40]
    assert (kind.sum(axis=1) == 1).all()
    assert np.argmax(kind[:5], axis=1).tolist() == [0, 1, 2, 3, 4]
    assert np.array_equal(np.argmax(kind, axis=1), index.content_type[r])


def test_category_rows_share_one_embedding(index: ItemIndex) -> None:
    same = [r for r in range(len(index)) if index.category[r] == 2][:2]
    other = next(r for r in range(len(index)) if index.category[r] == 3)
    x = extract(profile(), index, rows(*same, other))
    assert np.array_equal(x[0, 20:28], x[1, 20:28])
    assert not np.array_equal(x[0, 20:28], x[2, 20:28])


@pytest.mark.parametrize(
    ("ratio", "bit"),
    [
        (None, 51),
        (1.0, 48),
        (1.2, 48),
        (1 / 1.2, 48),
        (1.5, 49),
        (1 / 1.7, 49),
        (1.8, 50),
        (10.0, 50),
    ],
    ids=["no-preference", "same", "within-25", "cheaper-within-25", "within-75", "cheaper-75",
         "further", "far"],
)  # fmt: skip
def test_price_preference_match(index: ItemIndex, ratio: float | None, bit: int) -> None:
    row = 10
    preference = None if ratio is None else float(index.log_price[row]) + math.log(ratio)
    x = extract(profile(price_preference=preference), index, rows(row))
    expected = [0.0] * 4
    expected[bit - 48] = 1.0
    assert x[0, 48:52].tolist() == expected


def test_novelty_social_proof_and_time(index: ItemIndex) -> None:
    seen = 20
    seen_category = int(index.category[seen])
    same_category = next(
        r for r in range(len(index)) if index.category[r] == seen_category and r != seen
    )
    other = next(r for r in range(len(index)) if index.category[r] != seen_category)
    # Saturday 21:00: weekend and evening
    local = datetime(2025, 6, 14, 21, 0, tzinfo=UTC)
    p = profile(recent=(ix(index, seen, "view"),), recent_rows=(seen,), local=local)
    r = rows(seen, same_category, other)
    x = extract(p, index, r)
    assert x[:, 52].tolist() == [0.0, 1.0, 1.0]  # item unseen
    assert x[:, 53].tolist() == [0.0, 0.0, 1.0]  # category unseen
    assert np.array_equal(x[:, 54], (index.freshness[r] >= 0.7).astype(np.float32))
    assert np.allclose(x[:, 55], 1 - index.popularity[r])
    assert np.array_equal(x[:, 56], (index.popularity[r] >= 0.9).astype(np.float32))
    assert np.array_equal(x[:, 57], (index.popularity[r] >= 0.7).astype(np.float32))
    assert np.allclose(x[:, 58], index.trending[r])
    assert np.array_equal(x[:, 59], index.limited[r].astype(np.float32))
    assert x[:, 60].tolist() == [1.0] * 3
    assert x[:, 61].tolist() == [1.0] * 3
    assert np.allclose(x[:, 62], index.freshness[r])
    assert np.allclose(x[:, 63], index.freshness[r])
    # a weekday afternoon: no time relevance
    weekday = extract(profile(), index, r)
    assert weekday[:, 60:64].tolist() == [[0.0] * 4] * 3
    # nothing seen: every item and category is new
    assert weekday[:, 52:54].tolist() == [[1.0, 1.0]] * 3


def test_social_proof_extremes(index: ItemIndex) -> None:
    top = int(np.argmax(index.popularity))
    bottom = int(np.argmin(index.popularity))
    x = extract(profile(), index, rows(top, bottom))
    assert x[:, 56].tolist() == [1.0, 0.0]
    assert x[:, 57].tolist() == [1.0, 0.0]


def test_affinity_features(index: ItemIndex) -> None:
    clicked, carted = 30, 31
    p = profile(
        recent=(ix(index, clicked, "click"), ix(index, carted, "add_to_cart")),
        recent_rows=(clicked, carted),
        session_categories=frozenset({index.items[clicked].category}),
    )
    x = extract(p, index, rows(clicked, carted))
    assert x[:, 43].tolist() == [1.0, 1.0]  # engaged before
    assert x[:, 44].tolist() == [0.0, 1.0]  # carted or bought
    assert x[0, 45] == 1.0  # category of the session
    assert x[0, 40] > 0
    # no user or session vector: neutral similarities
    assert x[:, 46:48].tolist() == [[0.5, 0.5]] * 2


def state_of(index: ItemIndex) -> UserState:
    interactions = (
        ix(index, 40, "click", age_ms=1_000),
        ix(index, 41, "purchase", age_ms=2_000),
        ix(index, 42, "view", age_ms=3_000),
        ix(index, 43, "click", age_ms=3 * 3_600_000),  # before an idle gap
    )
    return UserState(RequestContext(device=Device.MOBILE), interactions)


def test_profile_of_personal(index: ItemIndex) -> None:
    state = state_of(index)
    vector = np.ones(index.dim, np.float32)
    p = profile_of(
        state,
        index,
        device=Device.MOBILE,
        local=WEDNESDAY,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=vector,
    )
    assert p.segment == Segment.ACTIVE  # 4 interactions in the last day
    assert p.session_length == 3
    assert p.recent == state.interactions
    assert p.recent_rows == (40, 41, 42, 43)
    assert p.user_vector is vector
    assert p.session_vector is not None
    assert float(np.linalg.norm(p.session_vector)) == pytest.approx(1.0, abs=1e-5)
    engaged = [40, 41, 43]
    assert p.price_preference == pytest.approx(float(np.median(index.log_price[engaged])))
    assert p.session_categories == {index.items[r].category for r in (40, 41, 42)}


def test_profile_of_shared_keeps_no_user_data(index: ItemIndex) -> None:
    p = profile_of(
        state_of(index),
        index,
        device=Device.TABLET,
        local=WEDNESDAY,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=np.ones(index.dim, np.float32),
        personal=False,
    )
    assert p == UserProfile(segment=None, device=Device.TABLET, local=WEDNESDAY)
    x = extract(p, index, rows(40, 41))
    assert x[:, 4].tolist() == [1.0, 1.0]  # unknown segment
    assert x[:, 43:45].tolist() == [[0.0, 0.0]] * 2
    assert x[:, 51].tolist() == [1.0, 1.0]  # no price preference


def test_profile_of_unknown_items(index: ItemIndex) -> None:
    state = UserState(
        interactions=(Interaction("a", "not-in-catalog", "click", NOW_MS - 1000, "nowhere"),)
    )
    p = profile_of(
        state,
        index,
        device=None,
        local=WEDNESDAY,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    assert p.recent_rows == (None,)
    assert p.session_vector is None
    assert p.price_preference is None
    x = extract(p, index, rows(0, 1))
    assert x.shape == (2, 64)
    assert x[:, 17:20].tolist() == [[0.0, 0.0, 0.0]] * 2
