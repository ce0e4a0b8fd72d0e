"""How a recomputed user is compared with the live one (``origin.worker.recompute_comparison``)
and when an entry is too close to the recompute's cut (``origin.worker.retained_log``)."""

from __future__ import annotations

import numpy as np
import pytest

from origin.learned.user_models import UserRecord, observation_hash
from origin.worker.recompute_comparison import (
    Kind,
    Recomputed,
    UserComparison,
    classify,
    compare,
    distance,
    overlap,
    quantile,
    summarise,
    text,
)
from origin.worker.retained_log import closes_unsettled, describe, near_cut
from protocol import keys
from protocol.decisions import DECISION_FIELD, Decision, Shown, encode_decision
from protocol.events import EVENT_FIELD, FeedbackEvent, encode_event
from relevance.user_model import UserModel


def record(mean: list[float] | None, window: tuple[int, ...] = (), version: int = 1) -> UserRecord:
    if mean is None:
        return UserRecord(version=version, window=window)
    m = np.array(mean, np.float32)
    return UserRecord(version=version, model=UserModel(m, np.ones_like(m)), window=window)


@pytest.mark.parametrize(
    ("live", "recomputed", "expected"),
    [
        (record([1, 2, 2]), record([1, 2, 2]), 0.0),
        (record([1, 2, 2]), record([1, 2, 1]), 1.0),
        (record([3, 4, 0]), record(None), 5.0),  # a missing model is the prior's mean, 0
        (record(None), record([0, 3, 4]), 5.0),
        (record(None), record(None), 0.0),
    ],
    ids=["same", "one-apart", "no-recomputed-model", "no-live-model", "neither"],
)
def test_the_distance_is_between_the_means(
    live: UserRecord, recomputed: UserRecord, expected: float
) -> None:
    assert distance(live, recomputed) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [((1, 2, 3), (3, 2, 1), 1.0), ((1, 2), (2, 3), 1 / 3), ((), (), 1.0), ((1,), (), 0.0)],
)
def test_windows_overlap_as_sets(a: tuple[int, ...], b: tuple[int, ...], expected: float) -> None:
    assert overlap(a, b) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("before_since", "in_flight", "live", "in_log", "kind"),
    [
        (False, False, record([1.0], (1, 2)), {1, 2, 3}, Kind.COMPARED),
        # Retained entries older than --since: their live model learnt from them.
        (True, False, record([1.0], (1, 2)), {1, 2}, Kind.STARTED_BEFORE),
        # The live window names an observation the retained log does not hold.
        (False, False, record([1.0], (0, 1, 2)), {1, 2}, Kind.TRIMMED),
        (False, True, record([1.0], (1, 2)), {1, 2}, Kind.IN_FLIGHT),
        (False, True, None, {1, 2}, Kind.IN_FLIGHT),  # not applied live yet
        (False, False, None, {1, 2}, Kind.NO_LIVE_RECORD),
        # What happened first is the reason given: history before --since, then trimmed.
        (True, True, record([1.0], (0,)), set(), Kind.STARTED_BEFORE),
        (False, True, record([1.0], (0,)), set(), Kind.TRIMMED),
    ],
    ids=[
        "compared",
        "started-before",
        "trimmed",
        "in-flight",
        "in-flight-no-record",
        "no-live-record",
        "before-wins",
        "trimmed-wins",
    ],
)
def test_who_is_set_apart_and_why(
    before_since: bool, in_flight: bool, live: UserRecord | None, in_log: set[int], kind: Kind
) -> None:
    got = classify(before_since=before_since, in_flight=in_flight, live=live, in_log=in_log)
    assert got == kind


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 0.99, 0.0),
        ([3.0], 0.99, 3.0),
        ([float(v) for v in range(1, 101)], 0.99, 99.0),
        ([float(v) for v in range(1, 101)], 0.5, 50.0),
        ([5.0, 1.0, 3.0], 1.0, 5.0),
    ],
)
def test_quantiles_are_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert quantile(values, q) == expected


