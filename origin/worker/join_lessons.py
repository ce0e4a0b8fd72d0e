"""What a decision's join teaches (``origin.worker.joins``), worked out from what it holds:
its shown items' impressions when the decision comes, what feedback noted in it teaches at
once, its lessons when it closes, the marks and ids under which each is counted once, and
what closed joins add to the learning curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.learned.posteriors import ALL_CONTEXTS, ItemOutcome
from origin.worker.join_record import (
    CONVERT,
    DISMISS,
    DISMISSED_FIRST,
    ENGAGED_FIRST,
    GAIN,
    LATE,
    SEP,
    as_text,
)
from protocol import keys
from protocol.actions import ENGAGED_ACTIONS, grade_of
from protocol.decisions import Decision
from protocol.events import FeedbackEvent
from redis_client.client import RedisPipeline
from relevance.examination import Tally, at, e_step, miss_weight


@dataclass(frozen=True)
class Closed:
    """What one decision taught."""

    items: list[ItemOutcome]  # for the item posteriors
    # (item, weight): every non-engagement as a negative for the user's model (the close
    # applies those left alone: a dismiss taught the model when its event was read).
    misses: list[tuple[str, float]]
    tally: Tally  # expected examinations per position


def outcomes(
    decision: Decision,
    engaged: Mapping[str, float],
    dismissed: set[str],
    examine: npt.NDArray[np.float64],
    attract: Mapping[str, float],
) -> Closed:
    """The lessons of ``decision`` given what the user engaged with (each item's best
    grade) and dismissed: ``examine`` the position-bias estimate
    (``relevance.examination.estimate``), ``attract`` each item's engagement rate (a
    missing one counts as 0)."""
    items: list[ItemOutcome] = []
    misses: list[tuple[str, float]] = []
    positions = np.array([s.position for s in decision.shown], np.int64)
    hit = np.array([s.item_id in engaged for s in decision.shown], bool)
    rates = np.array([attract.get(s.item_id, 0.0) for s in decision.shown])
    weights = miss_weight(at(examine, positions), rates)
    for shown, was_hit, weight in zip(decision.shown, hit, weights, strict=True):
        if was_hit:
            items.append(ItemOutcome(shown.item_id, 1.0, 0.0, engaged[shown.item_id]))
        elif shown.item_id in dismissed:
            items.append(ItemOutcome(shown.item_id, 0.0, 1.0))
            misses.append((shown.item_id, 1.0))
        else:
            items.append(ItemOutcome(shown.item_id, 0.0, float(weight)))
            misses.append((shown.item_id, float(weight)))
    return Closed(items, misses, e_step(positions, hit, rates, examine))


def impression_mark(request_id: str) -> str:
    """The mark under which a decision's impressions are added to the item posteriors."""
    return f"imp:{request_id}"


def conversion_mark(request_id: str, item_id: str) -> str:
    """The mark under which an item's impression in a decision is converted (an engagement
    or a dismiss that came after its decision), once whatever reports it."""
    return f"conv:{request_id}{SEP}{item_id}"


def impressions(
    decision: Decision, weights: Sequence[float], states: Sequence[str], grades: Sequence[float]
) -> list[ItemOutcome]:
    """What the shown items of ``decision`` count as when it comes: each its impression of
    weight ``weights[n]`` (a failure that weighs the chance it was examined), unless its
    ``states[n]`` says the user's engagement came first (``"o"``: a success worth
    ``grades[n]``) or their dismiss (``"x"``: a whole failure)."""
    out = []
    for shown, weight, state, grade in zip(decision.shown, weights, states, grades, strict=True):
        if state == ENGAGED_FIRST:
            out.append(ItemOutcome(shown.item_id, 1.0, 0.0, grade))
        elif state == DISMISSED_FIRST:
            out.append(ItemOutcome(shown.item_id, 0.0, 1.0))
        else:
            out.append(ItemOutcome(shown.item_id, 0.0, weight))
    return out


def closing_id(request_id: str) -> str:
    """The observation id of a decision's closing, in the user's window."""
    return f"close:{request_id}"


def noted_lesson(
    e: FeedbackEvent, reply: Sequence[bytes | str]
) -> tuple[str, list[str], ItemOutcome] | None:
    """What feedback noted in its join teaches its item at once, given the join's reply
    (``join_record.NOTE``, a decided or closed join's): the mark it counts under, the
    cells it counts in and the outcome; None when it teaches nothing."""
    assert e.request_id is not None
    kind, cell = as_text(reply[0]), as_text(reply[1])
    if kind == CONVERT:
        weight = float(reply[2])
        mark = conversion_mark(e.request_id, e.item_id)
        outcome = ItemOutcome(e.item_id, 1.0, -weight, float(reply[3]))
        cells = [cell, ALL_CONTEXTS]
    elif kind == DISMISS:
        weight = float(reply[2])
        mark = conversion_mark(e.request_id, e.item_id)
        outcome = ItemOutcome(e.item_id, 0.0, 1.0 - weight)
        cells = [cell, ALL_CONTEXTS]
    elif kind == GAIN:
        # A better action on an engagement counted: its extra worth.
        mark, cells = e.interaction_id, [ALL_CONTEXTS]
        outcome = ItemOutcome(e.item_id, 0.0, 0.0, float(reply[2]))
    elif kind == LATE and e.action in ENGAGED_ACTIONS:
        mark, cells = e.interaction_id, [cell, ALL_CONTEXTS]
        outcome = ItemOutcome(e.item_id, 1.0, 0.0, grade_of(e.action, e.reward_override))
    else:
        return None
    return mark, cells, outcome


def curve_point(
    records: Sequence[tuple[str, str, Decision | None, Mapping[str, float], set[str]]],
) -> tuple[int, int]:
    """(slates, clicks) of closed joins: the decisions among them, and their shown items
    engaged with (a join without its decision record counts in neither)."""
    slates = clicks = 0
    for _, _, decision, engaged, _ in records:
        if decision is None:
            continue
        slates += 1
        clicks += sum(1 for shown in decision.shown if shown.item_id in engaged)
    return slates, clicks


def queue_curve(pipe: RedisPipeline, point: tuple[int, int], now_ms: int) -> None:
    """The learning curve's minute (``keys.learning_curve``) grown by ``point``."""
    slates, clicks = point
    if slates == 0:
        return
    key = keys.learning_curve(now_ms // 60_000)
    pipe.hincrby(key, "slates", slates)
    if clicks:
        pipe.hincrby(key, "clicks", clicks)
    pipe.expire(key, keys.LEARNING_CURVE_TTL_S)
