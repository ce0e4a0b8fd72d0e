"""Context of a ranking decision: the context segment and the 64 features of seed 000
("Context Extraction"), as pure functions.

The context segment names the Beta posteriors a decision uses (seed 001
``BanditParameters.context_segment``, e.g. ``mobile_evening``): device and part of the
user's local day. The feature vector describes one (user, item) pair for the logistic
context model of Algorithm 2; rows for all candidates are built at once.

Layout (index: meaning):

- user (20): 0-4 user segment one-hot (new, casual, active, power, unknown); 5-8 device
  one-hot; 9-10 time of day sin/cos; 11-12 day of week sin/cos; 13-16 session length
  bucket one-hot (0, 1-3, 4-10, 11+); 17-19 recent category distribution (share of the top
  category, of the second, normalised entropy);
- item (20): 20-27 category embedding; 28-32 price quintile within the category one-hot;
  33 freshness; 34 popularity percentile; 35-39 content type one-hot;
- cross (24): 40-47 user-category affinity (share of recent interactions in the item's
  category, action-weighted share, share of dismisses there, item engaged before, item
  carted or bought before, category in the session, similarity to the user's embedding,
  similarity to the session's items); 48-51 price-preference match one-hot (within 25 %,
  within 75 %, further, no preference); 52-55 novelty (item unseen, category unseen, new
  arrival, long tail); 56-59 social proof (top 10 % demand, top 30 % demand, trending
  score, limited stock); 60-63 time relevance (weekend, evening or night, freshness on a
  weekend, freshness in the evening).

Missing context (seed 000 "Context Feature Missing") takes neutral values: the ``unknown``
segment, no device bit, 0.5 similarities, "no preference".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt

from origin.embedding_update import ACTION_WEIGHTS
from origin.item_index import (
    CATEGORY_EMBEDDING_DIM,
    HIGH_DEMAND_POPULARITY,
    NEW_ARRIVAL_FRESHNESS,
    TOP_DEMAND_POPULARITY,
    ItemIndex,
)
from origin.user_state import BUYING_ACTIONS, ENGAGED_ACTIONS, Interaction, UserState
from protocol.api import Device
from protocol.segments import Segment

FEATURES = 64
# Columns other code reads back: "within 25 % of the user's usual price", "a category the
# user has not interacted with recently".
PRICE_MATCH_COLUMN = 48
CATEGORY_UNSEEN_COLUMN = 53
Features = npt.NDArray[np.float32]
Rows = npt.NDArray[np.intp]

SEGMENTS = (Segment.NEW, Segment.CASUAL, Segment.ACTIVE, Segment.POWER)
DEVICES = (Device.MOBILE, Device.DESKTOP, Device.TABLET, Device.TV)
DAYPARTS = ("night", "morning", "afternoon", "evening")  # 0-5, 6-11, 12-17, 18-23
ANY_DEVICE = "any"


def daypart(local: datetime) -> str:
    return DAYPARTS[local.hour // 6]


def context_segment(device: Device | None, local: datetime) -> str:
    """``<device>_<daypart>``: the key of the posteriors a decision uses."""
    return f"{device.value if device else ANY_DEVICE}_{daypart(local)}"


def local_time(now_ms: int, utc_offset_min: int, client_time: datetime | None = None) -> datetime:
    """The user's local time: the client's own timestamp when it carries a zone, else now
    in the zone the user last reported (UTC when never)."""
    if client_time is not None and client_time.tzinfo is not None:
        return client_time
    zone = timedelta(minutes=utc_offset_min)
    return datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone(timezone(zone))


@dataclass(frozen=True)
class UserProfile:
    """Everything the features need to know about the user, for one decision."""

    segment: Segment | None
    device: Device | None
    local: datetime
    session_length: int = 0
    # Item rows and categories of recent interactions (newest first) with their actions.
    recent: tuple[Interaction, ...] = ()
    recent_rows: tuple[int | None, ...] = ()
    user_vector: npt.NDArray[np.float32] | None = None
    session_vector: npt.NDArray[np.float32] | None = None
    price_preference: float | None = None  # log price
    session_categories: frozenset[str] = field(default_factory=frozenset)


def profile_of(
    state: UserState,
    index: ItemIndex,
    *,
    device: Device | None,
    local: datetime,
    now_ms: int,
    session_idle_ms: int,
    user_vector: npt.NDArray[np.float32] | None,
    personal: bool = True,
) -> UserProfile:
    """The profile for a decision; ``personal=False`` (a shared, segment-wide answer) keeps
    nothing of the user but the request's own device and time."""
    if not personal:
        return UserProfile(segment=None, device=device, local=local)
    session = state.session(now_ms, session_idle_ms)
    recent = state.interactions
    rows = tuple(index.row_of.get(i.item_id) for i in recent)
    session_rows = [index.row_of.get(i.item_id) for i in session[:5]]
    session_known = [r for r in session_rows if r is not None]
    session_vector = _mean_unit(index, session_known)
    engaged = [
        r
        for r, i in zip(rows, recent, strict=True)
        if r is not None and i.action in ENGAGED_ACTIONS
    ]
    price_preference = float(np.median(index.log_price[engaged])) if engaged else None
    return UserProfile(
        segment=state.segment(now_ms),
        device=device,
        local=local,
        session_length=len(session),
        recent=recent,
        recent_rows=rows,
        user_vector=user_vector,
        session_vector=session_vector,
        price_preference=price_preference,
        session_categories=frozenset(i.category for i in session if i.category),
    )


