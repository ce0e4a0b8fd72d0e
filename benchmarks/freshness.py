"""Freshness at the edge: from a click accepted to every edge of the user's region holding
the user's model with that click in it, and the next request there ranked from it with no
origin call; the worker's stage (the click in the user's record in Redis) in the same run.

A real stack (``perso.stack``): embedded Redis, a 2,000-item sample catalog, the origin, one
stream worker (``perso worker``, default micro-batches of 100 events or 100 ms; the
freshness tiers at their shipped settings: they hold nothing unless the worker falls 10 s
behind, and the probe users are power users, applied at once even then), two edge
processes of one region, every setting at its default (ranking at the edge included).
Beside it, ``benchmarks.feedback_load`` appends ``--rate`` events per second of other users'
feedback through the intake (3 in 8 views, the rest engagements and dismisses), so the
worker writes models and publishes updated users to the edges all along.

Probe users are power users whose state both edges hold and whose segment's pool both have
cached: each sends 12 clicks through the first edge (which then keys them as power; the
second edge knows it from their token), then asks each edge once (the edge fetches their
state and the segment's pool). Then the probes, one at a time, 50 ms apart, in turn over
the probe users:

1. a request at each edge (it must be ranked there, ``metadata.tier: "edge"``); the edges'
   ``user_fetches`` and ``pool_fills`` counters (``/metrics``) are read;
2. ``POST /v1/feedback`` at the first edge: a click on the first item of its answer, with
   the answer's ``request_id`` and an ``interaction_id`` of its own. The edge forwards it
   to the origin, which answers once the event is in Redis: the edge's 200 is *accepted*,
   and the clock starts when the client has it;
3. until done, Redis is read every millisecond for the user's record (``u:{id}:st``) and
   each edge's ``GET /v1/internal/users/{id}/held`` every 2 ms (the service token). The
   *Redis stage* ends at the first read whose record lists the click among its applied
   observations: its version ``v`` is the first with the click in it. An edge is done at
   the first answer holding version ``v`` or later (versions never go back at an edge);
4. a request at each edge again: it must be ranked at the edge (``tier: "edge"``) from the
   pool at hand (``X-Cache: HIT``), and the edge's ``user_fetches`` must not have moved
   (a user whose state the edge lacks costs exactly one such fetch), so it was ranked from
   the model of step 3, version ``v`` or later: the click is in it. ``pool_fills`` may move
   only by background refreshes ahead of a pool's expiry (``revalidations``), never on the
   request's path.

Each time is the client's clock when the answer that showed the condition arrived: an
upper bound (within a poll period) of when it became true. The target is the issue's: the
next request at any edge of the user's region reflects the click, p99 under 250 ms, so a
probe's figure is the later of the two edges. The Redis stage is reported beside it from
the same probes: it is a stage of the edge figure, not an alternative to it.

The freshness tiers while the worker is behind (what they buy a power user then) are
measured by ``benchmarks.freshness_overload``, on the same stack and probes.

Run: ``.venv/bin/python -m benchmarks.freshness [--rate 2000] [--probes 300] [--out DIR]``
(about 2 minutes; stops everything it started); ``freshness.json`` (with every probe's
figures) and ``freshness.png`` (the stages' CDFs, each probe in order) go to ``--out``
(default ``.perso/bench/freshness``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from benchmarks.report import machine, percentile, results_dir, save_and_finish
from config.settings import Settings
from origin.catalog.sample import item_id_of
from origin.learned.user_models import decode_record, observation_hash
from perso import plots
from perso.stack import Stack
from perso.user_tokens import UserTokens
from protocol import keys
from redis_client.client import RedisClient, connect

REGION = "us-east"
CATALOG_ITEMS = 2_000
DIM = 128
PARTITIONS = 8
PROBE_USERS = 20
WARM_CLICKS = 12  # a power user: more than 10 interactions today
PROBE_EVERY_S = 0.05
REDIS_POLL_S = 0.001
EDGE_POLL_MS = 2.0  # each read is a FastAPI request the edge serves: the poll costs it CPU
PROBE_TIMEOUT_S = 10.0
TARGET_P99_MS = 250.0
COUNTERS = ("user_fetches", "pool_fills", "revalidations", "ranked_here")
# Every user's feedback applied at once, even when the worker is behind:
# ``benchmarks.freshness_overload``'s second arm.
TIERS_OFF: dict[str, Any] = {"freshness_active_s": 0.0, "freshness_casual_s": 0.0}
# For the feedback load's backlog burst to be appended (``start_load``'s ``burst``).
BURST_TIMEOUT_S = 180.0


@dataclass
class Probe:
    """One click's times (ms after accepted) and what the requests after it showed."""

    feedback_ms: float  # the click's own round trip: sent -> the edge's 200
    redis_ms: float
    version: int
    edges_ms: list[float]
    confirmed: bool
    problems: list[str] = field(default_factory=list)
    accepted_at: float = 0.0  # time.perf_counter() when the edge's 200 came

    @property
    def region_ms(self) -> float:
        return max(self.edges_ms)


