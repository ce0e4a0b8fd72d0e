"""Who is asking, where and when, for one ranking decision, as pure functions: the
decision's context cell and the user's profile.

The context cell names the posteriors a decision ranks by (the bandit's
``context_cell``, e.g. ``mobile_evening``): the device and the part of
the user's local day. The profile is what the ranking's rules and explanations read of the
user: their recent interactions and session, the session's items' mean vector, their
usual price. A segment-wide answer's profile holds nothing of the user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import numpy.typing as npt

from origin.catalog.item_index import ItemIndex
from origin.ranking.history import Interaction, RankingHistory
from protocol.actions import ENGAGED_ACTIONS
from protocol.api import Device
from protocol.segments import Segment

SEGMENTS = (Segment.NEW, Segment.CASUAL, Segment.ACTIVE, Segment.POWER)
DEVICES = (Device.MOBILE, Device.DESKTOP, Device.TABLET, Device.TV)
DAYPARTS = ("night", "morning", "afternoon", "evening")  # 0-5, 6-11, 12-17, 18-23
ANY_DEVICE = "any"


def daypart(local: datetime) -> str:
    """The quarter of the day ``local`` falls in (night from 0 h, morning from 6, afternoon
    from 12, evening from 18): the second half of a context cell's key."""
    return DAYPARTS[local.hour // 6]


def context_cell(device: Device | None, local: datetime) -> str:
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
    state: RankingHistory,
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
