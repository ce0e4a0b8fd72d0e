"""Freshness under overload: a power user's click at the edges, freshness tiers on vs off.

What the freshness tiers buy a power user while the stream worker is behind, the only time
they hold anything (``origin.worker.freshness_tiers``: while the entries it reads are at
least ``PERSO_FRESHNESS_OVERLOAD_LAG_S``, 10 s, old): from the user's click accepted to both
edges of the region holding it, with the tiers at their shipped settings against tiers off.

Two arms, each on a fresh stack as ``benchmarks.freshness``'s (the same stack, probe users
and probes): the tiers at their shipped settings (nothing overridden), then off
(``freshness_active_s`` and ``freshness_casual_s`` 0). In each, once the probe users are warm
and their clicks applied, ``benchmarks.feedback_load --burst N`` appends a backlog of ``N``
events (the background's mix, over ``N / 2`` users of their own, nearly all casual) as fast
as the intake's script takes them, several times faster than the worker applies them, then
the steady background at ``--rate`` (500 events/s unless given: the backlog is the load).
Once the worker reads entries at least the overload lag old, 100 probes start, one every
0.1 s whatever the others are doing (a click waits behind the backlog of its partition: one
after another, only the first would find the worker behind), each reading Redis every
100 ms, and the edges every 100 ms once the Redis stage is done, for up to 90 s. All along,
every 0.5 s, the events partitions' backlog is read: how far behind the worker is (the age
of the oldest entry it has not read: what its tiers compare with the overload lag), the age
of the oldest entry not applied (held ones included) and the entries pending (held and in
flight). Each arm reports the probes' figure, a probe that timed out counted at the timeout
(a quantile there reads "at least"), how far behind the worker was while their clicks were
accepted, how long after the burst the worker had read past its last entry (each applied or
held) and how long until every entry appended up to its end was acknowledged (the backlog
drained, held ones applied), if within 90 s after the probes, and the longest the worker
read nothing (as when it applies what it held, in one go); the ratio is the tiers'
power-user p99 over tiers off, and says whether it is exact or a bound. With a hundred
probes in flight side by side, the edges' counters a probe reads before and after its click
span the others' requests: the next requests' confirmation is not a probe's own there.

Run: ``.venv/bin/python -m benchmarks.freshness_overload [--events 200000] [--rate 500]
[--probes 100] [--out DIR]`` (4 to 6 minutes on a busy 2-core machine, bounded by the
timeouts; stops everything it started); ``freshness-overload.json`` (every probe and backlog
reading of both arms) and ``freshness-overload.png`` (the arms' CDFs; the worker's lag over
time with each probe's figure) go to ``--out`` (default ``.perso/bench/freshness``).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx

from benchmarks.backlog import drained as streams_drained
from benchmarks.feedback_load import burst_users
from benchmarks.freshness import (
    PARTITIONS,
    PROBE_USERS,
    REGION,
    Edges,
    Pace,
    Probe,
    ProbeTimeout,
    figures,
    probe,
    settings_for,
    start_load,
    stop_load,
    warm,
)
from benchmarks.report import machine, percentile, results_dir, save_and_finish
from origin.event_streams.streams import stream_id
from perso import plots
from perso.stack import Stack
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient, connect

# A backlog burst before the probes, which then start on a schedule, not one after another
# (each click waits behind the backlog for seconds).
OVERLOAD_EVENTS = 200_000
# The steady background beside the backlog (--rate's default): the backlog is the load;
# 2,000/s is as much as half of what the stack's worker applies on a busy 2-core machine.
OVERLOAD_RATE = 500
OVERLOAD_PROBES = 100
OVERLOAD_PROBE_EVERY_S = 0.1
# Redis and the edges, for each probe in flight: the figures are seconds, and a hundred
# probes' reads take CPU from the worker all the while.
OVERLOAD_POLL_S = 0.1
OVERLOAD_PROBE_TIMEOUT_S = 90.0
BACKLOG_READ_S = 0.5  # the streams' backlog, read all along
BEHIND_WAIT_S = 60.0  # for the worker to fall the tiers' overload lag behind
# After the last probe, for the burst to be acknowledged: held entries are applied in one
# go once the worker has caught up, and that takes a while.
DRAIN_WAIT_S = 90.0

OVERLOAD_PACE = Pace(OVERLOAD_POLL_S, OVERLOAD_PROBE_TIMEOUT_S, edges_after_redis=True)
FRESHNESS_FIELDS = ("freshness_active_s", "freshness_casual_s", "freshness_overload_lag_s")


@dataclass(frozen=True)
class Reading:
    """The events partitions' backlog at one moment; stream times on Redis's clock (ms)."""

    at: float  # time.perf_counter() when read
    now_ms: int
    undelivered_ms: int | None  # the oldest entry the worker has not read yet
    unacked_ms: int | None  # the oldest entry not acknowledged (held ones too)
    pending: int  # entries read and not acknowledged: held and in flight

    @property
    def behind_s(self) -> float:
        """How far behind the worker is as its tiers see it: the age of the oldest entry it
        has still to read (0: none)."""
        return age_s(self.now_ms, self.undelivered_ms)

    @property
    def unacked_s(self) -> float:
        """The age of the oldest entry not applied yet (held or not read)."""
        return age_s(self.now_ms, self.unacked_ms)


def stream_ms(entry_id: bytes | str) -> int:
    """The time (ms) in a stream entry's id."""
    return stream_id(entry_id)[0]


