"""How far the users' models recomputed from the log (``origin.worker.recompute``) are from the
live ones, and which users cannot be expected to match.

A user's distance is the Euclidean distance between the two models' means
(``relevance.user_model``; a user without a model is at the prior's mean, 0): the most
the two could disagree on an item's score, on the probit scale, for a unit item vector.
Users whose history the recompute could not see are set apart, never compared:

- ``started_before``: the retained log holds entries of theirs older than ``--since``;
- ``trimmed``: their live record's window names observations the retained log does not
  hold (their history began before the log's retention); a user with a full window (50)
  shows only the last 50, so an older loss can hide there;
- ``in_flight``: entries the live workers had not applied at the cut (pending, not yet
  delivered, held for their tier), appended after it, or so recent that their join may
  close either side of it;
- ``no_live_record``: the recompute learnt something where the live keyspace has nothing.

The rest are compared: they match within ``tolerance``. What cannot match even for them:
the item posteriors and the position-bias model are recomputed from the recomputed log only, so
when ``--since`` falls after the log's beginning (or the log was trimmed) they start from
the prior instead of what they were then, and every model learnt under other baselines.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np

from origin.learned.user_models import UserRecord


class Kind(StrEnum):
    COMPARED = "compared"
    STARTED_BEFORE = "started_before"
    TRIMMED = "trimmed"
    IN_FLIGHT = "in_flight"
    NO_LIVE_RECORD = "no_live_record"


APART = (Kind.STARTED_BEFORE, Kind.TRIMMED, Kind.IN_FLIGHT, Kind.NO_LIVE_RECORD)
# What the text says of each group set apart.
WHY = {
    Kind.STARTED_BEFORE: "history before --since (their live models learnt from it)",
    Kind.TRIMMED: "history trimmed from the log (their live record names observations "
    "the retained log no longer holds)",
    Kind.IN_FLIGHT: "in flight at the cut (entries the live workers had not applied, or "
    "applied after it)",
    Kind.NO_LIVE_RECORD: "no live record (the recomputed models learnt what the live keyspace "
    "lacks)",
}
# Batch boundaries put elsewhere moved models up to 0.06 at the default dimension (128)
# (docs/measured.md, "perso recompute"); one engagement moves a fresh model 0.3 to 0.5.
DEFAULT_TOLERANCE = 0.1
WORST_SHOWN = 10


@dataclass(frozen=True)
class UserComparison:
    """One user's recomputed record beside the live one."""

    user_id: str
    kind: Kind
    distance: float  # of the means; 0 when neither has a model
    live_version: int
    recomputed_version: int
    window_overlap: float  # shared / all observations of the two applied windows (Jaccard)


def distance(live: UserRecord, recomputed: UserRecord) -> float:
    """Euclidean distance of the two models' means (a missing model: the prior's, 0)."""
    models = [r.model for r in (live, recomputed) if r.model is not None]
    if not models:
        return 0.0
    dim = models[0].dim

    def mean(record: UserRecord) -> np.ndarray:
        if record.model is None:
            return np.zeros(dim)
        return record.model.mean.astype(np.float64)

    return float(np.linalg.norm(mean(live) - mean(recomputed)))