@dataclass(frozen=True)
class Pace:
    """How a probe watches for its click: the Redis read period, how long it waits, and
    whether it reads the edges only once the Redis stage is done (no edge can hold the
    click before the worker wrote it: with many probes in flight, reads made before are
    requests the edges serve for nothing)."""

    redis_poll_s: float = REDIS_POLL_S
    timeout_s: float = PROBE_TIMEOUT_S
    edges_after_redis: bool = False


PROBE_PACE = Pace()


class ProbeTimeout(TimeoutError):
    """A probe's click not seen in time; ``accepted_at`` is when it was accepted
    (``time.perf_counter()``)."""

    def __init__(self, message: str, accepted_at: float) -> None:
        super().__init__(message)
        self.accepted_at = accepted_at


class Edges:
    """The two edges of the region, over one client, with the service token for
    ``/held`` and users' tokens for the API."""

    def __init__(
        self, client: httpx.AsyncClient, urls: Sequence[str], service: str, poll_s: float
    ) -> None:
        self.client, self.urls, self.poll_s = client, list(urls), poll_s
        self._service = {"authorization": f"Bearer {service}"}

    async def held_version(self, url: str, user: str) -> int | None:
        response = await self.client.get(
            f"{url}/v1/internal/users/{user}/held", headers=self._service
        )
        response.raise_for_status()
        version = response.json()["model_version"]
        return int(version) if version is not None else None

    async def counters(self, url: str) -> dict[str, float]:
        text = (await self.client.get(f"{url}/metrics")).text
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            name = family.name.removeprefix("perso_edge_")
            for sample in family.samples:
                if name in COUNTERS and sample.name.endswith("_total"):
                    found[name] = sample.value
                elif name == "prewarms" and sample.labels.get("outcome") == "filled":
                    # personal fills from the origin after a click, off the request's path
                    found["prewarm_fills"] = sample.value
        return found


def personalize_body(user: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "session_id": f"s-{user}",
        "context": {"page_type": "home", "placement": "feed", "device": "mobile"},
        "constraints": {"count": 10},
    }


async def ask(edges: Edges, url: str, user: str, auth: dict[str, str]) -> httpx.Response:
    response = await edges.client.post(
        f"{url}/v1/personalize", json=personalize_body(user), headers=auth
    )
    response.raise_for_status()
    return response


async def warm(edges: Edges, origin_url: str, api_key: str, users: Sequence[str]) -> UserTokens:
    """Each probe user a power user (12 clicks through the first edge), then asked once
    at each edge: it holds their state and their segment's pool from then on. Returns
    the users' tokens issued after the clicks, which say so."""
    client = edges.client
    tokens = UserTokens(origin_url, api_key)
    for n, user in enumerate(users):
        clicks = [
            {
                "item_id": item_id_of((n * 37 + k * 101) % CATALOG_ITEMS, CATALOG_ITEMS),
                "action": "click",
            }
            for k in range(WARM_CLICKS)
        ]
        auth = await tokens.headers(client, user)
        response = await client.post(
            f"{edges.urls[0]}/v1/feedback",
            json={"user_id": user, "session_id": f"s-{user}", "feedback": clicks},
            headers=auth,
        )
        response.raise_for_status()
    # Tokens issued now carry the segment the origin counts (power).
    power = UserTokens(origin_url, api_key)
    for user in users:
        auth = await power.headers(client, user)
        for url in edges.urls:
            tier = (await ask(edges, url, user, auth)).json()["metadata"]["tier"]
            if tier != "edge":
                raise RuntimeError(f"{user} is not ranked at {url} after warming: {tier}")
    return power


async def until_in_redis(
    redis: RedisClient, user: str, interaction_id: str, accepted: float, pace: Pace = PROBE_PACE
) -> tuple[float, int]:
    """(ms after accepted, version) of the first read of the user's record with the click
    applied."""
    wanted = observation_hash(interaction_id)
    deadline = accepted + pace.timeout_s
    while time.perf_counter() < deadline:
        raw = await redis.get(keys.user_record(user))
        record = decode_record(raw if isinstance(raw, bytes) else None, DIM)
        now = time.perf_counter()
        if record.applied(wanted):
            return (now - accepted) * 1000, record.version
        await asyncio.sleep(pace.redis_poll_s)
    raise TimeoutError(f"{interaction_id} not in {user}'s record after {pace.timeout_s:.0f} s")


