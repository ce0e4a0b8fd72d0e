"""A window of the logs, joined by request id: each decision the origin ranked whose context
it logged (``protocol.contexts``) and whose join has closed (``protocol.rewards``), with its
kept items' vectors as the catalog holds them now (``keys.item_vector``).

Streams are read by time (their entry ids are milliseconds), partition by partition, in
pages. A decision without a context (not sampled, or served from an edge's cache under a
request id of its own), or whose join has not closed yet, is left out and counted; a
reward recorded twice (a worker that died mid-close) counts once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import cast

import msgpack
import numpy as np
import numpy.typing as npt

from evaluation.offline import Logged
from protocol import keys
from protocol.contexts import RankedContext, decode_context
from protocol.decisions import DECISION_FIELD, Decision, decode_entry
from protocol.exceptions import MalformedMessage
from protocol.rewards import REWARD_FIELD, Rewarded, decode_reward
from protocol.vectors import l2_normalize, unpack_vector
from redis_client.client import RedisClient

PAGE = 1_000
Page = list[tuple[bytes, dict[bytes, bytes]]]


@dataclass
class WindowCounts:
    decisions: int = 0
    with_context: int = 0  # of which a context was logged
    joined: int = 0  # of which the join closed: what is evaluated
    malformed: int = 0  # records skipped: not of a version this reader knows
    missing_vectors: int = 0  # kept items no longer in the catalog (read as never chosen)
    policies: dict[str, int] = field(default_factory=dict)  # joined decisions by policy label


@dataclass(frozen=True)
class Window:
    records: list[Logged]
    counts: WindowCounts


async def read_window(
    redis: RedisClient,
    partitions: int,
    *,
    since_ms: int,
    until_ms: int,
    limit: int,
    dim: int,
    accept: Callable[[Decision], bool] = lambda d: True,
) -> Window:
    """The joined decisions made in [``since_ms``, ``until_ms``], at most ``limit`` (the
    newest first when there are more), of the decisions ``accept`` takes."""
    counts = WindowCounts()
    contexts: dict[str, RankedContext] = {}
    rewards: dict[str, Rewarded] = {}
    decisions: list[Decision] = []
    for p in range(partitions):
        async for raw in entries(
            redis, keys.decisions_stream(p), DECISION_FIELD, since_ms, until_ms
        ):
            try:
                decisions += [d for d in decode_entry(raw) if accept(d)]
            except MalformedMessage:
                counts.malformed += 1
        async for raw in entries(
            redis, keys.contexts_stream(p), DECISION_FIELD, since_ms, until_ms
        ):
            try:
                for record in records_of(raw):
                    c = decode_context(record)
                    contexts[c.request_id] = c
            except MalformedMessage:
                counts.malformed += 1
        # A join closes after its decision: read rewards to the end of the stream.
        async for raw in entries(redis, keys.rewards_stream(p), REWARD_FIELD, since_ms, None):
            try:
                r = decode_reward(raw)
                rewards.setdefault(r.request_id, r)
            except MalformedMessage:
                counts.malformed += 1
    counts.decisions = len(decisions)
    joined: list[tuple[Decision, RankedContext, Rewarded]] = []
    for d in sorted(decisions, key=lambda d: d.at_ms):
        context = contexts.get(d.ranked_as)
        if context is None:
            continue
        counts.with_context += 1
        reward = rewards.get(d.request_id)
        if reward is not None and d.shown:
            joined.append((d, context, reward))
    joined = joined[-limit:]
    vectors = await _vectors(redis, {i for _, c, _ in joined for i in c.items}, dim)
    counts.missing_vectors = sum(1 for v in vectors.values() if v is None)
    records = []
    for d, c, r in joined:
        label = f"{d.policy}/{d.policy_version}"
        counts.policies[label] = counts.policies.get(label, 0) + 1
        records.append(Logged(d, c, r, _aligned(c, vectors, dim)))
    counts.joined = len(records)
    return Window(records, counts)


async def entries(
    redis: RedisClient, stream: str, name: str | bytes, since_ms: int, until_ms: int | None
) -> AsyncIterator[bytes]:
    """The field ``name`` of each entry of ``stream`` in the time range, page by page."""
    field_name = name.encode() if isinstance(name, str) else name
    start = f"{since_ms}-0"
    end = "+" if until_ms is None else f"{until_ms}-18446744073709551615"
    while True:
        page = cast(Page, await redis.xrange(stream, min=start, max=end, count=PAGE))
        for _, fields in page:
            value = fields.get(field_name)
            if value is not None:
                yield value
        if len(page) < PAGE:
            return
        start = "(" + page[-1][0].decode()


def records_of(raw: bytes) -> list[bytes]:
    """A context-log entry's records: one, or a batch as the decision log writes them."""
    try:
        payload = msgpack.unpackb(raw, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedMessage(f"not a context entry: {exc}") from exc
    if isinstance(payload, list) and all(isinstance(r, bytes) for r in payload):
        return list(payload)
    return [raw]


async def _vectors(
    redis: RedisClient, items: set[str], dim: int
) -> dict[str, npt.NDArray[np.float32] | None]:
    ids = sorted(items)
    out: dict[str, npt.NDArray[np.float32] | None] = {}
    for start in range(0, len(ids), PAGE):
        batch = ids[start : start + PAGE]
        # One GET per key, pipelined: keys of a Redis Cluster sit in many slots.
        async with redis.pipeline(transaction=False) as pipe:
            for item in batch:
                pipe.get(keys.item_vector(item))
            raws = await pipe.execute()
        for item, raw in zip(batch, raws, strict=True):
            try:
                out[item] = None if raw is None else l2_normalize(unpack_vector(raw, dim))
            except ValueError:  # another dimension: a catalog rebuilt since
                out[item] = None
    return out


def _aligned(
    context: RankedContext, vectors: dict[str, npt.NDArray[np.float32] | None], dim: int
) -> npt.NDArray[np.float32]:
    out = np.zeros((len(context.items), dim), np.float32)
    for row, item in enumerate(context.items):
        v = vectors.get(item)
        if v is not None:
            out[row] = v
    return out
