from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from origin.event_streams.event_log import to_events
from protocol.api import FeedbackRequest
from protocol.client_time import NOW
from protocol.events import epoch_ms


@pytest.mark.parametrize(
    ("moment", "ms"),
    [
        (datetime(2026, 1, 1, tzinfo=UTC), 1_767_225_600_000),
        (datetime(2026, 1, 1), 1_767_225_600_000),  # no zone: UTC, not the host's zone
        (datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), 1_767_225_600_000),
        (datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC), 1_767_225_600_001),
    ],
)
def test_epoch_ms(moment: datetime, ms: int) -> None:
    assert epoch_ms(moment) == ms


def test_events_take_the_client_time_or_the_acceptance_time() -> None:
    request = FeedbackRequest.model_validate(
        {
            "user_id": "u",
            "feedback": [
                {"item_id": "a", "action": "view", "timestamp": "2026-01-01T00:00:00"},
                {"item_id": "b", "action": "click"},
            ],
        },
        context={NOW: 1_767_225_600.0},
    )
    timed, untimed = to_events(request, now_ms=42)
    assert (timed.timestamp_ms, timed.accepted_ms) == (1_767_225_600_000, 42)
    assert (untimed.timestamp_ms, untimed.accepted_ms) == (42, 42)
    assert timed.interaction_id != untimed.interaction_id
