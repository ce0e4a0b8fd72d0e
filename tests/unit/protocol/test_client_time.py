from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from protocol.api import FeedbackRequest, PersonalizeRequest
from protocol.client_time import MAX_AGE_S, MAX_AHEAD_S, NOW, check, now_of
from web.problems import validation_problems

NOW_S = 1_767_225_600.0  # 2026-01-01T00:00:00Z
AT = datetime.fromtimestamp(NOW_S, UTC)


@pytest.mark.parametrize(
    "moment",
    [
        AT,
        AT.replace(tzinfo=None),  # naive: UTC
        AT.astimezone(timezone(timedelta(hours=14))),
        AT.astimezone(timezone(timedelta(hours=-12))),
        AT - timedelta(seconds=MAX_AGE_S),
        AT + timedelta(seconds=MAX_AHEAD_S),
    ],
)
def test_believable_times_pass_unchanged(moment: datetime) -> None:
    assert check(moment, NOW_S) is moment


@pytest.mark.parametrize(
    ("moment", "reason"),
    [
        # Issue 15: both raised in the origin's local-time computation (a 500).
        (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=23, minutes=59))), "UTC offset"),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "ahead"),
        (datetime(1, 1, 1, tzinfo=UTC), "days old"),
        (datetime(1, 1, 1), "days old"),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(-timedelta(hours=14))), "ahead"),
        (AT.astimezone(timezone(timedelta(hours=14, minutes=1))), "UTC offset"),
        (AT - timedelta(seconds=MAX_AGE_S + 1), "days old"),
        (AT + timedelta(seconds=MAX_AHEAD_S + 1), "ahead"),
    ],
)
def test_unbelievable_times_are_refused(moment: datetime, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check(moment, NOW_S)


def test_the_clock_comes_from_the_validation_context() -> None:
    assert now_of({NOW: 5.0}) == 5.0
    assert now_of(None) > NOW_S  # the wall clock without one


@pytest.mark.parametrize(
    ("model", "body", "field"),
    [
        (
            PersonalizeRequest,
            '{"user_id": "u", "context": {"page_type": "home", "device": "tv",'
            ' "timestamp": "0001-01-01T00:00:00+23:59"}}',
            "context.timestamp",
        ),
        (
            FeedbackRequest,
            '{"user_id": "u", "feedback": [{"item_id": "i", "action": "click",'
            ' "timestamp": "9999-12-31T23:59:59Z"}]}',
            "feedback[0].timestamp",
        ),
    ],
)
def test_the_400_names_the_field(model: type[PersonalizeRequest], body: str, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate_json(body, context={NOW: NOW_S})
    assert validation_problems(caught.value.errors())[0]["field"] == field
