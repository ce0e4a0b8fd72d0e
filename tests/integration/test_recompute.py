"""``perso recompute`` end to end against the suite's Redis: feedback and decisions through the
origin's intake and decision log, applied by a running worker, then the users' models
recomputed from the log in a scratch redis-server (``perso.recompute``, ``origin.worker.recompute``)
and compared with the live ones.

The story of the log, in three phases on the real clock (stream ids are Redis's time):

- A: ``u-old`` clicks three items nobody else sees; then their entries are trimmed from
  the log (as a retention would, once applied);
- B: ten users are served slates (decisions) and click or dismiss some of their items;
- C: five of them come back, and three new users arrive.

Traffic comes in rounds (every user once, within a few milliseconds) a quarter of a second
apart, and a join closes when the user's next decision comes (grace 0; the reward window
is an hour): so the running worker's batches are the rounds, as the recompute's slices are,
and its closings follow the same batches. Where batches and slices split the traffic
differently, the items' rates a user's update reads can differ, and so can the models:
docs/measured.md's "perso recompute" row measures that.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from decision_log.writer import DecisionLog
from origin.event_streams.event_log import FeedbackLog
from origin.event_streams.streams import ensure_groups
from origin.exceptions import RecomputeError
from origin.worker.consumer import StreamWorker
from origin.worker.learning import learning
from origin.worker.recompute import recompute, recompute_config
from origin.worker.recompute_comparison import Kind
from perso import cli
from perso import recompute as recompute_command
from perso.redis_server import RedisServer
from protocol import keys
from protocol.decisions import Decision, Shown
from protocol.events import FeedbackEvent
from protocol.vectors import pack_vector
from redis_client.client import RedisClient, connect

# The live keyspace may be a Redis Cluster (the scratch one is a node of its own).
pytestmark = pytest.mark.cluster

DIM = 8
PARTITIONS = 2
ITEMS = [f"it-{n}" for n in range(24)]
OLD_ITEMS = ["old-0", "old-1", "old-2"]
PHASE_B = [f"u-{n}" for n in range(10)]
RETURNING = PHASE_B[:5]
NEW_IN_C = [f"u-{n}" for n in range(10, 13)]


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """Joins closed by the user's next decision, every tier applied at once; the rest as
    deployed."""
    return make_settings(
        embedding_dim=DIM,
        event_partitions=PARTITIONS,
        reward_wait_s=3600,
        reward_grace_s=0,
        freshness_active_s=0,
        freshness_casual_s=0,
    )


@dataclass
class Story:
    boundary_ms: int  # after phase A
    mid_ms: int  # after phase B


async def add_items(redis: RedisClient) -> None:
    rng = np.random.default_rng(5)
    for item in [*ITEMS, *OLD_ITEMS]:
        v = rng.normal(size=DIM).astype(np.float32)
        await redis.set(keys.item_vector(item), pack_vector(v / np.linalg.norm(v)))


def feedback(user: str, item: str, action: str, request_id: str | None, n: int) -> FeedbackEvent:
    ms = int(time.time() * 1000)
    return FeedbackEvent(f"ix-{user}-{n}", user, item, action, ms, ms, request_id=request_id)


async def serve(
    rng: random.Random,
    users: list[str],
    decisions: DecisionLog,
    intake: FeedbackLog,
    rounds: int,
) -> None:
    """Each user served a slate of five items a round; a click on one in two slates, a
    dismiss on one in four, and now and then a click on an item not served (no request).
    The rounds are a quarter of a second apart."""
    n = 0
    for r in range(rounds):
        await asyncio.sleep(0.25)
        for user in users:
            n += 1
            rid = f"r-{user}-{r}-{rng.random():.6f}"
            slate = rng.sample(ITEMS, 5)
            shown = tuple(Shown(item, k + 1, 0.1, 0.5) for k, item in enumerate(slate))
            record = Decision(
                rid, user, "user", "mobile_evening", "home", int(time.time() * 1000), "origin",
                "configured", "1", "m", shown,
            )  # fmt: skip
            decisions.log(functools.partial(lambda d: d, record))
            await decisions.flush()
            events = []
            if rng.random() < 0.5:
                events.append(feedback(user, rng.choice(slate[:3]), "click", rid, n))
            if rng.random() < 0.25:
                events.append(feedback(user, slate[-1], "dismiss", rid, n + 10_000))
            if rng.random() < 0.2:
                events.append(feedback(user, rng.choice(ITEMS), "click", None, n + 20_000))
            if events:
                await intake.append(user, events)


async def settled(redis: RedisClient) -> None:
    """Until the live worker has read and applied every entry (and so closed the joins
    due by then: it closes after each batch)."""
    for _ in range(500):
        behind = 0
        for p in range(PARTITIONS):
            for stream in (keys.events_stream(p), keys.decisions_stream(p)):
                [group] = await redis.xinfo_groups(stream)
                last = (await redis.xinfo_stream(stream))["last-generated-id"]
                behind += group["pending"] + (group["last-delivered-id"] != last)
        if not behind:
            await asyncio.sleep(0.1)  # the batch's closings, after its acknowledgement
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the live worker did not settle")


async def tell(settings: Settings, redis: RedisClient) -> Story:
    """The three phases through a running worker; ``u-old``'s phase A trimmed after."""
    rng = random.Random(11)
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    taught = learning(settings)
    worker = StreamWorker(
        redis,
        partitions=PARTITIONS,
        dim=DIM,
        consumer="w-live",
        clock=time.time,
        block_ms=50,
        freshness=taught.freshness,
        posteriors=taught.posteriors,
        model=taught.model,
        joins=taught.joins,
    )
    intake = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=3600, clock=time.time)
    decisions = DecisionLog(redis, partitions=PARTITIONS, clock=time.time)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await intake.append(
            "u-old", [feedback("u-old", item, "click", None, n) for n, item in enumerate(OLD_ITEMS)]
        )
        await settled(redis)
        await asyncio.sleep(0.005)
        boundary_ms = int(time.time() * 1000)
        await serve(rng, [*PHASE_B, "u-old"], decisions, intake, rounds=4)
        await settled(redis)
        await asyncio.sleep(0.005)
        mid_ms = int(time.time() * 1000)
        await serve(rng, RETURNING + NEW_IN_C, decisions, intake, rounds=3)
        await settled(redis)
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    old = keys.events_stream(keys.partition_of("u-old", PARTITIONS))
    assert await redis.xtrim(old, minid=f"{boundary_ms}-0", approximate=False) == 3
    return Story(boundary_ms, mid_ms)


