"""The last ``perso evaluate`` run, kept in Redis (``keys.last_evaluation``) so that the
origins' ``/metrics`` can export it (``perso_evaluation_last_*``) and the operations page
show it beside the shadow comparison: a report printed to a terminal is gone."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol import keys
from redis_client.client import RedisClient


@dataclass(frozen=True, slots=True)
class Estimated:
    """One candidate's estimate by one estimator, engagements per slate."""

    policy: str
    estimator: str
    value: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class LastEvaluation:
    at_ms: int
    live: str
    live_value: float  # the live policy's own engagements per slate in the window
    joined: int  # decisions of the window with a closed join
    estimates: tuple[Estimated, ...]


def summary(report: Mapping[str, Any], at_ms: int) -> LastEvaluation:
    """What is kept of an ``as_json`` report."""
    estimates = tuple(
        Estimated(c["policy"], name, float(e["value"]), float(e["low"]), float(e["high"]))
        for c in report["candidates"]
        for name, e in sorted(c["estimates"].items())
    )
    live = report["live"]
    return LastEvaluation(
        at_ms,
        str(live["policy"]),
        float(live["on_policy"]["value"]),
        int(report["window"]["joined"]),
        estimates,
    )


def encode(last: LastEvaluation) -> str:
    return json.dumps(
        {
            "at_ms": last.at_ms,
            "live": last.live,
            "live_value": last.live_value,
            "joined": last.joined,
            "estimates": [[e.policy, e.estimator, e.value, e.low, e.high] for e in last.estimates],
        },
        separators=(",", ":"),
    )


def decode(raw: bytes | str) -> LastEvaluation | None:
    """The kept evaluation, None when it cannot be read (another release wrote it)."""
    try:
        fields = json.loads(raw)
        estimates = tuple(
            Estimated(str(p), str(n), float(v), float(lo), float(hi))
            for p, n, v, lo, hi in fields["estimates"]
        )
        return LastEvaluation(
            int(fields["at_ms"]),
            str(fields["live"]),
            float(fields["live_value"]),
            int(fields["joined"]),
            estimates,
        )
    except (ValueError, KeyError, TypeError):
        return None


async def store(redis: RedisClient, last: LastEvaluation) -> None:
    await redis.set(keys.last_evaluation(), encode(last))


async def read(redis: RedisClient) -> LastEvaluation | None:
    raw = await redis.get(keys.last_evaluation())
    return None if raw is None else decode(raw)
