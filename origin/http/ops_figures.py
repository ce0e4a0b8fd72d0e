"""The operations page's figures, computed from two scrapes of a process's ``/metrics``.

Pure functions over parsed samples (``Sample``): a counter's rate between two scrapes
(a counter that went down was reset by a restart: what it counts since is the increase),
a quantile of a histogram's growth between them (Prometheus's ``histogram_quantile``:
linear within the bucket), and the rows of the page: one per edge process, one per
region (its processes' growth summed, then divided), one per origin, the workers.
A figure that cannot be known (a first scrape, a missing series) is None, never 0.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]

ANSWERS = "perso_edge_answers_total"
LATENCY = "perso_edge_personalize_seconds_bucket"
CIRCUIT = "perso_edge_origin_circuit_state"
SYNC_LAG = "perso_edge_sync_lag_seconds"
SYNC_GAPS = "perso_edge_sync_gaps_total"
LLM_CALLS = "perso_origin_llm_calls_total"
LLM_FALLBACKS = "perso_origin_llm_fallbacks_total"
LLM_SPEND = "perso_origin_llm_cost_usd_total"
LLM_ENABLED = "perso_origin_llm_enabled"
WORKER_ENTRIES = "perso_worker_entries_total"
WORKER_BACKLOG = "perso_worker_backlog"
WORKER_FRESHNESS = "perso_worker_freshness_p99_seconds"
SHADOW = "perso_origin_shadow_"
LAST = "perso_evaluation_last_"


@dataclass(frozen=True)
class Sample:
    """One scrape: every sample's value by (name, labels), and when (seconds, any clock)."""

    at_s: float
    values: Mapping[tuple[str, Labels], float] = field(default_factory=dict)

    def total(self, name: str, **match: str) -> float | None:
        """The sum of ``name``'s series whose labels include ``match``; None: none."""
        found = [
            v
            for (n, labels), v in self.values.items()
            if n == name and all((k, m) in labels for k, m in match.items())
        ]
        return sum(found) if found else None

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(dict(labels), v) for (n, labels), v in self.values.items() if n == name]


def parse(text: str, at_s: float) -> Sample:
    """A ``/metrics`` body (Prometheus text format); ValueError when it is not one."""
    values: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return Sample(at_s, values)


def increase(previous: float | None, current: float | None) -> float | None:
    """What a counter grew by between two scrapes (a reset: its value since the restart)."""
    if previous is None or current is None:
        return None
    return current if current < previous else current - previous


def grew(previous: Sample | None, current: Sample, name: str, **match: str) -> float | None:
    if previous is None:
        return None
    return increase(previous.total(name, **match), current.total(name, **match))


def per_second(amount: float | None, seconds: float) -> float | None:
    if amount is None or seconds <= 0:
        return None
    return amount / seconds


def buckets(sample: Sample, name: str) -> dict[float, float]:
    """A histogram's cumulative buckets, summed over its series: upper bound -> count."""
    out: dict[float, float] = {}
    for labels, value in sample.series(name):
        bound = float(labels.get("le", "nan"))
        if not math.isnan(bound):
            out[bound] = out.get(bound, 0.0) + value
    return out


def bucket_growth(
    previous: Mapping[float, float], current: Mapping[float, float]
) -> dict[float, float]:
    """Each cumulative bucket's growth; a reset anywhere: the current counts whole."""
    if any(current.get(b, 0.0) < v for b, v in previous.items()):
        return dict(current)
    return {b: v - previous.get(b, 0.0) for b, v in current.items()}


