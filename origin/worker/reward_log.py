"""What each closed decision earned, appended to the reward log (``protocol.rewards``,
``rewards:{p}``) for offline evaluation, and the log kept to its retention (as the decision
log's, ``PERSO_DECISION_RETENTION_*``). The joins' close writes it (``origin.worker.joins``).
"""

from __future__ import annotations

from collections.abc import Sequence

from origin.worker.join_record import JoinRecord
from protocol import keys
from protocol.rewards import REWARD_FIELD, Rewarded, encode_reward
from redis_client.client import RedisPipeline


def queue_rewards(
    pipe: RedisPipeline,
    records: Sequence[JoinRecord],
    now_ms: int,
    *,
    partitions: int,
    retention_s: float,
    retention_entries: int,
) -> None:
    """What each decision earned, to the reward log (before the tombstone: a worker
    that dies in between leaves the join to its successor, which logs it again; readers
    keep one record per request id). Feedback without its decision is not logged: with
    nothing of what was shown, it estimates nothing."""
    min_id = max(0, now_ms - int(retention_s * 1000))
    streams = set()
    for user, rid, decision, engaged, dismissed in records:
        if decision is None:
            continue
        stream = keys.rewards_stream(keys.partition_of(user, partitions))
        record = Rewarded(rid, user, now_ms, engaged, tuple(sorted(dismissed)))
        pipe.xadd(
            stream,
            {REWARD_FIELD: encode_reward(record)},
            maxlen=retention_entries,
            approximate=True,
        )
        streams.add(stream)
    for stream in sorted(streams):
        pipe.xtrim(stream, minid=f"{min_id}-0", approximate=True)