def overlap(a: Iterable[int], b: Iterable[int]) -> float:
    """Jaccard overlap of two windows of applied observations (1 when both are empty)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def classify(
    *,
    before_since: bool,
    in_flight: bool,
    live: UserRecord | None,
    in_log: set[int],
) -> Kind:
    """Why a user cannot be compared, else ``COMPARED``. ``live``: their live record (None:
    none); ``in_log``: the hashes of every observation the retained log holds for
    them (``origin.learned.user_models.observation_hash``)."""
    if before_since:
        return Kind.STARTED_BEFORE
    if live is not None and set(live.window) - in_log:
        return Kind.TRIMMED
    if in_flight:
        return Kind.IN_FLIGHT
    if live is None:
        return Kind.NO_LIVE_RECORD
    return Kind.COMPARED


def compare(
    user_id: str,
    kind: Kind,
    live: UserRecord | None,
    recomputed: UserRecord,
) -> UserComparison:
    live = live if live is not None else UserRecord()
    return UserComparison(
        user_id,
        kind,
        distance(live, recomputed),
        live.version,
        recomputed.version,
        overlap(live.window, recomputed.window),
    )


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 of nothing)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Recomputed:
    """What the recompute read and applied."""

    since_ms: int
    cut_ms: int
    events: int
    decisions: int  # decision records (an entry may hold several)
    items: int  # item vectors copied
    # The recompute started at the log's beginning and nothing was trimmed from it: the item
    # posteriors were recomputed from everything they had learnt from.
    posteriors_from_start: bool


@dataclass(frozen=True)
class Summary:
    recomputed: Recomputed
    tolerance: float
    users: int  # with a record on either side
    compared: int
    matched: int
    max_distance: float
    p99_distance: float
    windows_equal: int
    live_writes: int  # versions summed over the compared users
    recomputed_writes: int
    apart: dict[str, int]
    worst: list[UserComparison] = field(default_factory=list)


def summarise(recomputed: Recomputed, users: Sequence[UserComparison], tolerance: float) -> Summary:
    compared = [u for u in users if u.kind == Kind.COMPARED]
    distances = [u.distance for u in compared]
    counts = Counter(u.kind for u in users)
    return Summary(
        recomputed=recomputed,
        tolerance=tolerance,
        users=len(users),
        compared=len(compared),
        matched=sum(1 for d in distances if d <= tolerance),
        max_distance=max(distances, default=0.0),
        p99_distance=quantile(distances, 0.99),
        windows_equal=sum(1 for u in compared if u.window_overlap == 1.0),
        live_writes=sum(u.live_version for u in compared),
        recomputed_writes=sum(u.recomputed_version for u in compared),
        apart={kind.value: counts[kind] for kind in APART},
        worst=sorted(compared, key=lambda u: -u.distance)[:WORST_SHOWN],
    )


def as_json(summary: Summary) -> dict[str, Any]:
    return asdict(summary)


def _moment(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def text(summary: Summary) -> str:
    r = summary.recomputed
    share = summary.matched / summary.compared if summary.compared else 0.0
    start = _moment(r.since_ms) if r.since_ms else "its beginning"
    lines = [
        f"recomputed the log from {start} to the cut at {_moment(r.cut_ms)}: "
        f"{r.events:,} events, {r.decisions:,} decisions, {r.items:,} item vectors",
        f"users with a model on either side: {summary.users:,}",
        f"  compared: {summary.compared:,}; within {summary.tolerance:g} of the live model: "
        f"{summary.matched:,} ({share:.1%}); distance max {summary.max_distance:.4f}, "
        f"p99 {summary.p99_distance:.4f}",
        f"  applied windows equal: {summary.windows_equal:,} of {summary.compared:,}; "
        f"writes (versions) live {summary.live_writes:,}, recompute {summary.recomputed_writes:,} "
        "(they count batches: not compared)",
        "  set apart (cannot match):",
    ]
    for kind in APART:
        lines.append(f"    {summary.apart[kind.value]:>7,}  {WHY[kind]}")
    if r.posteriors_from_start:
        lines.append("item posteriors: recomputed from the beginning of the log")
    else:
        lines.append(
            "item posteriors: recomputed from the prior at --since, not as they were then (the "
            "log begins earlier or was trimmed): compared users differ by that too"
        )
    worst = [u for u in summary.worst if u.distance > 0]
    if worst:
        lines.append("largest distances:")
        for u in worst:
            lines.append(
                f"  {u.user_id:<24} {u.distance:.4f}  versions live {u.live_version}, "
                f"recompute {u.recomputed_version}; windows overlap {u.window_overlap:.0%}"
            )
    return "\n".join(lines)