def quantile(q: float, cumulative: Mapping[float, float]) -> float | None:
    """The ``q`` quantile of cumulative buckets (upper bound -> count), interpolated
    within its bucket as Prometheus does; None without observations. In the last bucket
    (+Inf) the answer is the highest finite bound."""
    bounds = sorted(cumulative)
    if not bounds or cumulative[bounds[-1]] <= 0:
        return None
    rank = q * cumulative[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = cumulative[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def add_buckets(many: Iterable[Mapping[float, float]]) -> dict[float, float]:
    out: dict[float, float] = {}
    for one in many:
        for bound, count in one.items():
            out[bound] = out.get(bound, 0.0) + count
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True)
class EdgeGrowth:
    """What one edge process served between two scrapes."""

    seconds: float
    answers: float | None
    misses: float | None
    stale: float | None
    fallback: float | None
    latency: dict[float, float]


def edge_growth(previous: Sample | None, current: Sample) -> EdgeGrowth:
    seconds = current.at_s - previous.at_s if previous is not None else 0.0
    latency = (
        bucket_growth(buckets(previous, LATENCY), buckets(current, LATENCY))
        if previous is not None
        else {}
    )
    return EdgeGrowth(
        seconds,
        grew(previous, current, ANSWERS),
        grew(previous, current, ANSWERS, served="miss"),
        grew(previous, current, ANSWERS, served="stale"),
        grew(previous, current, ANSWERS, served="popular"),
        latency,
    )


def served(growth: Iterable[EdgeGrowth]) -> dict[str, float | None]:
    """Requests/s, the share answered with no origin call (every answer but a miss), p50
    and p99 (ms), stale and fallback (popular list) answers/s, of one or more processes
    over the same interval (their growths summed)."""
    parts = [g for g in growth if g.seconds > 0 and g.answers is not None]
    if not parts:
        return dict.fromkeys(
            ("requests_per_s", "no_origin_share", "p50_ms", "p99_ms", "stale_per_s"), None
        ) | {"fallback_per_s": None}
    seconds = sum(g.seconds for g in parts) / len(parts)
    answers = sum(g.answers or 0.0 for g in parts)
    misses = sum(g.misses or 0.0 for g in parts)
    latency = add_buckets(g.latency for g in parts)
    return {
        "requests_per_s": _round(per_second(answers, seconds)),
        "no_origin_share": _round((answers - misses) / answers, 3) if answers else None,
        "p50_ms": _ms(quantile(0.5, latency)),
        "p99_ms": _ms(quantile(0.99, latency)),
        "stale_per_s": _round(per_second(known_sum(g.stale for g in parts), seconds)),
        "fallback_per_s": _round(per_second(known_sum(g.fallback for g in parts), seconds)),
    }


def known_sum(values: Iterable[float | None]) -> float | None:
    """The sum of the values known; None when none is."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def breaker_state(sample: Sample) -> str | None:
    """The state of the edge's circuit to its origins (the one series at 1)."""
    for labels, value in sample.series(CIRCUIT):
        if value == 1.0:
            return labels.get("state")
    return None


def edge_figures(previous: Sample | None, current: Sample) -> dict[str, Any]:
    return {
        **served([edge_growth(previous, current)]),
        "stale_total": current.total(ANSWERS, served="stale"),
        "fallback_total": current.total(ANSWERS, served="popular"),
        "breaker": breaker_state(current),
        "sync_lag_ms": _ms(current.total(SYNC_LAG)),
        "sync_gaps": current.total(SYNC_GAPS),
    }


def origin_figures(previous: Sample | None, current: Sample) -> dict[str, Any]:
    """The LLM tier of one origin: whether a model server is configured, its calls (all
    outcomes), fallbacks to templates and spend. A counter with no series yet, on an
    origin that exports the tier, is 0 (nothing happened), not unknown."""
    seconds = current.at_s - previous.at_s if previous is not None else 0.0
    enabled = current.total(LLM_ENABLED)
    zero = 0.0 if enabled else None
    return {
        "llm_enabled": None if enabled is None else enabled == 1.0,
        "llm_calls": _or(current.total(LLM_CALLS), zero),
        "llm_calls_per_s": _round(per_second(grew(previous, current, LLM_CALLS), seconds)),
        "llm_fallbacks": _or(current.total(LLM_FALLBACKS), 0.0 if enabled is not None else None),
        "llm_spend_usd": _round(_or(current.total(LLM_SPEND), zero), 6),
    }


def _or(value: float | None, otherwise: float | None) -> float | None:
    return otherwise if value is None else value


def baseline(kept: deque[Sample], current: Sample, interval_s: float) -> Sample | None:
    """The scrape to take a rate against: the newest of ``kept`` at least ``interval_s``
    older than ``current`` (the oldest while none is yet; None at the very first).
    ``current`` joins ``kept``, and what is older than the baseline leaves it."""
    kept.append(current)
    while len(kept) > 2 and current.at_s - kept[1].at_s >= interval_s:
        kept.popleft()
    return kept[0] if len(kept) > 1 else None


def worker_figures(previous: Sample | None, current: Sample) -> dict[str, Any]:
    """The workers' events/s (entries read, all consumers), backlog and the worst
    freshness p99 of the running ones, from one origin's scrapes."""
    seconds = current.at_s - previous.at_s if previous is not None else 0.0
    consumers = []
    for labels, entries in sorted(current.series(WORKER_ENTRIES), key=lambda s: str(s[0])):
        name = labels.get("consumer", "")
        before = previous.total(WORKER_ENTRIES, consumer=name) if previous else None
        p99 = current.total(WORKER_FRESHNESS, consumer=name)
        consumers.append(
            {
                "consumer": name,
                "events": entries,
                "events_per_s": _round(per_second(increase(before, entries), seconds)),
                "freshness_p99_ms": _ms(p99),
                "running": p99 is not None,
            }
        )
    freshness = [v for _, v in current.series(WORKER_FRESHNESS)]
    return {
        "events_per_s": _round(per_second(grew(previous, current, WORKER_ENTRIES), seconds)),
        "backlog": current.total(WORKER_BACKLOG),
        "freshness_p99_ms": _ms(max(freshness)) if freshness else None,
        "consumers": consumers,
    }


def evaluation(current: Sample) -> dict[str, Any] | None:
    """The shadow comparison's latest figures (``perso_origin_shadow_*``), None before one."""
    found = current.series(SHADOW + "engagement")
    if not found:
        return None
    labels, value = found[0]
    out: dict[str, Any] = {
        "policy": labels.get("policy"),
        "live": labels.get("live"),
        "engagement": _round(value, 4),
    }
    for figure in ("live_engagement", "engagement_low", "engagement_high", "decisions", "ess"):
        out[figure] = _round(current.total(SHADOW + figure), 4)
    return out


def last_evaluation(current: Sample) -> dict[str, Any] | None:
    """The last ``perso evaluate`` run (``perso_evaluation_last_*``), None before one: when,
    the live policy's own value, each candidate's estimates by estimator."""
    at_s = current.total(LAST + "timestamp_seconds")
    if at_s is None:
        return None
    live = current.series(LAST + "live_engagement")
    estimates = []
    for labels, value in sorted(current.series(LAST + "engagement"), key=lambda s: str(s[0])):
        match = {"policy": labels.get("policy", ""), "estimator": labels.get("estimator", "")}
        estimates.append(
            match
            | {
                "value": _round(value, 4),
                "low": _round(current.total(LAST + "engagement_low", **match), 4),
                "high": _round(current.total(LAST + "engagement_high", **match), 4),
            }
        )
    return {
        "at_ms": int(at_s * 1000),
        "joined": current.total(LAST + "joined"),
        "live": live[0][0].get("policy") if live else None,
        "live_engagement": _round(live[0][1], 4) if live else None,
        "estimates": estimates,
    }


def curve(points: Iterable[tuple[int, int, int]]) -> list[dict[str, float | int]]:
    """The learning curve's minutes (minute, slates, clicks), oldest first, with clicks
    per slate."""
    return [
        {
            "minute_ms": minute * 60_000,
            "slates": slates,
            "clicks": clicks,
            "clicks_per_slate": round(clicks / slates, 4) if slates else 0.0,
        }
        for minute, slates, clicks in sorted(points)
        if slates > 0
    ]
