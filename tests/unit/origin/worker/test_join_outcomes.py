from __future__ import annotations

import numpy as np
import pytest

from origin.learned.posteriors import ItemOutcome
from origin.worker.join_lessons import (
    closing_id,
    conversion_mark,
    impression_mark,
    impressions,
    outcomes,
)
from protocol.decisions import Decision, Shown
from relevance.examination import MAX_POSITIONS, PRIOR, Tally, estimate, miss_weight

EXAMINE = estimate(Tally.empty())  # the prior: 1 / sqrt(k)


def decision(*items: str, positions: list[int] | None = None) -> Decision:
    where = positions if positions is not None else list(range(1, len(items) + 1))
    return Decision(
        request_id="req-1",
        user_id="u-1",
        audience="user",
        context="mobile_evening",
        page="home",
        at_ms=1000,
        served_by="origin",
        policy="thompson",
        policy_version="1",
        model_version="m",
        shown=tuple(Shown(item, pos, 0.0, 0.5) for item, pos in zip(items, where, strict=True)),
    )


def weight(position: int, attract: float) -> float:
    return float(miss_weight(np.array([PRIOR[position - 1]]), np.array([attract]))[0])


def test_each_shown_item_teaches_by_what_the_user_did() -> None:
    d = decision("a", "b", "c", "d")
    attract = {"a": 0.3, "b": 0.1, "c": 0.2}  # "d" unknown: counts as 0
    closed = outcomes(d, engaged={"a": 0.25}, dismissed={"c"}, examine=EXAMINE, attract=attract)
    assert [(o.item_id, o.engagements) for o in closed.items] == [
        ("a", 1.0),
        ("b", 0.0),
        ("c", 0.0),
        ("d", 0.0),
    ]
    assert [o.failures for o in closed.items] == pytest.approx(
        [
            0.0,  # engaged: a success
            weight(2, 0.1),  # left alone: a miss weighted by the chance it was examined
            1.0,  # dismissed: a whole failure wherever it was
            PRIOR[3],  # left alone and unattractive: the examination probability itself
        ]
    )
    # the user's model gets every non-engagement as a negative of the same weight
    assert [m[0] for m in closed.misses] == ["b", "c", "d"]
    assert [m[1] for m in closed.misses] == pytest.approx([weight(2, 0.1), 1.0, PRIOR[3]])


def test_a_miss_counts_less_the_further_down_it_was() -> None:
    items = [f"i{k}" for k in range(1, 11)]
    closed = outcomes(decision(*items), {}, set(), EXAMINE, dict.fromkeys(items, 0.1))
    failures = [o.failures for o in closed.items]
    assert failures == sorted(failures, reverse=True)
    assert failures[0] == pytest.approx(1.0)  # position 1 is always examined
    assert failures[-1] < 0.35


def test_an_attractive_item_left_alone_was_probably_not_seen() -> None:
    attract = {"dull": 0.05, "great": 0.9}
    # each at position 2 after the other
    great = outcomes(decision("dull", "great"), {}, set(), EXAMINE, attract).items[1]
    dull = outcomes(decision("great", "dull"), {}, set(), EXAMINE, attract).items[1]
    assert (great.item_id, dull.item_id) == ("great", "dull")
    # missing an item one would likely have engaged with says the position was likely not
    # looked at: it counts as less of a failure
    assert great.failures < dull.failures
    assert great.failures == pytest.approx(weight(2, 0.9))
    assert dull.failures == pytest.approx(weight(2, 0.05))


def test_an_item_engaged_with_and_dismissed_counts_as_engaged() -> None:
    closed = outcomes(decision("a"), {"a": 0.25}, {"a"}, EXAMINE, {"a": 0.2})
    assert closed.items == [ItemOutcome("a", 1.0, 0.0, 0.25)]
    assert closed.misses == []


def test_feedback_for_items_not_shown_is_ignored() -> None:
    closed = outcomes(decision("a"), {"zzz": 0.25}, {"yyy"}, EXAMINE, {})
    # position 1, never engaging: a whole miss
    assert closed.items == [ItemOutcome("a", 0.0, 1.0)]
    assert closed.misses == [("a", 1.0)]