def _mean_unit(index: ItemIndex, rows: Sequence[int]) -> npt.NDArray[np.float32] | None:
    if not rows:
        return None
    mean = index.vectors[list(rows)].mean(axis=0)
    norm = float(np.linalg.norm(mean))
    if norm == 0:
        return None
    unit: npt.NDArray[np.float32] = (mean / norm).astype(np.float32)
    return unit


def _cyclic(value: float, period: float) -> tuple[float, float]:
    angle = 2 * math.pi * value / period
    return math.sin(angle), math.cos(angle)


def user_features(profile: UserProfile, index: ItemIndex) -> Features:
    """The 20 user features, shared by every candidate of a decision."""
    out = np.zeros(20, np.float32)
    out[SEGMENTS.index(profile.segment) if profile.segment in SEGMENTS else 4] = 1.0
    if profile.device in DEVICES:
        out[5 + DEVICES.index(profile.device)] = 1.0
    local = profile.local
    out[9:11] = _cyclic(local.hour + local.minute / 60, 24)
    out[11:13] = _cyclic(local.weekday() + local.hour / 24, 7)
    length = profile.session_length
    out[13 + (0 if length == 0 else 1 if length <= 3 else 2 if length <= 10 else 3)] = 1.0
    codes = [index.category_code(i.category) for i in profile.recent if i.category]
    counts = np.bincount([c for c in codes if c is not None], minlength=1).astype(np.float64)
    total = counts.sum()
    if total > 0:
        shares = np.sort(counts[counts > 0] / total)[::-1]
        out[17] = shares[0]
        out[18] = shares[1] if shares.size > 1 else 0.0
        entropy = -float(np.sum(shares * np.log(shares)))
        out[19] = (
            entropy / math.log(len(index.category_names)) if len(index.category_names) > 1 else 0
        )
    return out


