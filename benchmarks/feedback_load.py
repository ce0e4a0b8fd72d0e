"""A steady background of feedback for ``benchmarks.freshness``, in a process of its own (so
that its Python does not delay the probes' clocks): events appended through the origin's
intake (``FeedbackLog``, the script the origin's ``/v1/feedback`` runs) at ``rate`` per
second, in ticks of 10 ms, over ``users`` users and the sample catalog's ``items``.

The mix is ``benchmarks.stream_worker``'s: 3 in 8 views (which teach no model), the rest
clicks, add-to-carts, purchases and dismisses, so the workers write users' models and
publish each batch's updated users to the edges, as under real traffic.

With ``--burst N``, a backlog comes first: ``N`` events of the same mix appended as fast as
the intake's script takes them, over users of their own (``burst-{k}``, one for every
``BURST_EVENTS_PER_USER`` events: a few events each, so nearly all of them are casual
users, whom the freshness tiers would hold). Each call of the script appends a chunk's
events of one partition, of many users (each event with its own user's dedup mark, in the
partition's slot as the intake's), so the burst is much faster than the worker applies it.

Run by ``benchmarks.freshness`` and ``benchmarks.freshness_overload`` as ``python -m
benchmarks.feedback_load URL RATE ...``: with ``--burst``, it prints ``burst N SECONDS``
once the backlog is appended; it prints ``ready`` once appending at ``rate``, and on
SIGTERM the count it appended as its last line (the burst not included).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

import numpy as np

from origin.catalog.sample import item_id_of
from origin.event_streams.event_log import APPEND_NEW, FeedbackLog
from protocol import dedup, keys
from protocol.events import FeedbackEvent, encode_event
from redis_client.client import RedisClient, connect, queue_script

ACTIONS = ("view", "view", "view", "click", "click", "add_to_cart", "purchase", "dismiss")
TICK_S = 0.01
DEDUP_TTL_S = 600
# A burst's events per round trip: one call of the intake's script per partition.
BURST_CHUNK = 4_000
# A burst's events per user, on average: users drawn at random, so a user has 2 of them
# on average and 1.25 that teach (not views); about 13% reach the 3 interactions of an
# active user, none the 11 of a power user.
BURST_EVENTS_PER_USER = 2


def background_event(
    rng: np.random.Generator, n: int, prefix: str, *, users: int, items: int, now_ms: int
) -> FeedbackEvent:
    """The ``n``-th event of a background: a user among ``users`` (``{prefix}-{k}``), an item
    of the sample catalog, an action of ``ACTIONS``, drawn in that order."""
    user = f"{prefix}-{rng.integers(users)}"
    item = item_id_of(int(rng.integers(items)), items)
    action = ACTIONS[int(rng.integers(len(ACTIONS)))]
    return FeedbackEvent(f"{prefix}-{n}", user, item, action, now_ms, now_ms)


def burst_users(events: int) -> int:
    """How many users a burst of ``events`` is spread over."""
    return max(1, events // BURST_EVENTS_PER_USER)


def burst_events(
    rng: np.random.Generator, first: int, count: int, *, users: int, items: int, now_ms: int
) -> list[FeedbackEvent]:
    """Events ``first`` to ``first + count - 1`` of a burst, of the background's mix, over
    ``users`` users of the burst's own (``burst-{k}``)."""
    who = rng.integers(users, size=count).tolist()
    what = rng.integers(items, size=count).tolist()
    how = rng.integers(len(ACTIONS), size=count).tolist()
    return [
        FeedbackEvent(
            f"burst-{first + k}",
            f"burst-{who[k]}",
            item_id_of(what[k], items),
            ACTIONS[how[k]],
            now_ms,
            now_ms,
        )
        for k in range(count)
    ]


def by_partition(events: list[FeedbackEvent], partitions: int) -> dict[int, list[FeedbackEvent]]:
    """``events`` by their user's events partition, each partition's in their order."""
    out: dict[int, list[FeedbackEvent]] = {}
    for event in events:
        out.setdefault(keys.partition_of(event.user_id, partitions), []).append(event)
    return out


async def append_burst(
    redis: RedisClient, events: int, *, items: int, partitions: int, rng: np.random.Generator
) -> float:
    """Append ``events`` background events as fast as the intake's script takes them;
    returns the seconds it took."""
    script = redis.register_script(APPEND_NEW)
    users = burst_users(events)
    started = time.perf_counter()
    for first in range(0, events, BURST_CHUNK):
        count = min(BURST_CHUNK, events - first)
        now = int(time.time() * 1000)
        chunk = burst_events(rng, first, count, users=users, items=items, now_ms=now)
        async with redis.pipeline(transaction=False) as pipe:
            for partition, appended in by_partition(chunk, partitions).items():
                # The script's KEYS and ARGV (origin.event_streams.event_log.APPEND_NEW), with each
                # event's own user's dedup mark.
                script_keys = [keys.events_stream(partition), keys.events_accepted(partition)]
                script_keys += [
                    dedup.feedback_seen(partition, e.user_id, e.interaction_id) for e in appended
                ]
                args = [DEDUP_TTL_S, *(encode_event(e) for e in appended)]
                await queue_script(pipe, script, script_keys, args)
            await pipe.execute()
    return time.perf_counter() - started


async def run(
    redis_url: str, rate: int, *, users: int, items: int, partitions: int, burst: int = 0
) -> int:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    redis = connect(redis_url)
    log = FeedbackLog(redis, partitions=partitions, dedup_ttl_s=DEDUP_TTL_S, clock=time.time)
    rng = np.random.default_rng(3)
    sent = 0
    try:
        if burst > 0:
            seconds = await append_burst(redis, burst, items=items, partitions=partitions, rng=rng)
            print(f"burst {burst} {seconds:.3f}", flush=True)
        started = time.perf_counter()
        print("ready", flush=True)
        while not stop.is_set():
            due = int((time.perf_counter() - started) * rate)
            # A load behind its schedule (its CPU taken) still stops when told.
            while sent < due and not stop.is_set():
                now = int(time.time() * 1000)
                event = background_event(rng, sent, "bg", users=users, items=items, now_ms=now)
                await log.append(event.user_id, [event])
                sent += 1
            await asyncio.sleep(TICK_S)
    finally:
        await redis.aclose()
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("redis_url")
    parser.add_argument("rate", type=int, help="events per second")
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--items", type=int, required=True, help="the sample catalog's size")
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument(
        "--burst", type=int, default=0, help="events appended as fast as possible first (0)"
    )
    args = parser.parse_args()
    sent = asyncio.run(
        run(
            args.redis_url,
            args.rate,
            users=args.users,
            items=args.items,
            partitions=args.partitions,
            burst=args.burst,
        )
    )
    print(sent, flush=True)


if __name__ == "__main__":
    main()
