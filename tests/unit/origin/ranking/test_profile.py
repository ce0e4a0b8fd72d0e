"""Who is asking, where and when: the decision's context cell (device and daypart), the
user's local time, and the profile the ranking's rules and explanations read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from origin.catalog.item_index import ItemIndex
from origin.ranking.history import Interaction, RankingHistory, RequestContext
from origin.ranking.profile import (
    ANY_DEVICE,
    DAYPARTS,
    DEVICES,
    UserProfile,
    context_cell,
    daypart,
    local_time,
    profile_of,
)
from protocol.api import Device
from protocol.segments import Segment
from tests.unit.catalogs import make_catalog

# A Wednesday, 14:30 UTC.
WEDNESDAY = datetime(2025, 6, 11, 14, 30, tzinfo=UTC)
NOW_MS = int(WEDNESDAY.timestamp() * 1000)
IDLE_MS = 30 * 60_000


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(400, 5, 16).index()


def ix(
    index: ItemIndex, row: int, action: str, age_ms: int = 0, duration_ms: int | None = None
) -> Interaction:
    item = index.items[row]
    return Interaction(
        interaction_id=f"{row}-{action}-{age_ms}",
        item_id=item.item_id,
        action=action,
        timestamp_ms=NOW_MS - age_ms,
        category=item.category,
        duration_ms=duration_ms,
    )


# --- the context cell --------------------------------------------------------------------


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


def test_every_hour_has_one_of_the_four_dayparts() -> None:
    parts = [daypart(WEDNESDAY.replace(hour=h)) for h in range(24)]
    assert parts == [part for part in DAYPARTS for _ in range(6)]


@pytest.mark.parametrize(
    ("device", "hour", "expected"),
    [
        (Device.MOBILE, 19, "mobile_evening"),
        (Device.DESKTOP, 9, "desktop_morning"),
        (Device.TABLET, 12, "tablet_afternoon"),
        (Device.TV, 3, "tv_night"),
        (None, 0, f"{ANY_DEVICE}_night"),
    ],
    ids=["mobile", "desktop", "tablet", "tv", "no-device"],
)
def test_context_cell(device: Device | None, hour: int, expected: str) -> None:
    assert context_cell(device, WEDNESDAY.replace(hour=hour)) == expected


def test_context_cells_are_distinct() -> None:
    cells = {
        context_cell(device, WEDNESDAY.replace(hour=6 * part))
        for device in (*DEVICES, None)
        for part in range(len(DAYPARTS))
    }
    assert len(cells) == (len(DEVICES) + 1) * len(DAYPARTS)


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


def test_the_users_zone_decides_the_cell() -> None:
    # 14:30 UTC is afternoon in London and evening in Mumbai
    assert context_cell(Device.MOBILE, local_time(NOW_MS, 0)) == "mobile_afternoon"
    assert context_cell(Device.MOBILE, local_time(NOW_MS, 330)) == "mobile_evening"


# --- the profile -------------------------------------------------------------------------


def state_of(index: ItemIndex) -> RankingHistory:
    interactions = (
        ix(index, 40, "click", age_ms=1_000),
        ix(index, 41, "purchase", age_ms=2_000),
        ix(index, 42, "view", age_ms=3_000),
        ix(index, 43, "click", age_ms=3 * 3_600_000),  # before an idle gap
    )
    return RankingHistory(RequestContext(device=Device.MOBILE), interactions)


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
    assert p.device == Device.MOBILE
    assert p.local == WEDNESDAY
    assert p.session_length == 3
    assert p.recent == state.interactions
    assert p.recent_rows == (40, 41, 42, 43)
    assert p.user_vector is vector
    # the session's items' mean direction, as a unit vector
    assert p.session_vector is not None
    mean = index.vectors[[40, 41, 42]].mean(axis=0)
    np.testing.assert_allclose(p.session_vector, mean / np.linalg.norm(mean), atol=1e-6)
    # the usual price: engaged items only (a view is not), the older session's included
    engaged = [40, 41, 43]
    assert p.price_preference == pytest.approx(float(np.median(index.log_price[engaged])))
    assert p.session_categories == {index.items[r].category for r in (40, 41, 42)}


def test_the_session_vector_uses_its_five_newest_items(index: ItemIndex) -> None:
    rows = list(range(60, 68))
    state = RankingHistory(
        interactions=tuple(ix(index, r, "view", age_ms=1_000 * k) for k, r in enumerate(rows))
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
    assert p.session_length == 8
    mean = index.vectors[rows[:5]].mean(axis=0)
    assert p.session_vector is not None
    np.testing.assert_allclose(p.session_vector, mean / np.linalg.norm(mean), atol=1e-6)
    assert p.price_preference is None  # views only: nothing engaged


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
    assert p.recent == ()
    assert p.user_vector is None
    assert p.session_vector is None
    assert p.price_preference is None


def test_profile_of_a_new_user(index: ItemIndex) -> None:
    p = profile_of(
        RankingHistory(),
        index,
        device=Device.DESKTOP,
        local=WEDNESDAY,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    assert p.segment == Segment.NEW
    assert p.session_length == 0
    assert p.recent == ()
    assert p.recent_rows == ()
    assert p.session_vector is None
    assert p.price_preference is None
    assert p.session_categories == frozenset()


def test_profile_of_unknown_items(index: ItemIndex) -> None:
    state = RankingHistory(
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
    assert p.session_length == 1
    assert p.session_vector is None
    assert p.price_preference is None
    assert p.session_categories == {"nowhere"}


def test_an_idle_user_has_no_session(index: ItemIndex) -> None:
    state = RankingHistory(interactions=(ix(index, 50, "click", age_ms=IDLE_MS + 1),))
    p = profile_of(
        state,
        index,
        device=None,
        local=WEDNESDAY,
        now_ms=NOW_MS,
        session_idle_ms=IDLE_MS,
        user_vector=None,
    )
    assert p.session_length == 0
    assert p.session_vector is None
    assert p.session_categories == frozenset()
    # still known: their history counts
    assert p.recent_rows == (50,)
    assert p.price_preference == pytest.approx(float(index.log_price[50]))