async def until_held(
    edges: Edges,
    url: str,
    user: str,
    version: asyncio.Future[int],
    accepted: float,
    *,
    pace: Pace = PROBE_PACE,
) -> float:
    """ms after accepted of the first answer of ``url`` holding ``version`` or later (the
    version is known once the Redis stage is done; reads made before are kept)."""
    reads: list[tuple[float, int]] = []
    deadline = accepted + pace.timeout_s
    timed_out = f"{url} did not hold {user}'s click after {pace.timeout_s:.0f} s"
    if pace.edges_after_redis:
        try:
            await asyncio.wait_for(asyncio.shield(version), deadline - time.perf_counter())
        except TimeoutError:
            raise TimeoutError(timed_out) from None
    while time.perf_counter() < deadline:
        held = await edges.held_version(url, user)
        reads.append((time.perf_counter(), held if held is not None else -1))
        if version.done():
            target = version.result()
            for at, seen in reads:
                if seen >= target:
                    return (at - accepted) * 1000
        await asyncio.sleep(edges.poll_s)
    raise TimeoutError(timed_out)


async def probe(
    edges: Edges,
    redis: RedisClient,
    tokens: UserTokens,
    user: str,
    n: int,
    *,
    pace: Pace = PROBE_PACE,
) -> Probe:
    client = edges.client
    auth = await tokens.headers(client, user)
    first = None
    problems: list[str] = []
    for url in edges.urls:
        answer = (await ask(edges, url, user, auth)).json()
        if answer["metadata"]["tier"] != "edge":
            problems.append(f"before: ranked by the {answer['metadata']['tier']}")
        first = first or answer
    assert first is not None
    before = [await edges.counters(url) for url in edges.urls]
    interaction_id = f"probe-{n}"
    click = {
        "item_id": first["items"][0]["item_id"],
        "action": "click",
        "position": 1,
        "interaction_id": interaction_id,
    }
    body = {"user_id": user, "session_id": f"s-{user}", "request_id": first["request_id"]}
    sent = time.perf_counter()
    response = await client.post(
        f"{edges.urls[0]}/v1/feedback", json={**body, "feedback": [click]}, headers=auth
    )
    response.raise_for_status()
    accepted = time.perf_counter()
    version: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def redis_stage() -> float:
        ms, v = await until_in_redis(redis, user, interaction_id, accepted, pace)
        version.set_result(v)
        return ms

    try:
        redis_ms, *edges_ms = await asyncio.gather(
            redis_stage(),
            *(until_held(edges, url, user, version, accepted, pace=pace) for url in edges.urls),
        )
    except TimeoutError as exc:
        raise ProbeTimeout(str(exc), accepted) from None
    for url, was in zip(edges.urls, before, strict=True):
        answer = await ask(edges, url, user, auth)
        tier, cache = answer.json()["metadata"]["tier"], answer.headers.get("x-cache")
        if (tier, cache) != ("edge", "HIT"):
            problems.append(f"after: tier {tier}, X-Cache {cache}")
        now = await edges.counters(url)
        if now["user_fetches"] != was["user_fetches"]:
            problems.append("after: the user's state was fetched from the origin")
        fills = now["pool_fills"] - was["pool_fills"]
        if fills > now["revalidations"] - was["revalidations"]:
            problems.append("after: a pool was filled on the request's path")
    return Probe(
        feedback_ms=(accepted - sent) * 1000,
        redis_ms=redis_ms,
        version=version.result(),
        edges_ms=list(edges_ms),
        confirmed=not problems,
        problems=problems,
        accepted_at=accepted,
    )


def figures(samples: Sequence[float]) -> dict[str, float]:
    return {f"p{q}_ms": round(percentile(list(samples), q), 1) for q in (50, 95, 99)} | {
        "max_ms": round(max(samples), 1)
    }


def settings_for(data_dir: Path, *, tiers: bool = True) -> Settings:
    """The stack's settings, the shipped ones but for what a benchmark's stack needs; without
    ``tiers``, the freshness tiers off."""
    off = {} if tiers else TIERS_OFF
    return Settings(
        data_dir=data_dir,
        catalog_size=CATALOG_ITEMS,
        embedding_dim=DIM,
        event_partitions=PARTITIONS,
        text_encoder="hashing",
        regions=(REGION,),
        workers=1,
        identity_keys=SecretStr("freshness-benchmark-identity-key-0123"),
        log_level="warning",
        **off,
    )