def arguments(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    recompute_command.add_arguments(parser)
    return parser.parse_args(["--json", "--settle", "0", *argv])


async def test_the_models_rebuilt_from_the_log_match_the_live_ones(
    settings: Settings, redis: Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    await tell(settings, redis)
    capsys.readouterr()
    assert await recompute_command.run(settings, redis, arguments()) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    users = PHASE_B + NEW_IN_C
    assert report["recomputed"]["since_ms"] == 0
    assert report["recomputed"]["events"] > 0
    assert report["recomputed"]["decisions"] == 4 * 11 + 3 * 8
    # u-old's first clicks were trimmed: set apart, and the log is not complete.
    assert report["apart"] == {
        "started_before": 0,
        "trimmed": 1,
        "in_flight": 0,
        "no_live_record": 0,
    }
    assert report["recomputed"]["posteriors_from_start"] is False
    # Everybody else matches: the same observations in the same batches, on clocks a
    # batch's wait apart (the live worker's is when it applied them).
    assert report["compared"] == len(users)
    assert report["matched"] == len(users)
    assert report["max_distance"] <= 1e-3
    assert report["windows_equal"] == len(users)
    assert report["live_writes"] == report["recomputed_writes"]
    assert report["users"] == len(users) + 1


async def test_a_replay_from_a_later_moment_sets_earlier_histories_apart(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    story = await tell(settings, redis)
    config = recompute_config(settings, settle_s=0.0, tolerance=0.02)
    with RedisServer(tmp_path / "scratch", persistent=False) as server:
        scratch = connect(server.url)
        try:
            summary, users = await recompute(
                redis, scratch, config, since_ms=story.mid_ms, clock=time.time
            )
            # The scratch keyspace holds the recomputed records; a second recompute into it is
            # refused rather than mixed with them.
            with pytest.raises(RecomputeError):
                await recompute(redis, scratch, config, since_ms=story.mid_ms, clock=time.time)
        finally:
            await scratch.aclose()
    kinds = {u.user_id: u.kind for u in users}
    assert {u for u, k in kinds.items() if k == Kind.STARTED_BEFORE} == set(RETURNING)
    assert {u for u, k in kinds.items() if k == Kind.COMPARED} == set(NEW_IN_C)
    assert summary.compared == len(NEW_IN_C)
    # The item posteriors restart from the prior at --since: said, not hidden.
    assert summary.recomputed.posteriors_from_start is False
    assert summary.recomputed.since_ms == story.mid_ms


async def test_users_the_live_workers_have_not_applied_are_in_flight(
    settings: Settings, redis: Redis, tmp_path: Path
) -> None:
    """Feedback appended but not yet applied by any worker, or appended after the cut
    (applied live by the time the records are read): in flight, whatever else."""
    await add_items(redis)
    await ensure_groups(redis, PARTITIONS)
    intake = FeedbackLog(redis, partitions=PARTITIONS, dedup_ttl_s=3600, clock=time.time)
    worker = StreamWorker(redis, partitions=PARTITIONS, dim=DIM, consumer="w", clock=time.time)
    await intake.append("u-1", [feedback("u-1", "it-1", "click", None, 1)])
    await intake.append("u-2", [feedback("u-2", "it-2", "click", None, 2)])
    while await worker.poll(">"):
        pass
    # u-3's click is read by a worker that dies before applying it: pending.
    await intake.append("u-3", [feedback("u-3", "it-4", "click", None, 4)])
    stream = keys.events_stream(keys.partition_of("u-3", PARTITIONS))
    await redis.xreadgroup(keys.WORKER_GROUP, "dead", {stream: ">"})
    await asyncio.sleep(0.005)
    cut = time.time()
    await asyncio.sleep(0.005)
    await intake.append("u-2", [feedback("u-2", "it-3", "click", None, 3)])  # after the cut
    while await worker.poll(">"):
        pass
    config = recompute_config(settings, settle_s=0.0, tolerance=0.02)
    with RedisServer(tmp_path / "scratch", persistent=False) as server:
        scratch = connect(server.url)
        try:
            _, users = await recompute(redis, scratch, config, since_ms=0, clock=lambda: cut)
        finally:
            await scratch.aclose()
    kinds = {u.user_id: u.kind for u in users}
    # u-2's live window holds a click the recompute stopped short of: in flight, not trimmed.
    # u-3 has no live record yet; in flight is the reason it cannot match.
    assert kinds == {"u-1": Kind.COMPARED, "u-2": Kind.IN_FLIGHT, "u-3": Kind.IN_FLIGHT}


def test_the_command_refuses_a_tolerance_or_settle_it_cannot_use(
    redis_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("PERSO_DATA_DIR", str(tmp_path))
    assert cli.main(["recompute", "--tolerance", "0"]) == 2
    assert "--tolerance must be above 0, got 0.0" in capsys.readouterr().err
    assert cli.main(["recompute", "--settle", "-1"]) == 2
    assert "--settle must be 0 or more" in capsys.readouterr().err
    assert cli.main(["recompute", "--since", "yesterday"]) == 2
    assert "'yesterday' is neither a span like 6h nor epoch milliseconds" in (
        capsys.readouterr().err
    )
    monkeypatch.delenv("REDIS_URL")
    assert cli.main(["recompute"]) == 2
    assert "no Redis: set REDIS_URL" in capsys.readouterr().err
