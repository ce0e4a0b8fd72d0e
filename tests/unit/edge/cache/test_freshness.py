from __future__ import annotations

import pytest

from edge.cache.freshness import Freshness, freshness, refresh_at, refresh_due


@pytest.mark.parametrize(
    ("filled", "expires", "at"),
    [
        (0, 300, 270),  # last 10%
        (0, 10, 9),  # at least one second
        (0, 9.9, 9.9),  # short-lived entries (the settle window) are never refreshed early
        (0, 2, 2),
        (100, 100, 100),
    ],
)
def test_refresh_window(filled: float, expires: float, at: float) -> None:
    assert refresh_at(filled, expires) == pytest.approx(at)


@pytest.mark.parametrize(
    ("now", "state"),
    [
        (0, Freshness.FRESH),
        (269.9, Freshness.FRESH),
        (270, Freshness.REVALIDATE),
        (299.9, Freshness.REVALIDATE),
        (300, Freshness.STALE),
        (3899.9, Freshness.STALE),
        (3900, Freshness.GONE),
    ],
)
def test_states_over_a_lifetime(now: float, state: Freshness) -> None:
    assert freshness(now, filled_at=0, expires_at=300, stale_until=3900) is state


def test_an_entry_without_a_stale_window_is_gone_at_expiry() -> None:
    assert freshness(300, filled_at=0, expires_at=300, stale_until=300) is Freshness.GONE


@pytest.mark.parametrize(
    ("state", "expires", "key_ends", "due"),
    [
        (Freshness.REVALIDATE, 100, 900, True),
        (Freshness.REVALIDATE, 900, 900, False),  # the key ends with the entry
        (Freshness.REVALIDATE, 1000, 900, False),
        (Freshness.FRESH, 100, 900, False),
        (Freshness.STALE, 100, 900, False),
    ],
)
def test_refresh_due(state: Freshness, expires: float, key_ends: float, due: bool) -> None:
    assert refresh_due(state, expires_at=expires, key_ends_at=key_ends) is due