def test_the_tally_is_the_decisions_expected_examinations() -> None:
    d = decision("a", "b", "c")
    attract = {"a": 0.3, "b": 0.1, "c": 0.2}
    closed = outcomes(d, {"b": 0.25}, {"c"}, EXAMINE, attract)
    assert closed.tally.shown[:3].tolist() == [1.0, 1.0, 1.0]
    assert closed.tally.shown.sum() == 3.0
    assert closed.tally.examined[0] == pytest.approx(weight(1, 0.3))
    assert closed.tally.examined[1] == 1.0  # engaged: examined
    # the position-bias model knows engagements only: a dismissed item counts as a miss
    assert closed.tally.examined[2] == pytest.approx(weight(3, 0.2))


def test_positions_come_from_the_record_and_past_the_last_count_there() -> None:
    d = decision("a", "b", positions=[4, 250])
    closed = outcomes(d, {}, set(), EXAMINE, {"a": 0.5, "b": 0.5})
    assert closed.items[0].failures == pytest.approx(weight(4, 0.5))
    assert closed.items[1].failures == pytest.approx(weight(MAX_POSITIONS, 0.5))
    assert closed.tally.shown[3] == 1.0
    assert closed.tally.shown[MAX_POSITIONS - 1] == 1.0


def test_an_estimated_examination_is_used_as_given() -> None:
    examine = np.full(MAX_POSITIONS, 0.25)
    examine[0] = 1.0
    closed = outcomes(decision("a", "b"), {}, set(), examine, {})
    assert [o.failures for o in closed.items] == pytest.approx([1.0, 0.25])


def test_a_decision_that_showed_nothing_teaches_nothing() -> None:
    closed = outcomes(decision(), {"a": 0.25}, {"b"}, EXAMINE, {})
    assert closed.items == []
    assert closed.misses == []
    assert closed.tally.shown.sum() == 0.0
    assert closed.tally.examined.sum() == 0.0


@pytest.mark.parametrize(("request_id", "expected"), [("req-1", "close:req-1"), ("", "close:")])
def test_closing_id(request_id: str, expected: str) -> None:
    assert closing_id(request_id) == expected


def test_a_closing_is_not_an_interaction_id() -> None:
    # the closing's negatives must not be taken for the request's own id in the window
    assert closing_id("req-1") != "req-1"
    assert closing_id("a") != closing_id("b")


def test_an_engagement_is_worth_its_best_grade_a_miss_nothing() -> None:
    closed = outcomes(decision("a", "b", "c"), {"a": 1.0, "c": 0.25}, set(), EXAMINE, {})
    assert [(o.item_id, o.engagements, o.grades) for o in closed.items] == [
        ("a", 1.0, 1.0),  # a purchase: one engagement, worth a purchase
        ("b", 0.0, 0.0),
        ("c", 1.0, 0.25),
    ]


def test_impressions_count_each_shown_item_by_what_came_before_its_decision() -> None:
    d = decision("a", "b", "c")
    counted = impressions(d, [1.0, 0.4, 0.3], ["", "o", "x"], [0.0, 0.25, 0.0])
    assert counted == [
        ItemOutcome("a", 0.0, 1.0),  # shown: a failure of its weight
        ItemOutcome("b", 1.0, 0.0, 0.25),  # engaged before the decision came: a success
        ItemOutcome("c", 0.0, 1.0),  # dismissed before it came: a whole failure
    ]


@pytest.mark.parametrize("state", ["", "e", "d"])
def test_an_impression_converted_since_a_first_delivery_counts_as_it_first_did(
    state: str,
) -> None:
    # a decision delivered again: its impressions under the same mark, as first counted
    assert impressions(decision("a"), [0.6], [state], [0.0]) == [ItemOutcome("a", 0.0, 0.6)]


def test_the_marks_of_impressions_and_conversions_are_apart() -> None:
    marks = {
        impression_mark("r-1"),
        impression_mark("r-2"),
        conversion_mark("r-1", "a"),
        conversion_mark("r-1", "b"),
        conversion_mark("r-2", "a"),
        closing_id("r-1"),
        "r-1",
    }
    assert len(marks) == 7
