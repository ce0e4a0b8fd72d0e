"""``perso demo``'s time series: what each answer was, in buckets of seconds, per region.

The driver records one ``Observation`` per request; the report's figures are drawn from
``bucketed`` (hit ratio, latency, share of personalised answers and engagements per slate,
per bucket and region) and ``reach`` (shoppers served from their own model so far). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ALL = "all"
# At most this many buckets on a figure's time axis, whatever the run's length.
MAX_BUCKETS = 60


@dataclass(frozen=True, slots=True)
class Observation:
    """One request of the demo's traffic, as its browser saw it."""

    t_s: float  # since the traffic started
    region: str
    user_id: str
    ok: bool  # a 200 with a slate
    hit: bool = False
    personalized: bool = False
    engaged: bool = False  # the shopper acted on the slate (a feedback was sent)
    client_ms: float | None = None
    edge_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Bucket:
    start_s: float
    requests: int
    errors: int
    hit_ratio: float | None  # of the answered requests; None when none was answered
    personalized: float | None
    engagement: float | None  # feedback sent per slate
    client_p50_ms: float | None
    client_p99_ms: float | None
    edge_p50_ms: float | None
    edge_p99_ms: float | None


def bucket_width(seconds: float) -> float:
    """Whole seconds per bucket, so that a run of ``seconds`` has at most ``MAX_BUCKETS``."""
    return float(max(1, math.ceil(seconds / MAX_BUCKETS)))


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(pct / 100 * len(ordered))))
    return ordered[rank - 1]


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarize(start_s: float, observations: Sequence[Observation]) -> Bucket:
    answered = [o for o in observations if o.ok]
    client = [o.client_ms for o in observations if o.client_ms is not None]
    edge = [o.edge_ms for o in answered if o.edge_ms is not None]
    return Bucket(
        start_s=start_s,
        requests=len(observations),
        errors=len(observations) - len(answered),
        hit_ratio=_share(sum(o.hit for o in answered), len(answered)),
        personalized=_share(sum(o.personalized for o in answered), len(answered)),
        engagement=_share(sum(o.engaged for o in answered), len(answered)),
        client_p50_ms=percentile(client, 50),
        client_p99_ms=percentile(client, 99),
        edge_p50_ms=percentile(edge, 50),
        edge_p99_ms=percentile(edge, 99),
    )


def bucketed(
    observations: Iterable[Observation], width_s: float, seconds: float
) -> dict[str, list[Bucket]]:
    """Per region (in order of first appearance) and ``ALL``: one bucket per ``width_s``
    from 0 to ``seconds`` (an observation at or past the end joins the last bucket)."""
    if width_s <= 0:
        raise ValueError(f"bucket width must be > 0, got {width_s}")
    count = max(1, math.ceil(seconds / width_s))
    slots: dict[str, list[list[Observation]]] = {}
    everything: list[list[Observation]] = [[] for _ in range(count)]
    for o in observations:
        index = min(count - 1, max(0, int(o.t_s // width_s)))
        slots.setdefault(o.region, [[] for _ in range(count)])[index].append(o)
        everything[index].append(o)
    return {
        name: [summarize(i * width_s, chunk) for i, chunk in enumerate(chunks)]
        for name, chunks in [*slots.items(), (ALL, everything)]
    }


def reach(observations: Iterable[Observation], width_s: float, seconds: float) -> list[int]:
    """Per bucket: how many distinct shoppers have had a personalised answer by its end."""
    count = max(1, math.ceil(seconds / width_s))
    first: dict[str, float] = {}
    for o in observations:
        if o.ok and o.personalized:
            first[o.user_id] = min(o.t_s, first.get(o.user_id, math.inf))
    new = [0] * count
    for t_s in first.values():
        new[min(count - 1, max(0, int(t_s // width_s)))] += 1
    out, running = [], 0
    for n in new:
        running += n
        out.append(running)
    return out
