"""What a stream worker publishes about itself in ``worker:{consumer}:stats`` (expiring
if it dies; ``perso workers`` and the demo read it): its run's counters
(``origin.worker.totals.run_counters``) and its gauges.
"""

from __future__ import annotations

from collections.abc import Mapping

from redis.typing import EncodableT, FieldT

from origin.worker.batch import WorkerStats
from protocol import keys
from redis_client.client import RedisClient

# A dead worker's figures go after this long.
FIGURES_TTL_S = 60


def figures_of(
    stats: WorkerStats,
    counters: Mapping[str, int],
    *,
    trimmer: bool,
    deferred: int,
    lag_ms: int,
    now_ms: int,
) -> dict[str, int | float]:
    """The figures of one worker now: counters, whether it is the stream trimmer, the
    entries it holds, batches' mean size, freshness quantiles, the streams' lag."""
    samples = sorted(stats.freshness_ms)

    def quantile(q: float) -> float:
        return samples[min(len(samples) - 1, int(q * len(samples)))] if samples else 0.0

    return {
        **counters,
        "trimmer": int(trimmer),
        "deferred": deferred,
        "mean_batch": round(stats.entries / max(1, stats.batches), 1),
        "freshness_p50_ms": round(quantile(0.5), 1),
        "freshness_p99_ms": round(quantile(0.99), 1),
        "lag_ms": lag_ms,
        "updated_ms": now_ms,
    }


async def publish_figures(
    redis: RedisClient, consumer: str, figures: Mapping[str, int | float]
) -> None:
    key = keys.worker_stats(consumer)
    # From items(): a dict of str keys is not a dict of Redis field names to mypy.
    mapping: dict[FieldT, EncodableT] = dict(figures.items())
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, FIGURES_TTL_S)
        await pipe.execute()