def extract(profile: UserProfile, index: ItemIndex, rows: Rows) -> Features:
    """The (len(rows), 64) feature matrix of one decision."""
    n = rows.size
    x = np.zeros((n, FEATURES), np.float32)
    x[:, :20] = user_features(profile, index)

    category = index.category[rows]
    x[:, 20 : 20 + CATEGORY_EMBEDDING_DIM] = index.category_embedding[category]
    x[np.arange(n), 28 + index.price_bucket[rows]] = 1.0
    x[:, 33] = index.freshness[rows]
    x[:, 34] = index.popularity[rows]
    x[np.arange(n), 35 + index.content_type[rows]] = 1.0

    _affinity(x, profile, index, rows, category)
    _price_match(x, profile, index, rows)
    seen_rows = {r for r in profile.recent_rows if r is not None}
    seen_categories = {index.category_code(i.category) for i in profile.recent if i.category}
    x[:, 52] = ~np.isin(rows, list(seen_rows)) if seen_rows else 1.0
    x[:, CATEGORY_UNSEEN_COLUMN] = ~np.isin(category, [c for c in seen_categories if c is not None])
    x[:, 54] = index.freshness[rows] >= NEW_ARRIVAL_FRESHNESS
    x[:, 55] = 1.0 - index.popularity[rows]
    x[:, 56] = index.popularity[rows] >= TOP_DEMAND_POPULARITY
    x[:, 57] = index.popularity[rows] >= HIGH_DEMAND_POPULARITY
    x[:, 58] = index.trending[rows]
    x[:, 59] = index.limited[rows]
    weekend = float(profile.local.weekday() >= 5)
    evening = float(daypart(profile.local) in ("evening", "night"))
    x[:, 60] = weekend
    x[:, 61] = evening
    x[:, 62] = index.freshness[rows] * weekend
    x[:, 63] = index.freshness[rows] * evening
    return x


def _affinity(
    x: Features,
    profile: UserProfile,
    index: ItemIndex,
    rows: Rows,
    category: npt.NDArray[np.int32],
) -> None:
    categories = len(index.category_names)
    share = np.zeros(categories, np.float32)
    weighted = np.zeros(categories, np.float32)
    dismissed = np.zeros(categories, np.float32)
    engaged_rows: list[int] = []
    bought_rows: list[int] = []
    for interaction, row in zip(profile.recent, profile.recent_rows, strict=True):
        if row is None:
            continue
        code = index.category[row]
        share[code] += 1
        weighted[code] += max(0.0, ACTION_WEIGHTS.get(interaction.action, 0.0))
        if interaction.action == "dismiss":
            dismissed[code] += 1
        if interaction.action in ENGAGED_ACTIONS:
            engaged_rows.append(row)
        if interaction.action in BUYING_ACTIONS:
            bought_rows.append(row)
    if share.sum() > 0:
        x[:, 40] = (share / share.sum())[category]
    if weighted.sum() > 0:
        x[:, 41] = (weighted / weighted.sum())[category]
    x[:, 42] = (dismissed / np.maximum(share, 1))[category]
    if engaged_rows:
        x[:, 43] = np.isin(rows, engaged_rows)
    if bought_rows:
        x[:, 44] = np.isin(rows, bought_rows)
    if profile.session_categories:
        codes = [index.category_code(c) for c in profile.session_categories]
        x[:, 45] = np.isin(category, [c for c in codes if c is not None])
    x[:, 46] = _similarity(index, rows, profile.user_vector)
    x[:, 47] = _similarity(index, rows, profile.session_vector)


def _similarity(
    index: ItemIndex, rows: Rows, vector: npt.NDArray[np.float32] | None
) -> npt.NDArray[np.float32] | float:
    if vector is None:
        return 0.5
    sims: npt.NDArray[np.float32] = (index.vectors[rows] @ vector + 1.0) / 2.0
    return sims


def _price_match(x: Features, profile: UserProfile, index: ItemIndex, rows: Rows) -> None:
    if profile.price_preference is None:
        x[:, 51] = 1.0
        return
    distance = np.abs(index.log_price[rows] - profile.price_preference)
    bucket = np.where(distance <= math.log(1.25), 0, np.where(distance <= math.log(1.75), 1, 2))
    x[np.arange(rows.size), PRICE_MATCH_COLUMN + bucket] = 1.0
