"""A steady background of feedback for ``benchmarks.freshness``, in a process of its own (so
that its Python does not delay the probes' clocks): events appended through the origin's
intake (``FeedbackLog``, the script the origin's ``/v1/feedback`` runs) at ``rate`` per
second, in ticks of 10 ms, over ``users`` users and the sample catalog's ``items``.

The mix is ``benchmarks.stream_worker``'s: 3 in 8 views (which teach no model), the rest
clicks, add-to-carts, purchases and dismisses, so the workers write users' models and
publish each batch's updated users to the edges, as under real traffic.

Run by ``benchmarks.freshness`` as ``python -m benchmarks.feedback_load URL RATE ...``: it
prints ``ready`` once appending, and on SIGTERM the count it appended as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

import numpy as np

from origin.catalog.sample import item_id_of
from origin.worker.event_log import FeedbackLog
from protocol.events import FeedbackEvent
from redis_client.client import connect

ACTIONS = ("view", "view", "view", "click", "click", "add_to_cart", "purchase", "dismiss")
TICK_S = 0.01


async def run(redis_url: str, rate: int, *, users: int, items: int, partitions: int) -> int:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    redis = connect(redis_url)
    log = FeedbackLog(redis, partitions=partitions, dedup_ttl_s=600, clock=time.time)
    rng = np.random.default_rng(3)
    sent = 0
    started = time.perf_counter()
    print("ready", flush=True)
    try:
        while not stop.is_set():
            due = int((time.perf_counter() - started) * rate)
            while sent < due:
                user = f"bg-{rng.integers(users)}"
                item = item_id_of(int(rng.integers(items)), items)
                action = ACTIONS[int(rng.integers(len(ACTIONS)))]
                now = int(time.time() * 1000)
                await log.append(user, [FeedbackEvent(f"bg-{sent}", user, item, action, now, now)])
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
    args = parser.parse_args()
    sent = asyncio.run(
        run(
            args.redis_url,
            args.rate,
            users=args.users,
            items=args.items,
            partitions=args.partitions,
        )
    )
    print(sent, flush=True)


if __name__ == "__main__":
    main()