def test_a_summary_counts_matches_among_the_compared_only() -> None:
    users = [
        compare("a", Kind.COMPARED, record([1, 0]), record([1, 0])),
        compare("b", Kind.COMPARED, record([1, 0], (1,), 3), record([1, 0.05], (1,), 2)),
        compare("c", Kind.COMPARED, record([0, 0], (1, 2)), record([0, 1], (1,))),
        compare("d", Kind.TRIMMED, record([9, 9]), record([0, 0])),
        compare("e", Kind.IN_FLIGHT, record([9, 9]), record([0, 0])),
    ]
    recomputed = Recomputed(0, 1000, 10, 5, 4, True)
    summary = summarise(recomputed, users, tolerance=0.1)
    assert (summary.users, summary.compared, summary.matched) == (5, 3, 2)
    assert summary.max_distance == pytest.approx(1.0)
    assert summary.windows_equal == 2
    assert (summary.live_writes, summary.recomputed_writes) == (5, 4)
    assert summary.apart == {"started_before": 0, "trimmed": 1, "in_flight": 1, "no_live_record": 0}
    assert [u.user_id for u in summary.worst] == ["c", "b", "a"]
    shown = text(summary)
    assert "within 0.1 of the live model: 2 (66.7%)" in shown
    assert "recomputed from the beginning of the log" in shown


def test_a_comparison_of_a_user_without_a_live_record_starts_from_nothing() -> None:
    c = compare("u", Kind.NO_LIVE_RECORD, None, record([0.0, 2.0], (7,), 4))
    assert c == UserComparison("u", Kind.NO_LIVE_RECORD, 2.0, 0, 4, 0.0)


CUT = 1_000_000


@pytest.mark.parametrize(
    ("at_ms", "decision", "near"),
    [
        (CUT - 6000, False, False),
        (CUT - 4000, False, True),  # the live workers trail by up to 5 s
        (CUT, False, True),
        (CUT - 6000, True, True),  # its arrival closes earlier joins 2 s after
        (CUT - 8000, True, False),
    ],
)
def test_entries_near_the_cut(at_ms: int, decision: bool, near: bool) -> None:
    assert near_cut(at_ms, decision, CUT, settle_ms=5000, grace_ms=2000) is near


@pytest.mark.parametrize(
    ("due_ms", "unsettled"),
    [
        (CUT - 6000, False),  # closed live and in the recompute
        (CUT - 4000, True),  # the live worker may not have closed it yet
        (CUT + 30_000, True),  # closed live while the recompute ran, not in the recompute
        (CUT + 64_000, True),
        (CUT + 66_000, False),  # open on both sides when the live records were read
    ],
)
def test_joins_due_between_the_cut_and_the_read(due_ms: int, unsettled: bool) -> None:
    read = CUT + 60_000
    assert closes_unsettled(due_ms, CUT, read, settle_ms=5000) is unsettled


def test_an_entry_is_described_by_whose_it_is_and_what_it_can_teach() -> None:
    click = FeedbackEvent("ix-1", "u-1", "it-1", "click", 5, 5)
    view = FeedbackEvent("ix-2", "u-1", "it-2", "view", 5, 5)
    d = Decision(
        "r-1", "u-2", "user", "mobile_evening", "home", 5, "origin", "p", "1", "m",
        (Shown("it-3", 1, 0.0, 1.0), Shown("it-4", 2, 0.0, 1.0)),
    )  # fmt: skip
    stream = keys.events_stream(0)
    e = describe(stream, False, b"7-1", {EVENT_FIELD: encode_event(click)})
    assert (e.at, e.users, e.items, e.records) == (
        (7, 1),
        {"u-1": {observation_hash("ix-1")}},
        frozenset({"it-1"}),
        1,
    )
    # A view teaches the model nothing, but is the user's all the same.
    assert describe(stream, False, b"8-0", {EVENT_FIELD: encode_event(view)}).users == {
        "u-1": set()
    }
    decided = describe(keys.decisions_stream(0), True, b"9-0", {DECISION_FIELD: encode_decision(d)})
    assert decided.users == {"u-2": {observation_hash("close:r-1")}}
    assert decided.items == frozenset({"it-3", "it-4"})
    broken = describe(stream, False, b"10-0", {EVENT_FIELD: b"\x00"})
    assert (broken.users, broken.items, broken.records) == ({}, frozenset(), 0)
