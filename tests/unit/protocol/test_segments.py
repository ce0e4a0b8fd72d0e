from __future__ import annotations

import pytest

from protocol.segments import Segment, is_fine_grained, is_known, more_engaged, segment_for


@pytest.mark.parametrize(
    ("per_day", "ever_seen", "expected"),
    [
        (0, False, Segment.NEW),
        (0, True, Segment.CASUAL),  # seen before, quiet today
        (1, True, Segment.CASUAL),
        (2, True, Segment.CASUAL),  # seed 000: casual < 3 a day
        (3, True, Segment.ACTIVE),
        (10, True, Segment.ACTIVE),  # active 3-10
        (11, True, Segment.POWER),  # power > 10
        (500, True, Segment.POWER),
    ],
)
def test_segment_thresholds(per_day: int, ever_seen: bool, expected: Segment) -> None:
    assert segment_for(per_day, ever_seen=ever_seen) is expected


def test_negative_count_is_an_error() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        segment_for(-1, ever_seen=True)


@pytest.mark.parametrize(
    ("segment", "fine"),
    [(Segment.NEW, False), (Segment.CASUAL, False), (Segment.ACTIVE, True), (Segment.POWER, True)],
)
def test_only_active_and_power_users_answers_live_until_an_interaction_settled(
    segment: Segment, fine: bool
) -> None:
    assert is_fine_grained(segment) is fine


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (Segment.NEW, Segment.POWER, Segment.POWER),
        (Segment.CASUAL, Segment.POWER, Segment.POWER),  # the edge saw one click today
        (Segment.POWER, Segment.CASUAL, Segment.POWER),  # the token is older than the day
        (Segment.ACTIVE, Segment.CASUAL, Segment.ACTIVE),
        (Segment.NEW, Segment.NEW, Segment.NEW),
        (Segment.CASUAL, Segment.NEW, Segment.CASUAL),
    ],
)
def test_more_engaged(a: Segment, b: Segment, expected: Segment) -> None:
    assert more_engaged(a, b) is expected


@pytest.mark.parametrize(
    ("segment", "known"),
    [
        (Segment.NEW, False),
        (Segment.CASUAL, True),
        (Segment.ACTIVE, True),
        (Segment.POWER, True),
    ],
)
def test_every_segment_but_new_is_known_whatever_its_activity(
    segment: Segment, known: bool
) -> None:
    assert is_known(segment) is known