def age_s(now_ms: int, entry_ms: int | None) -> float:
    return 0.0 if entry_ms is None else max(0.0, (now_ms - entry_ms) / 1000)


def oldest(*times: int | None) -> int | None:
    present = [t for t in times if t is not None]
    return min(present) if present else None


def drained(reading: Reading, burst_end_ms: int) -> bool:
    """Whether every entry appended up to ``burst_end_ms`` was acknowledged at ``reading``."""
    return reading.unacked_ms is None or reading.unacked_ms > burst_end_ms


def read_through(reading: Reading, burst_end_ms: int) -> bool:
    """Whether the worker had read every entry appended up to ``burst_end_ms`` (applied or
    held) at ``reading``."""
    return reading.undelivered_ms is None or reading.undelivered_ms > burst_end_ms


def longest_stall_s(readings: Sequence[Reading]) -> float:
    """The longest time over which the worker read nothing while there was something to
    read: consecutive readings with the same oldest unread entry (as when it applies what
    its tiers held, in one go)."""
    longest, since = 0.0, None
    for before, after in pairwise(readings):
        if after.undelivered_ms is not None and after.undelivered_ms == before.undelivered_ms:
            since = before.at if since is None else since
            longest = max(longest, after.at - since)
        else:
            since = None
    return longest


def first(
    readings: Sequence[Reading], since: float, wanted: Callable[[Reading], bool]
) -> Reading | None:
    """The first of ``readings`` taken from ``since`` on that is ``wanted``."""
    return next((r for r in readings if r.at >= since and wanted(r)), None)


def reading_before(readings: Sequence[Reading], at: float) -> Reading | None:
    """The last of ``readings`` (in order) taken at or before ``at``."""
    found = None
    for reading in readings:
        if reading.at > at:
            break
        found = reading
    return found


