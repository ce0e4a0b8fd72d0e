"""A stream worker's counters summed over every run of its consumer name, in Redis.

The figures a worker publishes in ``worker:{c}:stats`` are its process's: they start
from 0 when the process restarts, so after a crash an operator would read 3,062 applied
where 6,145 were. The totals ``worker:{c}:totals`` (no TTL) add up every run under the
consumer name; ``perso workers`` shows them, and their sum over all names, beside the
live figures.

A publish sends the run's counters as they are now and the run's id; one script adds to
the totals what each counter grew by since the last publish of that run that Redis
applied (the run's high-water marks, ``worker:{c}:run:<id>``, in the same slot). So a
publish that fails loses nothing (the next one carries its increments), and one applied
twice (retried after its reply was lost) counts nothing twice. A restarted worker is a new
run, counting from 0. What a killed worker counted after its last publish (at most one
upkeep, a few seconds) never arrives.
"""

from __future__ import annotations

from collections.abc import Mapping

from origin.worker.batch import Outcome, WorkerStats
from protocol import keys
from redis_client.client import RedisClient

# The counters that add up across runs; the gauges (deferred, lag, freshness) do not.
TOTALLED = (
    "batches",
    "entries",
    "applied",
    "duplicates",
    "conflicts",
    "reclaimed",
    "trimmed",
    "retention_spared",
)


def run_counters(stats: WorkerStats) -> dict[str, int]:
    """The counters of one run so far, by their names in Redis."""
    return {
        "batches": stats.batches,
        "entries": stats.entries,
        "applied": stats.outcomes[Outcome.APPLIED],
        "duplicates": stats.outcomes[Outcome.DUPLICATE],
        "conflicts": stats.conflicts,
        "reclaimed": stats.reclaimed,
        "trimmed": stats.trimmed,
        "retention_spared": stats.retention_spared,
    }


class WorkerTotals:
    """Adds one run's counters to its consumer name's totals."""

    # KEYS[1] the consumer's totals, KEYS[2] the run's marks (what it has added so far);
    # ARGV[1] the marks' TTL in seconds, then counter, value pairs (the run's counts now).
    ADD = """
for i = 2, #ARGV, 2 do
    local now = tonumber(ARGV[i + 1])
    local grown = now - tonumber(redis.call('HGET', KEYS[2], ARGV[i]) or '0')
    if grown > 0 then
        redis.call('HINCRBY', KEYS[1], ARGV[i], grown)
        redis.call('HSET', KEYS[2], ARGV[i], now)
    end
end
redis.call('EXPIRE', KEYS[2], ARGV[1])
return 1
"""

    def __init__(self, redis: RedisClient, consumer: str, run_id: str) -> None:
        self._add = redis.register_script(self.ADD)
        self._keys = [keys.worker_totals(consumer), keys.worker_run(consumer, run_id)]

    async def publish(self, counters: Mapping[str, int]) -> None:
        """Add what ``counters`` (this run's, cumulative) grew by since the last publish
        that reached Redis."""
        args: list[str | int] = [keys.WORKER_RUN_TTL_S]
        for name, value in counters.items():
            args += [name, value]
        await self._add(keys=self._keys, args=args)


def all_workers(totals: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Every consumer name's totals summed: the streams' totals since they began."""
    return {name: sum(t.get(name, 0) for t in totals.values()) for name in TOTALLED}
