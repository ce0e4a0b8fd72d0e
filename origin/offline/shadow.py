"""Shadow mode at the origin (``evaluation.shadow``): where its records go, how they and
their rewards are read back (``read_shadow``), and the comparison ``/metrics`` shows,
recomputed every ``REPORT_EVERY_S`` over the newest ``REPORT_RECORDS`` records of the
shadow policy, whoever wrote them (origins and edges); ``perso evaluate --shadow NAME``
prints the same."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import cast

import numpy as np
from redis.exceptions import RedisError

from evaluation.shadow import ShadowRunner, compare
from origin.offline.window import Page, entries, records_of
from protocol import keys
from protocol.decisions import DECISION_FIELD
from protocol.exceptions import MalformedMessage
from protocol.rewards import REWARD_FIELD, Rewarded, decode_reward
from protocol.shadows import ShadowDecision, decode_shadow
from redis_client.client import RedisClient

log = logging.getLogger(__name__)

REPORT_EVERY_S = 60.0
REPORT_RECORDS = 20_000


async def refresh(runner: ShadowRunner, redis: RedisClient, partitions: int) -> None:
    """Recompute ``latest`` over the newest records (for ``/metrics``); a failed read
    keeps the last."""
    try:
        records, rewards = await read_shadow(redis, partitions, runner.policy.name)
    except RedisError as exc:
        log.warning("shadow comparison not refreshed: %s", exc)
        return
    runner.latest = compare(records, rewards, np.random.default_rng(0))


async def report(
    runner: ShadowRunner, redis: RedisClient, partitions: int, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), REPORT_EVERY_S)
        await refresh(runner, redis, partitions)


async def read_shadow(
    redis: RedisClient, partitions: int, name: str, *, limit: int = REPORT_RECORDS
) -> tuple[list[ShadowDecision], dict[str, Rewarded]]:
    """The newest shadow records of the policy ``name`` (``limit`` over all partitions) and
    the rewards of their decisions."""
    records: list[ShadowDecision] = []
    per_partition = max(1, limit // max(partitions, 1))
    oldest: int | None = None
    for p in range(partitions):
        page = cast(Page, await redis.xrevrange(keys.shadow_stream(p), count=per_partition))
        for entry_id, fields in page:
            records += _decoded(fields.get(DECISION_FIELD), name)
            at = int(entry_id.split(b"-")[0])
            oldest = at if oldest is None else min(oldest, at)
    rewards: dict[str, Rewarded] = {}
    wanted = {s.request_id for s in records}
    for p in range(partitions if oldest is not None else 0):
        async for raw in entries(redis, keys.rewards_stream(p), REWARD_FIELD, oldest or 0, None):
            with contextlib.suppress(MalformedMessage):
                r = decode_reward(raw)
                if r.request_id in wanted:
                    rewards.setdefault(r.request_id, r)
    return records, rewards


def _decoded(raw: bytes | None, name: str) -> list[ShadowDecision]:
    """The shadow records of policy ``name`` in one entry (malformed ones skipped)."""
    out = []
    for record in records_of(raw) if raw is not None else []:
        with contextlib.suppress(MalformedMessage):
            s = decode_shadow(record)
            if s.policy.partition("/")[0] == name:
                out.append(s)
    return out