def behind_during(
    readings: Sequence[Reading], start: float, end: float, bound_s: float
) -> dict[str, float] | None:
    """How far behind the worker was in the readings taken from ``start`` to ``end``: the
    least, the median and the most, the share of readings at least ``bound_s`` behind, the
    oldest entry not applied and the most entries pending."""
    window = [r for r in readings if start <= r.at <= end]
    if not window:
        return None
    behind = [r.behind_s for r in window]
    return {
        "readings": len(window),
        "min_s": round(min(behind), 1),
        "p50_s": round(percentile(behind, 50), 1),
        "max_s": round(max(behind), 1),
        "share_at_least_bound": round(sum(b >= bound_s for b in behind) / len(window), 3),
        "unapplied_max_s": round(max(r.unacked_s for r in window), 1),
        "pending_max": max(r.pending for r in window),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def censored_figures(
    samples: Sequence[float], timed_out: int, timeout_ms: float
) -> dict[str, float] | None:
    """``figures`` of the probes that completed and of those that timed out, each counted
    at the timeout (a lower bound of its figure): a quantile at the timeout reads "at
    least". Leaving them out would keep only the probes the backlog delayed least."""
    values = [*samples, *[timeout_ms] * timed_out]
    return figures(values) if values else None


def ratio_kind(numerator: float | None, denominator: float | None, timeout_ms: float) -> str:
    """What a ratio of two censored quantiles is: exact, a lower bound (the numerator at
    the timeout), an upper bound (the denominator at it) or unknown (both, or missing)."""
    if numerator is None or denominator is None:
        return "unknown"
    top, bottom = numerator >= timeout_ms, denominator >= timeout_ms
    if top and bottom:
        return "unknown"
    return "lower bound" if top else "upper bound" if bottom else "exact"


async def read_backlog(redis: RedisClient) -> Reading:
    """One reading of every events partition (two pipelined round trips)."""
    streams = keys.events_streams(PARTITIONS)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.time()
        for stream in streams:
            pipe.xinfo_groups(stream)
            pipe.xpending(stream, keys.WORKER_GROUP)
        replies = await pipe.execute()
    at = time.perf_counter()
    seconds, micros = replies[0]
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    delivered: list[str] = []
    unacked: int | None = None
    pending = 0
    for k in range(len(streams)):
        groups, summary = replies[1 + 2 * k], replies[2 + 2 * k]
        group = next(g for g in groups if _text(g["name"]) == keys.WORKER_GROUP)
        delivered.append(_text(group["last-delivered-id"]))
        pending += int(summary["pending"])
        if summary["pending"]:
            unacked = oldest(unacked, stream_ms(summary["min"]))
    async with redis.pipeline(transaction=False) as pipe:
        for stream, last in zip(streams, delivered, strict=True):
            pipe.xrange(stream, min=f"({last}", max="+", count=1)
        firsts = await pipe.execute()
    undelivered = oldest(*(stream_ms(first[0][0]) if first else None for first in firsts))
    return Reading(at, now_ms, undelivered, oldest(unacked, undelivered), pending)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def read_all_along(redis: RedisClient, readings: list[Reading]) -> None:
    """A reading every ``BACKLOG_READ_S`` into ``readings``, until cancelled."""
    while True:
        readings.append(await read_backlog(redis))
        await asyncio.sleep(BACKLOG_READ_S)


async def until_reading(
    readings: list[Reading],
    reader: asyncio.Task[None],
    wanted: Callable[[Reading], bool],
    since: float,
    timeout_s: float,
) -> Reading | None:
    """The first reading taken from ``since`` on that is ``wanted``, waiting up to
    ``timeout_s`` for it (None)."""
    deadline = time.perf_counter() + timeout_s
    while True:
        found = first(readings, since, wanted)
        if found is not None:
            return found
        if reader.done():
            reader.result()  # its failure
            raise RuntimeError("the backlog's readings stopped")
        if time.perf_counter() >= deadline:
            return None
        await asyncio.sleep(BACKLOG_READ_S / 5)


async def until_drained(redis: RedisClient, timeout_s: float) -> None:
    """Until the worker has applied and acknowledged every event appended so far."""
    deadline = time.perf_counter() + timeout_s
    while not await streams_drained(redis, keys.events_streams(PARTITIONS)):
        if time.perf_counter() >= deadline:
            raise RuntimeError(f"the probe users' clicks not applied after {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


async def probe_on_schedule(
    edges: Edges, redis: RedisClient, tokens: UserTokens, users: Sequence[str], count: int
) -> tuple[list[Probe], list[ProbeTimeout]]:
    """``count`` probes, one started every ``OVERLOAD_PROBE_EVERY_S`` whatever the others
    are doing: each click waits behind the backlog; returns the done and the timed out."""
    tasks: list[asyncio.Task[Probe]] = []
    try:
        for n in range(count):
            user = users[n % len(users)]
            tasks.append(
                asyncio.create_task(probe(edges, redis, tokens, user, n, pace=OVERLOAD_PACE))
            )
            await asyncio.sleep(OVERLOAD_PROBE_EVERY_S)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    done: list[Probe] = []
    failed: list[ProbeTimeout] = []
    for result in results:
        if isinstance(result, Probe):
            done.append(result)
        elif isinstance(result, ProbeTimeout):
            failed.append(result)
        else:
            raise result
    return done, failed


@dataclass
class Arm:
    """One arm (tiers shipped or off): the freshness settings its worker ran with, what the
    probes measured, the backlog's readings (times are ``time.perf_counter()``)."""

    name: str
    settings: dict[str, float]
    done: list[Probe]
    failed: list[ProbeTimeout]
    readings: list[Reading]
    began: float  # the burst began
    burst_s: float
    burst_end: float
    burst_end_ms: int  # on Redis's clock: every entry of the burst is of this time or before
    behind_at: float | None  # the first reading at least the overload lag behind
    drained_at: float | None
    sent: int  # the steady background's events


async def run_arm(name: str, tiers: bool, rate: int, events: int, probes: int) -> Arm:
    """On a fresh stack: the probe users warmed, the burst, the probes once the worker is
    the overload lag behind, then the backlog read until it drained (or DRAIN_WAIT_S)."""
    with tempfile.TemporaryDirectory(prefix="freshness-") as tmp:
        settings = settings_for(Path(tmp), tiers=tiers)
        freshness = {f: float(getattr(settings, f)) for f in FRESHNESS_FIELDS}
        said = ", ".join(f"{k}={v:g}" for k, v in freshness.items())
        print(f"{name}: {said} ({'the shipped settings' if tiers else 'tiers off'})")
        bound_s = settings.freshness_overload_lag_s
        stack = Stack(
            settings, free_ports=True, redis_persistent=False, say=lambda line: print(f"  {line}")
        )
        async with stack as endpoints:
            urls = [endpoints.edges[REGION], await stack.add_edge(REGION)]
            # A connection for each probe in flight (each reads one command at a time) and
            # the backlog's reader: redis-py's pool refuses more than it holds.
            redis = connect(endpoints.redis_url, max_connections=probes + 8)
            client = httpx.AsyncClient(
                timeout=10.0, limits=httpx.Limits(max_connections=probes + 8)
            )
            load: asyncio.subprocess.Process | None = None
            reader: asyncio.Task[None] | None = None
            try:
                edges = Edges(client, urls, endpoints.origin_token, OVERLOAD_POLL_S)
                users = [f"probe-{k}" for k in range(PROBE_USERS)]
                tokens = await warm(edges, endpoints.origin_url, endpoints.api_key, users)
                # Their clicks applied: the worker counts them as power users.
                await until_drained(redis, 30.0)
                readings: list[Reading] = []
                reader = asyncio.create_task(read_all_along(redis, readings))
                began = time.perf_counter()
                load, burst_s = await start_load(endpoints.redis_url, rate, burst=events)
                burst_end = time.perf_counter()
                burst_end_ms = (await read_backlog(redis)).now_ms
                print(f"  backlog of {events:,} events appended in {burst_s:.1f} s")
                behind = await until_reading(
                    readings, reader, lambda r: r.behind_s >= bound_s, began, BEHIND_WAIT_S
                )
                done, failed = await probe_on_schedule(edges, redis, tokens, users, probes)
                empty = await until_reading(
                    readings, reader, lambda r: drained(r, burst_end_ms), burst_end, DRAIN_WAIT_S
                )
                sent = await stop_load(load)
                load = None
            finally:
                if reader is not None:
                    reader.cancel()
                    await asyncio.gather(reader, return_exceptions=True)
                if load is not None:
                    await stop_load(load)
                await client.aclose()
                await redis.aclose()
    return Arm(
        name,
        freshness,
        done,
        failed,
        readings,
        began,
        burst_s,
        burst_end,
        burst_end_ms,
        behind.at if behind else None,
        empty.at if empty else None,
        sent,
    )


def arm_figures(arm: Arm, events: int) -> dict[str, Any]:
    """An arm's figures: the probes', how far behind the worker was while their clicks were
    accepted, the burst's pace, when the worker fell behind and when the backlog drained."""
    bound_s = arm.settings["freshness_overload_lag_s"]
    done = arm.done
    # every click, the timed out ones too
    clicks = [p.accepted_at for p in done] + [t.accepted_at for t in arm.failed]
    behind_at_clicks = [
        r.behind_s for at in clicks if (r := reading_before(arm.readings, at)) is not None
    ]
    window = behind_during(arm.readings, min(clicks), max(clicks), bound_s) if clicks else None
    read = first(arm.readings, arm.burst_end, lambda r: read_through(r, arm.burst_end_ms))
    unconfirmed = sum(not p.confirmed for p in done)
    problems = Counter(problem for p in done for problem in p.problems)
    return {
        "settings": arm.settings,
        "probes": len(done),
        "timed_out": len(arm.failed),
        # the timed out probes at the timeout: a quantile there is "at least"
        "accepted_to_region_edges": censored_figures(
            [p.region_ms for p in done], len(arm.failed), OVERLOAD_PROBE_TIMEOUT_S * 1000
        ),
        # the completed probes only
        "accepted_to_redis": figures([p.redis_ms for p in done]) if done else None,
        "sync_added": figures([p.region_ms - p.redis_ms for p in done]) if done else None,
        "behind_during_probes": window,
        "clicks_at_least_bound_behind": sum(b >= bound_s for b in behind_at_clicks),
        "behind_at_clicks_s": (
            {
                "min": round(min(behind_at_clicks), 1),
                "p50": round(percentile(behind_at_clicks, 50), 1),
                "max": round(max(behind_at_clicks), 1),
            }
            if behind_at_clicks
            else None
        ),
        "burst_s": round(arm.burst_s, 1),
        "burst_events_per_s": round(events / arm.burst_s) if arm.burst_s else None,
        "bound_behind_after_burst_began_s": (
            round(arm.behind_at - arm.began, 1) if arm.behind_at is not None else None
        ),
        # the worker past the burst's last entry (each applied or held): its pace through it
        "read_through_after_burst_s": (
            round(read.at - arm.burst_end, 1) if read is not None else None
        ),
        "drained_after_burst_s": (
            round(arm.drained_at - arm.burst_end, 1) if arm.drained_at is not None else None
        ),
        "longest_stall_s": round(longest_stall_s(arm.readings), 1),
        "pending_max": max((r.pending for r in arm.readings), default=0),
        # The counters are the edges': with probes in flight for a minute side by side, a
        # probe's "before" and "after" span the others' requests and the pools' lifetimes.
        "next_requests_confirmed": 2 * (len(done) - unconfirmed),
        "next_requests": 2 * len(done),
        "problems": dict(problems),
        "background_appended": arm.sent,
    }


def describe(rate: int, events: int, probes: int) -> None:
    """What it changes from ``benchmarks.freshness``, printed (every setting it changes)."""
    print(
        f"overload mode: a backlog of {events:,} feedback events over {burst_users(events):,} "
        f"users of its own appended as fast as possible (--events {events}) beside "
        f"{rate:,} events/s of background; the probes start once the worker reads entries "
        "at least freshness_overload_lag_s old (or after "
        f"{BEHIND_WAIT_S:.0f} s): {probes} probes, one started every "
        f"{OVERLOAD_PROBE_EVERY_S} s whatever the others are doing, each reading Redis and "
        f"then the edges every {OVERLOAD_POLL_S * 1000:.0f} ms for up to "
        f"{OVERLOAD_PROBE_TIMEOUT_S:.0f} s; the backlog read every {BACKLOG_READ_S} s, "
        f"until drained or {DRAIN_WAIT_S:.0f} s after the probes; two arms, each on a fresh "
        "stack:"
    )


def print_arm(arm: Arm, f: dict[str, Any]) -> None:
    bound_s = arm.settings["freshness_overload_lag_s"]
    timeout_s = OVERLOAD_PROBE_TIMEOUT_S
    print(
        f"{arm.name}: backlog appended in {f['burst_s']} s ({f['burst_events_per_s']:,}/s); "
        f"the worker {bound_s:g} s behind {f['bound_behind_after_burst_began_s']} s after "
        f"the burst began; {f['probes']} probes ({f['timed_out']} timed out)"
    )
    for label, key in (
        (
            f"  accepted -> both edges hold it (timed out: {timeout_s:.0f} s)",
            "accepted_to_region_edges",
        ),
        ("  accepted -> in Redis (stage; completed probes)", "accepted_to_redis"),
        ("  Redis stage -> both edges (completed probes)", "sync_added"),
    ):
        if f[key] is not None:
            g = f[key]
            print(
                f"{label:52s} p50 {g['p50_ms']:8.1f}  p95 {g['p95_ms']:8.1f}  "
                f"p99 {g['p99_ms']:8.1f}  max {g['max_ms']:8.1f} ms"
            )
    window, clicks = f["behind_during_probes"], f["behind_at_clicks_s"]
    if window is not None and clicks is not None:
        print(
            f"  the worker behind while the clicks were accepted: {clicks['min']}-"
            f"{clicks['max']} s (median {clicks['p50']}); {f['clicks_at_least_bound_behind']} "
            f"of {f['probes'] + f['timed_out']} clicks at least {bound_s:g} s behind; readings "
            "in the window "
            f"{window['min_s']}-{window['max_s']} s, {window['share_at_least_bound']:.0%} at "
            f"least {bound_s:g} s; oldest entry not applied up to {window['unapplied_max_s']} "
            f"s, up to {window['pending_max']:,} entries pending (held and in flight)"
        )
    print(
        f"  next request at each edge: {f['next_requests_confirmed']} of {f['next_requests']} "
        f"ranked at the edge from the pool at hand with no origin call; problems: "
        f"{f['problems'] or 'none'}"
    )
    read, drain = f["read_through_after_burst_s"], f["drained_after_burst_s"]
    if read is not None:
        print(f"  the worker read past the burst's last entry {read} s after the burst ended")
    print(
        f"  the worker read nothing for {f['longest_stall_s']} s at most; up to "
        f"{f['pending_max']:,} entries pending in the run"
    )
    print(
        f"  backlog drained {drain} s after the burst ended"
        if drain is not None
        else f"  backlog not drained within the run ({DRAIN_WAIT_S:.0f} s after the probes)"
    )


async def run(rate: int, events: int, probes: int, out: Path) -> None:
    begun = time.perf_counter()
    print(f"machine: {machine()}")
    describe(rate, events, probes)
    arms = [
        await run_arm("tiers_shipped", True, rate, events, probes),
        await run_arm("tiers_off", False, rate, events, probes),
    ]
    plot(out / "freshness-overload.png", arms)
    found = {arm.name: arm_figures(arm, events) for arm in arms}
    for arm in arms:
        print_arm(arm, found[arm.name])
    on, off = (found[a.name]["accepted_to_region_edges"] or {} for a in arms)
    p99 = ratio(on.get("p99_ms"), off.get("p99_ms"))
    p50 = ratio(on.get("p50_ms"), off.get("p50_ms"))
    timeout_ms = OVERLOAD_PROBE_TIMEOUT_S * 1000
    p99_kind = ratio_kind(on.get("p99_ms"), off.get("p99_ms"), timeout_ms)
    p50_kind = ratio_kind(on.get("p50_ms"), off.get("p50_ms"), timeout_ms)
    print(
        f"power user's click at both edges, p99 tiers shipped / tiers off: "
        f"{on.get('p99_ms')} / {off.get('p99_ms')} ms = {p99} ({p99_kind}); "
        f"p50: {p50} ({p50_kind})"
    )
    save_and_finish(
        {
            "mode": "overload",
            "what": "accepted -> both edges of the region hold a power user's click, while "
            "the worker is behind a backlog burst: the freshness tiers at their shipped "
            "settings against tiers off, each on a fresh stack",
            "backlog_events": events,
            "backlog_users": burst_users(events),
            "background_events_per_s": rate,
            "probe_every_s": OVERLOAD_PROBE_EVERY_S,
            "poll_ms": OVERLOAD_POLL_S * 1000,
            **found,
            "baseline": "tiers_off",
            "ratio_p99_tiers_shipped_to_off": p99,
            "ratio_p99_is": p99_kind,
            "ratio_p50_tiers_shipped_to_off": p50,
            "ratio_p50_is": p50_kind,
            "probe_timeout_ms": timeout_ms,
        },
        out / "freshness-overload.json",
        out / "freshness-overload.png",
        begun,
        {
            "probe_ms": {
                arm.name: [
                    {
                        "accepted_s": round(p.accepted_at - arm.began, 2),
                        "redis": round(p.redis_ms, 1),
                        "edges": [round(e, 1) for e in p.edges_ms],
                    }
                    for p in arm.done
                ]
                for arm in arms
            },
            "timed_out_accepted_s": {
                arm.name: [round(t.accepted_at - arm.began, 2) for t in arm.failed] for arm in arms
            },
            # [seconds after the burst began, behind_s, oldest unapplied s, pending]
            "backlog": {
                arm.name: [
                    [
                        round(r.at - arm.began, 2),
                        round(r.behind_s, 2),
                        round(r.unacked_s, 2),
                        r.pending,
                    ]
                    for r in arm.readings
                ]
                for arm in arms
            },
        },
    )


def plot(path: Path, arms: Sequence[Arm]) -> None:
    """The arms' CDFs of the probes' figure; how far behind each worker was over time, with
    each probe's figure at the time its click was accepted."""
    with plots.figure(
        path,
        "Freshness under overload: a power user's click at the region's edges, "
        "tiers shipped vs off",
        panels=2,
        width=11,
        height=6,
    ) as (left, right):
        for arm, colour in zip(arms, ("C0", "C3"), strict=False):
            plots.cdf(left, [p.region_ms / 1000 for p in arm.done], arm.name, color=colour)
            right.plot(
                [r.at - arm.began for r in arm.readings],
                [r.behind_s for r in arm.readings],
                color=colour,
                label=f"{arm.name}: worker behind (oldest unread entry's age)",
            )
            right.plot(
                [r.at - arm.began for r in arm.readings],
                [r.unacked_s for r in arm.readings],
                color=colour,
                linestyle=":",
                label=f"{arm.name}: oldest entry not applied (held ones too)",
            )
            right.plot(
                [p.accepted_at - arm.began for p in arm.done],
                [p.region_ms / 1000 for p in arm.done],
                marker=".",
                linestyle="",
                color=colour,
                label=f"{arm.name}: probes (accepted -> both edges)",
            )
            if arm.failed:
                right.plot(
                    [t.accepted_at - arm.began for t in arm.failed],
                    [OVERLOAD_PROBE_TIMEOUT_S] * len(arm.failed),
                    marker="x",
                    linestyle="",
                    color=colour,
                    label=f"{arm.name}: probes timed out (at least this)",
                )
        bound_s = arms[0].settings["freshness_overload_lag_s"] if arms else 0.0
        right.axhline(bound_s, color="grey", linestyle="--", label="overload lag")
        plots.labelled(
            left, "CDF over the probes (timed out ones left out)", "s", "share of probes"
        )
        plots.labelled(right, "over the run", "s after the burst began", "s")
        right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize="small")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--events",
        type=int,
        default=OVERLOAD_EVENTS,
        metavar="N",
        help=f"the backlog's events, appended before the probes ({OVERLOAD_EVENTS:,})",
    )
    parser.add_argument(
        "--rate", type=int, default=OVERLOAD_RATE, help=f"background events/s ({OVERLOAD_RATE})"
    )
    parser.add_argument(
        "--probes", type=int, default=OVERLOAD_PROBES, help=f"probe clicks ({OVERLOAD_PROBES})"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("freshness"),
        help="where the JSON and PNG go (.perso/bench/freshness)",
    )
    args = parser.parse_args()
    if args.events < 1:
        parser.error("--events must be at least 1")
    asyncio.run(run(args.rate, args.events, args.probes, args.out))


if __name__ == "__main__":
    main()