async def start_load(
    redis_url: str, rate: int, burst: int = 0
) -> tuple[asyncio.subprocess.Process, float]:
    """``benchmarks.feedback_load`` appending ``rate`` events/s, after a backlog of ``burst``
    events appended as fast as it can; returns once it appends at ``rate``, with the
    seconds the burst took. Killed if it does not get there."""
    argv = [redis_url, str(rate), "--items", str(CATALOG_ITEMS), "--partitions", str(PARTITIONS)]
    if burst:
        argv += ["--burst", str(burst)]
    load = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.feedback_load", *argv, stdout=asyncio.subprocess.PIPE
    )
    assert load.stdout is not None
    burst_s = 0.0
    try:
        if burst:
            line = await asyncio.wait_for(load.stdout.readline(), BURST_TIMEOUT_S)
            if not line.startswith(b"burst "):
                raise RuntimeError(f"the feedback load's burst failed: {line!r}")
            burst_s = float(line.split()[-1])
        line = await asyncio.wait_for(load.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError(f"the feedback load did not start: {line!r}")
    except BaseException:
        if load.returncode is None:
            load.kill()
        await load.wait()
        raise
    return load, burst_s


async def stop_load(load: asyncio.subprocess.Process) -> int:
    """Stop the load; returns how many events it appended at its rate. Killed if it has
    not stopped within 30 s."""
    if load.returncode is None:
        load.terminate()
    try:
        out, _ = await asyncio.wait_for(load.communicate(), 30)
    except TimeoutError:
        load.kill()
        await load.wait()
        raise
    return int(out.split()[-1]) if out.strip() else 0


async def run(rate: int, probes: int, poll_ms: float, out: Path) -> None:
    begun = time.perf_counter()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="freshness-") as tmp:
        stack = Stack(
            settings_for(Path(tmp)),
            free_ports=True,
            redis_persistent=False,
            say=lambda line: print(f"  {line}"),
        )
        async with stack as endpoints:
            urls = [endpoints.edges[REGION], await stack.add_edge(REGION)]
            redis = connect(endpoints.redis_url)
            client = httpx.AsyncClient(timeout=10.0)
            load: asyncio.subprocess.Process | None = None
            try:
                edges = Edges(client, urls, endpoints.origin_token, poll_ms / 1000)
                users = [f"probe-{k}" for k in range(PROBE_USERS)]
                tokens = await warm(edges, endpoints.origin_url, endpoints.api_key, users)
                load, _ = await start_load(endpoints.redis_url, rate)
                await asyncio.sleep(2.0)  # the load is steady
                started = time.perf_counter()
                done: list[Probe] = []
                failed: list[str] = []
                for n in range(probes):
                    try:
                        done.append(await probe(edges, redis, tokens, users[n % PROBE_USERS], n))
                    except TimeoutError as exc:
                        failed.append(str(exc))
                    await asyncio.sleep(PROBE_EVERY_S)
                seconds = time.perf_counter() - started
                sent = await stop_load(load)
                load = None
                after = [await edges.counters(url) for url in urls]
            finally:
                if load is not None:
                    await stop_load(load)
                await client.aclose()
                await redis.aclose()
    plot(out / "freshness.png", done)
    report(
        done,
        failed,
        rate=rate,
        sent=sent,
        seconds=seconds,
        counters=after,
        poll_ms=poll_ms,
        out=out,
        begun=begun,
    )


def plot(path: Path, done: list[Probe]) -> None:
    """The stages' CDFs against the target; each probe's figure in the order they ran."""
    with plots.figure(
        path,
        "Freshness: click accepted to the user's model at the region's edges (ms)",
        panels=2,
        width=10,
    ) as (left, right):
        for label, values, style, colour in (
            ("both edges of the region (the figure)", [p.region_ms for p in done], "-", "black"),
            ("the edge that took the click", [p.edges_ms[0] for p in done], ":", "C0"),
            ("the region's other edge", [p.edges_ms[1] for p in done], ":", "C1"),
            ("in the user's record in Redis (stage)", [p.redis_ms for p in done], "--", "C2"),
        ):
            plots.cdf(left, values, label, log_x=True, linestyle=style, color=colour)
        left.axvline(TARGET_P99_MS, color="red", linestyle="--", label="p99 target")
        plots.labelled(left, f"CDF over {len(done)} probes", "ms (log scale)", "share of probes")
        right.plot(
            [p.region_ms for p in done], marker=".", linestyle="", color="black", label="both edges"
        )
        right.plot(
            [p.redis_ms for p in done], marker=".", linestyle="", color="C2", label="Redis stage"
        )
        right.axhline(TARGET_P99_MS, color="red", linestyle="--", label="p99 target")
        plots.log_scale(right, "y")
        plots.labelled(right, "each probe, in order (50 ms apart)", "probe", "ms (log scale)")


def report(
    done: list[Probe],
    failed: list[str],
    *,
    rate: int,
    sent: int,
    seconds: float,
    counters: list[dict[str, float]],
    poll_ms: float,
    out: Path,
    begun: float,
) -> None:
    if not done:
        raise RuntimeError(f"no probe completed: {failed[:3]}")
    region = figures([p.region_ms for p in done])
    redis = figures([p.redis_ms for p in done])
    clicked = figures([p.edges_ms[0] for p in done])
    other = figures([p.edges_ms[1] for p in done])
    added = figures([p.region_ms - p.redis_ms for p in done])
    from_sent = figures([p.feedback_ms + p.region_ms for p in done])
    unconfirmed = [p for p in done if not p.confirmed]
    problems: dict[str, int] = {}
    for p in unconfirmed:
        for problem in p.problems:
            problems[problem] = problems.get(problem, 0) + 1
    meets = region["p99_ms"] < TARGET_P99_MS and not failed and not unconfirmed
    print(
        f"{len(done)} probes ({len(failed)} timed out) in {seconds:.0f} s under {rate:,} events/s "
        f"of background feedback ({sent:,} appended)"
    )
    for label, f in (
        ("accepted -> both edges of the region hold it", region),
        ("  the edge that took the click", clicked),
        ("  the region's other edge", other),
        ("accepted -> in the user's record in Redis (stage)", redis),
        ("Redis stage -> both edges (sync, edge apply)", added),
        ("click sent -> both edges hold it", from_sent),
    ):
        print(
            f"{label:52s} p50 {f['p50_ms']:6.1f}  p95 {f['p95_ms']:6.1f}  "
            f"p99 {f['p99_ms']:6.1f}  max {f['max_ms']:6.1f} ms"
        )
    print(
        f"next request at each edge: {2 * (len(done) - len(unconfirmed))} of {2 * len(done)} "
        "ranked at the edge from the pool at hand with no origin call; "
        f"problems: {problems or 'none'}"
    )
    print(f"target p99 < {TARGET_P99_MS:.0f} ms: {'met' if meets else 'missed'}")
    save_and_finish(
        {
            "target": f"accepted -> every edge of the user's region holds the click, "
            f"p99 < {TARGET_P99_MS:.0f} ms, the next request there ranked at the edge "
            "with no origin call",
            "meets_target": meets,
            "accepted_to_region_edges": region,
            "accepted_to_clicked_edge": clicked,
            "accepted_to_other_edge": other,
            "baseline": {
                "what": "accepted -> the click in the user's record in Redis, same probes: "
                "a stage of the edge figure, not an alternative to it",
                **redis,
            },
            "ratio_to_baseline": None,
            "ratio_note": "the baseline is a stage of the measured path, so a ratio says "
            "nothing of a choice; what the edges add after it is sync_added",
            "sync_added": added,
            "feedback_round_trip": figures([p.feedback_ms for p in done]),
            "sent_to_region_edges": from_sent,
            "probes": len(done),
            "timed_out": len(failed),
            "next_requests_confirmed": 2 * (len(done) - len(unconfirmed)),
            "next_requests": 2 * len(done),
            "problems": problems,
            "edges": len(counters),
            "probe_users": PROBE_USERS,
            "poll_ms": {"redis": REDIS_POLL_S * 1000, "edges": poll_ms},
            "background_events_per_s": rate,
            "background_appended": sent,
            "probing_seconds": round(seconds, 1),
            "edge_counters_at_end": counters,
        },
        out / "freshness.json",
        out / "freshness.png",
        begun,
        # every probe's figures (as many as --probes), in the order they ran
        {
            "probe_ms": [
                {"redis": round(p.redis_ms, 2), "edges": [round(e, 2) for e in p.edges_ms]}
                for p in done
            ]
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=2000, help="background events/s (2000)")
    parser.add_argument("--probes", type=int, default=300, help="probe clicks (300)")
    parser.add_argument(
        "--poll-ms", type=float, default=EDGE_POLL_MS, help="edges' /held read period (2)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("freshness"),
        help="where the JSON and PNG go (.perso/bench/freshness)",
    )
    args = parser.parse_args()
    asyncio.run(run(args.rate, args.probes, args.poll_ms, args.out))


if __name__ == "__main__":
    main()
