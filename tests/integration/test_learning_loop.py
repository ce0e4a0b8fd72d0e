"""The learning loop end to end, in process: the real origin app serves answers and logs
them as decisions, feedback names the answer by its request id, and a real stream worker
joins the two over the suite's Redis (``origin.worker.joins``).

The origin and the worker share a fake clock, so a reward window closes when the test says
so (``tick`` past it, then ``close_due``); only the last test runs the worker's own process
loop (``origin.worker.app.run_worker``) on real time, with a reward wait of a fraction of a
second from the settings.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from redis.asyncio import Redis

from config.settings import Settings
from decision_log.writer import BATCH, DecisionLog, Retention, configured_log
from edge.app import create_app as create_edge
from origin.app import create_app
from origin.learned.examination import ExaminationStore
from origin.learned.posteriors import (
    ALL_CONTEXTS,
    RANK_PRIOR_MEAN,
    ItemOutcome,
    PosteriorConfig,
    Posteriors,
    PosteriorStore,
)
from origin.learned.user_models import UserRecord, decode_record, observation_hash
from origin.runtime import Origin
from origin.worker.app import run_worker
from origin.worker.batch import Outcome
from origin.worker.consumer import StreamWorker
from origin.worker.item_updates import ItemUpdates
from origin.worker.join_lessons import closing_id
from origin.worker.joins import CLOSED_TTL_S, JoinConfig
from protocol import keys
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE, PersonalizeResponse
from protocol.decisions import (
    CONTEXT_HEADER,
    DECISION_BY_HEADER,
    DECISION_FIELD,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    Decision,
    Shown,
    decode_entry,
    encode_batch,
    encode_decision,
    parse_propensities,
)
from protocol.pools import POOLS_PATH, Pool, decode_pool_fill
from protocol.rewards import REWARD_FIELD, decode_reward
from protocol.vectors import unpack_vector
from relevance.examination import Tally, at, e_step, estimate, miss_weight
from relevance.population import Population, population_bytes, population_from_bytes
from sync.codec import decode_entry as sync_entry
from sync.messages import ItemPosteriors
from sync.publisher import SyncPublisher
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock

# 2026-01-01 19:00 UTC: a desktop request without a time zone is "desktop_evening".
EVENING = 1_767_294_000.0
CELL = "desktop_evening"
WAIT_S = 30.0
GRACE_S = 2.0
# No decay: every posterior below is an exact count.
POSTERIORS = PosteriorConfig(decay_half_life_s=0)


@dataclass
class Loop:
    """An origin and a stream worker over one Redis, on one fake clock."""

    app: FastAPI
    client: httpx.AsyncClient
    worker: StreamWorker
    redis: Redis
    clock: FakeClock
    settings: Settings

    @property
    def origin(self) -> Origin:
        origin: Origin = self.app.state.origin
        return origin

    async def serve(
        self, user: str, headers: dict[str, str] | None = None, **parts: Any
    ) -> tuple[PersonalizeResponse, httpx.Response]:
        body = {"user_id": user, "context": {"page_type": "home", "device": "desktop"}, **parts}
        response = await self.client.post("/v1/personalize", json=body, headers=headers or {})
        assert response.status_code == 200, response.text
        return PersonalizeResponse.model_validate_json(response.content), response

    async def answer(self, user: str, **parts: Any) -> PersonalizeResponse:
        """An answer the origin serves and logs, its decision written to the stream."""
        answer, _ = await self.serve(user, **parts)
        await written(self.origin.decisions)
        return answer

    async def feedback(
        self,
        user: str,
        item: str,
        action: str,
        ix: str,
        request_id: str | None = None,
        *,
        reward_override: float | None = None,
    ) -> None:
        one: dict[str, Any] = {"item_id": item, "action": action, "interaction_id": ix}
        if reward_override is not None:
            one["reward_override"] = reward_override
        body: dict[str, Any] = {"user_id": user, "feedback": [one]}
        if request_id is not None:
            body["request_id"] = request_id
        response = await self.client.post("/v1/feedback", json=body)
        assert response.status_code == 200, response.text

    async def work(self) -> None:
        """Let the worker read everything there is."""
        while await self.worker.poll(">") > 0:
            pass

    async def close_due(self, after_s: float = WAIT_S) -> int:
        self.clock.tick(after_s)
        return await self.worker.joins.close_due(int(self.clock() * 1000))

    async def posteriors(self, cell: str, items: list[str]) -> Posteriors:
        return await PosteriorStore(self.redis, POSTERIORS).read_cell(cell, items)

    async def values(self, items: list[str]) -> list[tuple[float, float]]:
        """The items' (engagements, sum of their grades)."""
        v = (await PosteriorStore(self.redis, POSTERIORS).read(CELL, items)).values
        return list(zip(v.engagements.tolist(), v.grades.tolist(), strict=True))

    async def record(self, user: str) -> UserRecord:
        raw = await self.redis.get(keys.user_record(user))
        return decode_record(raw, self.settings.embedding_dim)

    async def vector(self, item: str) -> np.ndarray:
        raw = await self.redis.get(keys.item_vector(item))
        assert raw is not None
        return unpack_vector(raw, self.settings.embedding_dim)

    async def redeliver_events(self, user: str) -> None:
        """Every event of ``user``'s partition appended again, as a redelivery looks."""
        await redeliver(self.redis, keys.events_stream(self.partition(user)))

    async def redeliver_decisions(self, user: str) -> None:
        await redeliver(self.redis, keys.decisions_stream(self.partition(user)))

    def partition(self, user: str) -> int:
        return keys.partition_of(user, self.settings.event_partitions)


async def written(log: DecisionLog) -> None:
    """Every decision handed to ``log`` is in Redis: flushed now, or by the log's own
    background flush, which may have a batch in flight."""
    await log.flush()
    for _ in range(500):
        if log.counters.written >= log.counters.logged:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"decisions not written: {log.counters}")


async def redeliver(redis: Redis, stream: str) -> None:
    for _, fields in await redis.xrange(stream):
        await redis.xadd(stream, fields)


def worker_of(redis: Redis, settings: Settings, clock: FakeClock, name: str) -> StreamWorker:
    return StreamWorker(
        redis,
        partitions=settings.event_partitions,
        dim=settings.embedding_dim,
        consumer=name,
        clock=clock,
        block_ms=20,
        posteriors=POSTERIORS,
        joins=JoinConfig(wait_s=WAIT_S, grace_s=GRACE_S),
    )


@pytest.fixture
async def loop(origin_settings: Settings, redis: Redis) -> AsyncIterator[Loop]:
    clock = FakeClock(EVENING)
    settings = origin_settings.model_copy(update={"bandit_decay_half_life_s": 0.0})
    app = create_app(settings, clock=clock, rng=np.random.default_rng(11))
    async with serving(app, "http://origin") as client:
        worker = worker_of(redis, settings, clock, "w-1")
        yield Loop(app, client, worker, redis, clock, settings)


def expected_misses(positions: list[int]) -> np.ndarray:
    """What an ignored item at each position counts as a failure, before any examination
    evidence and for items of no engagement yet (``RANK_PRIOR_MEAN``)."""
    examine = at(estimate(Tally.empty()), np.array(positions, np.int64))
    weights: np.ndarray = miss_weight(examine, np.full(len(positions), RANK_PRIOR_MEAN))
    return weights


def same(a: UserRecord, b: UserRecord) -> bool:
    """The same stored record (models compared by value)."""
    if (a.version, a.updated_ms, a.window) != (b.version, b.updated_ms, b.window):
        return False
    if a.model is None or b.model is None:
        return a.model is b.model
    return bool(
        np.array_equal(a.model.mean, b.model.mean) and np.array_equal(a.model.var, b.model.var)
    )


def cells(p: Posteriors) -> list[tuple[float, float]]:
    return list(zip(p.alpha.tolist(), p.beta.tolist(), strict=True))


# --- the decision log ----------------------------------------------------------------------


async def decisions_of(loop: Loop, user: str) -> list[Decision]:
    stream = keys.decisions_stream(loop.partition(user))
    return [
        d
        for _, fields in await loop.redis.xrange(stream)
        for d in decode_entry(fields[DECISION_FIELD])
    ]


async def test_the_origin_logs_a_decision_for_every_answer_it_serves(loop: Loop) -> None:
    first, response = await loop.serve("u-1")
    second, _ = await loop.serve("u-1", constraints={"count": 5})
    await written(loop.origin.decisions)
    logged = await decisions_of(loop, "u-1")
    assert [d.request_id for d in logged] == [first.request_id, second.request_id]
    decision = logged[0]
    assert decision.user_id == "u-1"
    assert decision.audience == "user"
    assert decision.context == response.headers[CONTEXT_HEADER] == CELL
    assert (decision.page, decision.served_by) == ("home", "origin")
    assert f"{decision.policy}/{decision.policy_version}" == response.headers[POLICY_HEADER]
    assert decision.model_version == first.metadata.model_version
    assert decision.at_ms == int(EVENING * 1000)
    assert [(s.item_id, s.position) for s in decision.shown] == [
        (i.item_id, i.rank) for i in first.items
    ]
    propensities = parse_propensities(response.headers[PROPENSITIES_HEADER], len(first.items))
    assert [s.propensity for s in decision.shown] == pytest.approx(propensities, rel=1e-3)
    assert all(0 < s.propensity <= 1 for s in decision.shown)
    assert len(logged[1].shown) == 5


async def test_an_answer_whose_decision_an_edge_logs_is_not_logged_by_the_origin(
    loop: Loop,
) -> None:
    answer, response = await loop.serve("u-1", headers={DECISION_BY_HEADER: "edge:us-east"})
    await written(loop.origin.decisions)
    assert loop.origin.decisions.counters.logged == 0
    assert await decisions_of(loop, "u-1") == []
    # what the edge needs to log it itself
    assert response.headers[CONTEXT_HEADER] == CELL
    propensities = parse_propensities(response.headers[PROPENSITIES_HEADER], len(answer.items))
    assert len(propensities) == len(answer.items)


async def test_an_answer_served_through_an_edge_is_logged_once_by_the_edge(
    origin_settings: Settings, redis: Redis
) -> None:
    clock = FakeClock(EVENING)
    origin_app = create_app(origin_settings, clock=clock)
    edge_app = create_edge(
        origin_settings,
        region="us-east",
        clock=clock,
        origin_transport=httpx.ASGITransport(app=origin_app),
    )
    body = {"user_id": "u-e", "context": {"page_type": "home", "device": "desktop"}}
    headers = bearer(user_token("u-e", now_s=clock()))
    async with serving(origin_app, "http://origin"), serving(edge_app, "http://edge") as edge:
        answers = []
        for _ in range(2):  # a fill, then a hit
            response = await edge.post("/v1/personalize", json=body, headers=headers)
            assert response.status_code == 200, response.text
            answers.append(PersonalizeResponse.model_validate_json(response.content))
        assert answers[1].metadata.cache_hit
        edge_log = edge_app.fastapi.state.edge.decisions
        assert edge_log is not None
        await written(edge_log)
        await written(origin_app.state.origin.decisions)
    stream = keys.decisions_stream(keys.partition_of("u-e", origin_settings.event_partitions))
    logged = [d for _, f in await redis.xrange(stream) for d in decode_entry(f[DECISION_FIELD])]
    logged = [d for d in logged if d.user_id == "u-e"]
    assert [d.request_id for d in logged] == [a.request_id for a in answers]
    assert {d.served_by for d in logged} == {"edge:us-east"}
    assert [s.item_id for s in logged[1].shown] == [i.item_id for i in answers[1].items]


# --- joins: a served answer and what the user did with it ---------------------------------


async def test_a_click_on_an_answer_teaches_the_users_model_at_once(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    clicked = answer.items[2].item_id
    await loop.work()  # the decision opens its join
    await loop.feedback("u-1", clicked, "click", "ix-1", answer.request_id)
    await loop.work()
    record = await loop.record("u-1")
    assert record.version == 1
    assert record.window == (observation_hash("ix-1"),)
    assert record.model is not None
    assert float(record.model.mean @ await loop.vector(clicked)) > 0


async def test_shown_items_count_their_impressions_as_soon_as_the_decision_comes(
    loop: Loop,
) -> None:
    """No waiting for the reward window: each shown item is at once the failure its
    position's examination weighs, in the decision's cell and in all contexts."""
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    await loop.work()
    weights = expected_misses([i.rank for i in answer.items])
    for cell in (CELL, ALL_CONTEXTS):
        p = await loop.posteriors(cell, items)
        assert p.alpha.tolist() == [1.0] * len(items)
        assert (p.beta - 1).tolist() == pytest.approx(weights.tolist())
    assert not (await loop.posteriors("mobile_evening", items)).observed.any()
    # the weights the impressions counted stay with the join, for the close and late clicks
    join = keys.user_decision("u-1", answer.request_id)
    kept = float(await loop.redis.hget(join, f"w:{items[3]}") or 0)
    assert kept == pytest.approx(float(weights[3]))


async def test_a_click_converts_its_items_impression_at_once_and_the_close_adds_nothing(
    loop: Loop,
) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    clicked = items[2]
    await loop.work()
    await loop.feedback("u-1", clicked, "click", "ix-1", answer.request_id)
    await loop.work()
    # the impression taken back, an engagement counted: in its cell and in all contexts
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [clicked])) == [(2.0, 1.0)]
    before = {cell: cells(await loop.posteriors(cell, items)) for cell in (CELL, ALL_CONTEXTS)}
    assert await loop.close_due(WAIT_S - 1) == 0  # the window is not over yet
    assert await loop.close_due(1) == 1
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, items)) == before[cell]
    assert not (await loop.posteriors("mobile_evening", [clicked])).observed.any()
    # a closed join keeps only its context cell, for a late click
    join = keys.user_decision("u-1", answer.request_id)
    assert await loop.redis.hget(join, "c") == CELL.encode()
    assert await loop.redis.hget(join, "d") is None
    assert 0 < await loop.redis.ttl(join) <= CLOSED_TTL_S
    assert await loop.redis.zcard(keys.decisions_due(loop.partition("u-1"))) == 0
    assert await loop.redis.zcard(keys.user_open_decisions("u-1")) == 0
    assert loop.worker.stats.closed == 1
    # what the answer earned is in the reward log, for offline evaluation
    entries = await loop.redis.xrange(keys.rewards_stream(loop.partition("u-1")))
    [earned] = [decode_reward(fields[REWARD_FIELD.encode()]) for _, fields in entries]
    assert (earned.request_id, earned.user_id) == (answer.request_id, "u-1")
    assert earned.engaged == {clicked: 0.25}
    assert earned.dismissed == ()


async def test_shown_but_ignored_items_count_as_misses_weighted_by_examination(
    loop: Loop,
) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    positions = [i.rank for i in answer.items]
    await loop.work()
    await loop.feedback("u-1", items[0], "click", "ix-1", answer.request_id)
    await loop.work()
    assert await loop.close_due() == 1
    weights = expected_misses(positions)
    assert weights[1] > weights[-1] > 0  # the bottom of the slate was seen less often
    for cell in (CELL, ALL_CONTEXTS):
        p = await loop.posteriors(cell, items[1:])
        assert p.alpha.tolist() == [1.0] * (len(items) - 1)
        assert (p.beta - 1).tolist() == pytest.approx(weights[1:].tolist())
    # the user's model takes the misses as weighted negatives, once: one write, one closing
    record = await loop.record("u-1")
    assert record.version == 2
    assert record.window == (
        observation_hash("ix-1"),
        observation_hash(closing_id(answer.request_id)),
    )
    assert record.interactions_today(int(loop.clock())) == 1  # misses are no interactions
    # the position-bias tally has the decision's expected examinations
    hit = np.array([item == items[0] for item in items])
    # the items' rates at the close: what their impressions and the click made of them
    rates = await PosteriorStore(loop.redis, POSTERIORS).rates(items, loop.clock() * 1000)
    expected = e_step(np.array(positions, np.int64), hit, rates, estimate(Tally.empty()))
    tally = await ExaminationStore(loop.redis, loop.clock).read()
    assert tally.shown.tolist() == expected.shown.tolist()
    assert tally.examined.tolist() == pytest.approx(expected.examined.tolist())


async def test_a_join_closed_twice_logs_its_reward_once(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    await loop.work()
    assert await loop.close_due() == 1
    assert await loop.close_due() == 0
    entries = await loop.redis.xrange(keys.rewards_stream(loop.partition("u-1")))
    assert [decode_reward(f[REWARD_FIELD.encode()]).request_id for _, f in entries] == [
        answer.request_id
    ]


async def test_closed_joins_draw_the_learning_curve_once(loop: Loop) -> None:
    """Two slates close in one batch, one of them clicked: the minute of the close holds
    2 slates and 1 click (the operations page's curve), and closing again adds nothing."""
    clicked = await loop.answer("u-1")
    await loop.answer("u-2")
    await loop.work()
    await loop.feedback("u-1", clicked.items[0].item_id, "click", "ix-1", clicked.request_id)
    await loop.work()
    assert await loop.close_due() == 2
    minute = keys.learning_curve(int(loop.clock() * 1000) // 60_000)
    assert await loop.redis.hgetall(minute) == {b"slates": b"2", b"clicks": b"1"}
    assert 0 < await loop.redis.ttl(minute) <= keys.LEARNING_CURVE_TTL_S
    assert await loop.close_due() == 0
    assert await loop.redis.hgetall(minute) == {b"slates": b"2", b"clicks": b"1"}


async def test_a_dismiss_on_an_answer_is_one_failure_and_one_negative(loop: Loop) -> None:
    answer = await loop.answer("u-1", constraints={"count": 1})
    [item] = [i.item_id for i in answer.items]
    await loop.work()
    await loop.feedback("u-1", item, "dismiss", "ix-no", answer.request_id)
    await loop.work()
    learnt = await loop.record("u-1")  # the dismiss moves the user's model at once
    assert learnt.version == 1
    assert learnt.model is not None
    assert float(learnt.model.mean @ await loop.vector(item)) < 0
    assert await loop.close_due() == 1
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [item])) == [(1.0, 2.0)]
    # the close has nothing more to teach the user: the dismiss was learnt once
    assert same(await loop.record("u-1"), learnt)


async def test_a_click_noted_before_its_decision_came_counts_as_an_engagement_once(
    loop: Loop,
) -> None:
    # the edge logs its decisions in batches: the click may be read first
    answer, response = await loop.serve("u-1", headers={DECISION_BY_HEADER: "edge:later"})
    items = [i.item_id for i in answer.items]
    await loop.feedback("u-1", items[1], "click", "ix-1", answer.request_id)
    await loop.feedback("u-1", items[3], "dismiss", "ix-2", answer.request_id)
    await loop.work()  # the click and the dismiss: their decision has not come
    assert not (await loop.posteriors(CELL, items)).observed.any()
    propensities = parse_propensities(response.headers[PROPENSITIES_HEADER], len(answer.items))
    decision = Decision(
        answer.request_id,
        "u-1",
        "user",
        CELL,
        "home",
        int(loop.clock() * 1000),
        "edge:later",
        "thompson",
        "1",
        answer.metadata.model_version,
        tuple(
            Shown(i.item_id, i.rank, i.score, p)
            for i, p in zip(answer.items, propensities, strict=True)
        ),
    )
    await loop.redis.xadd(
        keys.decisions_stream(loop.partition("u-1")),
        {DECISION_FIELD: encode_batch([encode_decision(decision)])},
    )
    await loop.work()  # the decision: its impressions, the click and dismiss among them
    await loop.redeliver_events("u-1")
    await loop.redeliver_decisions("u-1")
    await loop.work()
    weights = expected_misses([i.rank for i in answer.items])
    for cell in (CELL, ALL_CONTEXTS):
        got = cells(await loop.posteriors(cell, items[:4]))
        assert got[0] == (1.0, pytest.approx(1 + weights[0]))
        assert got[1] == (2.0, 1.0)  # an engagement, never a failure
        assert got[2] == (1.0, pytest.approx(1 + weights[2]))
        assert got[3] == (1.0, 2.0)  # dismissed: a whole failure
    assert await loop.close_due() == 1
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, items[1:2])) == [(2.0, 1.0)]


async def test_a_dismiss_after_its_decision_makes_the_impression_a_whole_failure_once(
    loop: Loop,
) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    await loop.work()
    await loop.feedback("u-1", items[5], "dismiss", "ix-no", answer.request_id)
    await loop.work()
    await loop.redeliver_events("u-1")
    await loop.work()
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [items[5]])) == [(1.0, pytest.approx(2.0))]


async def test_a_click_after_the_join_closed_still_converts_its_impression_once(
    loop: Loop,
) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    late = items[4]
    await loop.work()
    assert await loop.close_due() == 1
    [miss] = expected_misses([5])
    assert cells(await loop.posteriors(CELL, [late])) == [(1.0, pytest.approx(1 + miss))]
    await loop.feedback("u-1", late, "click", "ix-late", answer.request_id)
    await loop.work()
    await loop.redeliver_events("u-1")
    await loop.work()
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [late])) == [(2.0, pytest.approx(1.0))]
    assert loop.worker.outcomes[Outcome.DUPLICATE] == 1  # and the user's model took it once
    assert (await loop.record("u-1")).window[-1] == observation_hash("ix-late")


async def test_a_click_counted_at_the_close_and_redelivered_after_it_counts_once(
    loop: Loop,
) -> None:
    answer = await loop.answer("u-1")
    clicked = answer.items[0].item_id
    await loop.work()
    await loop.feedback("u-1", clicked, "click", "ix-1", answer.request_id)
    await loop.work()
    assert await loop.close_due() == 1
    await loop.redeliver_events("u-1")  # the click again, after its join closed
    await loop.work()
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [clicked])) == [(2.0, 1.0)]


async def test_a_purchase_is_one_engagement_worth_a_purchase(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    await loop.work()
    await loop.feedback("u-1", items[0], "click", "ix-1", answer.request_id)
    await loop.feedback("u-1", items[0], "purchase", "ix-2", answer.request_id)
    await loop.feedback("u-1", items[1], "click", "ix-3", answer.request_id)
    await loop.feedback("u-1", items[1], "click", "ix-4", answer.request_id)
    await loop.work()
    assert await loop.close_due() == 1
    # one engagement each for the engagement rate, whatever the action
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, items[:2])) == [(2.0, 1.0), (2.0, 1.0)]
    # what they were worth: the purchase's grade, a click's
    assert await loop.values(items[:3]) == [(1.0, 1.0), (1.0, 0.25), (0.0, 0.0)]
    await loop.redeliver_events("u-1")
    await loop.redeliver_decisions("u-1")
    await loop.work()
    assert await loop.values(items[:2]) == [(1.0, 1.0), (1.0, 0.25)]


async def test_a_purchase_after_the_close_adds_its_worth_not_an_engagement(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    item = answer.items[0].item_id
    await loop.work()
    await loop.feedback("u-1", item, "click", "ix-1", answer.request_id)
    await loop.work()
    assert await loop.close_due() == 1
    await loop.feedback("u-1", item, "add_to_cart", "ix-2", answer.request_id)
    await loop.feedback("u-1", item, "purchase", "ix-3", answer.request_id)
    await loop.feedback("u-1", item, "click", "ix-4", answer.request_id)  # nothing better
    await loop.work()
    await loop.redeliver_events("u-1")
    await loop.work()
    for cell in (CELL, ALL_CONTEXTS):
        assert cells(await loop.posteriors(cell, [item])) == [(2.0, 1.0)]
    # the click's 0.25, the cart's 0.25 more, the purchase's 0.5 more: the best grade
    assert await loop.values([item]) == [(1.0, pytest.approx(1.0))]


async def test_a_clients_reward_override_is_the_engagements_grade(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    item = answer.items[0].item_id
    await loop.work()
    await loop.feedback("u-1", item, "click", "ix-1", answer.request_id, reward_override=0.8)
    await loop.feedback("u-2", "it-000042", "purchase", "ix-2", reward_override=0.1)
    await loop.work()
    assert await loop.close_due() == 1
    assert await loop.values([item, "it-000042"]) == [
        (1.0, pytest.approx(0.8)),
        (1.0, pytest.approx(0.1)),
    ]


@pytest.mark.parametrize(("value_weight", "first"), [(1.0, "bought"), (0.0, "clicked")])
async def test_the_origin_ranks_by_what_engagements_are_worth(
    origin_settings: Settings, redis: Redis, value_weight: float, first: str
) -> None:
    store = PosteriorStore(redis, POSTERIORS)
    names = {"it-000010": "clicked", "it-000020": "bought"}
    async with redis.pipeline(transaction=False) as pipe:
        # both far above every other item; "clicked" a little more often, by clicks only
        await store.queue_add(
            pipe, [ALL_CONTEXTS], "r-1", [ItemOutcome("it-000010", 60.0, 40.0, 15.0)], 0
        )
        await store.queue_add(
            pipe, [ALL_CONTEXTS], "r-2", [ItemOutcome("it-000020", 55.0, 45.0, 55.0)], 0
        )
        await pipe.execute()
    settings = origin_settings.model_copy(
        update={"bandit_decay_half_life_s": 0.0, "value_weight": value_weight}
    )
    app = create_app(settings, clock=FakeClock(EVENING), rng=np.random.default_rng(5))
    async with serving(app, "http://origin") as client:
        body = {
            "user_id": "u-new",
            "context": {"page_type": "home", "device": "desktop"},
            "options": {"exploration_rate": 0.0},
        }
        response = await client.post("/v1/personalize", json=body)
    assert response.status_code == 200, response.text
    assert names.get(response.json()["items"][0]["item_id"]) == first


async def test_feedback_without_a_request_id_teaches_only_the_all_context_posteriors(
    loop: Loop,
) -> None:
    await loop.feedback("u-2", "it-000042", "purchase", "ix-buy")
    await loop.feedback("u-2", "it-000043", "dismiss", "ix-no")
    await loop.feedback("u-2", "it-000044", "view", "ix-look")
    await loop.work()
    items = ["it-000042", "it-000043", "it-000044"]
    everywhere = await loop.posteriors(ALL_CONTEXTS, items)
    assert cells(everywhere)[:2] == [(2.0, 1.0), (1.0, 2.0)]
    assert everywhere.observed.tolist() == [True, True, False]  # a view teaches nothing
    assert not (await loop.posteriors(CELL, items)).observed.any()
    assert await loop.close_due() == 0  # no join was opened
    await loop.redeliver_events("u-2")
    await loop.work()
    assert cells(await loop.posteriors(ALL_CONTEXTS, items[:2])) == [(2.0, 1.0), (1.0, 2.0)]
    record = await loop.record("u-2")
    assert record.version == 1  # the purchase and the dismiss, one batch, one write
    assert sorted(record.window) == sorted(observation_hash(ix) for ix in ("ix-buy", "ix-no"))


async def test_a_redelivered_decision_and_click_are_counted_once(loop: Loop) -> None:
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    await loop.feedback("u-1", items[1], "click", "ix-1", answer.request_id)
    await loop.redeliver_decisions("u-1")
    await loop.redeliver_events("u-1")
    await loop.work()
    assert loop.worker.stats.decisions == 2
    assert loop.worker.outcomes[Outcome.DUPLICATE] == 1
    assert await loop.close_due() == 1
    [first_miss] = expected_misses([1])
    for cell in (CELL, ALL_CONTEXTS):
        p = await loop.posteriors(cell, items[:2])
        assert cells(p) == [(1.0, pytest.approx(1 + first_miss)), (2.0, 1.0)]
    closed = await loop.record("u-1")
    assert closed.version == 2
    # the decision delivered again after its close does not open the join again
    await loop.redeliver_decisions("u-1")
    await loop.work()
    assert await loop.redis.zcard(keys.decisions_due(loop.partition("u-1"))) == 0
    assert await loop.close_due() == 0
    p = await loop.posteriors(CELL, items[:2])
    assert cells(p) == [(1.0, pytest.approx(1 + first_miss)), (2.0, 1.0)]
    assert same(await loop.record("u-1"), closed)
    tally = await ExaminationStore(loop.redis, loop.clock).read()
    assert tally.shown[: len(items)].tolist() == [1.0] * len(items)


async def test_a_click_whose_decision_never_came_still_teaches_the_item(loop: Loop) -> None:
    # The decision log is best effort: a lost decision costs the non-engagements of one
    # answer, never the engagements.
    answer, _ = await loop.serve("u-1", headers={DECISION_BY_HEADER: "edge:lost"})
    clicked = answer.items[0].item_id
    await loop.feedback("u-1", clicked, "click", "ix-1", answer.request_id)
    await loop.work()
    assert (await loop.record("u-1")).version == 1
    assert await loop.close_due() == 1
    assert cells(await loop.posteriors(ALL_CONTEXTS, [clicked])) == [(2.0, 1.0)]
    assert not (await loop.posteriors(CELL, [clicked])).observed.any()  # no cell is known


async def test_the_users_next_answer_closes_the_previous_join_after_the_grace(
    loop: Loop,
) -> None:
    first = await loop.answer("u-1")
    await loop.work()
    loop.clock.tick(5)
    second = await loop.answer("u-1")
    await loop.work()
    assert await loop.close_due(GRACE_S - 0.5) == 0
    assert await loop.close_due(0.5) == 1  # they moved on: the first closes
    open_now = await loop.redis.zrange(keys.user_open_decisions("u-1"), 0, -1)
    assert open_now == [second.request_id.encode()]
    assert (
        await loop.redis.hget(keys.user_decision("u-1", first.request_id), "c")
        == b"desktop_evening"
    )
    assert await loop.close_due(WAIT_S) == 1


async def test_a_join_closed_twice_is_learnt_from_once(loop: Loop) -> None:
    """A worker that closes a join another one closed already (both read it as due) adds
    nothing, and leaves the join's context cell for a late click."""
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    await loop.work()
    loop.clock.tick(WAIT_S)
    now_ms = int(loop.clock() * 1000)
    await loop.worker.joins.close([("u-1", answer.request_id)], now_ms)
    after_first = await loop.record("u-1")
    await loop.worker.joins.close([("u-1", answer.request_id)], now_ms)
    assert same(await loop.record("u-1"), after_first)
    tally = await ExaminationStore(loop.redis, loop.clock).read()
    assert tally.shown[: len(items)].tolist() == [1.0] * len(items)
    await loop.feedback("u-1", items[3], "click", "ix-late", answer.request_id)
    await loop.work()
    assert cells(await loop.posteriors(CELL, [items[3]]))[0][0] == 2.0


async def test_two_workers_closing_at_once_count_a_decision_once(
    loop: Loop, origin_settings: Settings
) -> None:
    other = worker_of(loop.redis, origin_settings, loop.clock, "w-2")
    answers = [await loop.answer(f"u-{n}") for n in range(6)]
    await loop.work()
    loop.clock.tick(WAIT_S)
    now_ms = int(loop.clock() * 1000)
    closed = await asyncio.gather(
        loop.worker.joins.close_due(now_ms), other.joins.close_due(now_ms)
    )
    assert sum(closed) == len(answers)
    tally = await ExaminationStore(loop.redis, loop.clock).read()
    assert tally.shown[0] == len(answers)  # each decision's first position, once
    for n in range(6):
        assert (await loop.record(f"u-{n}")).version == 1


# --- the worker process, on real time --------------------------------------------------------


async def until(condition: Callable[[], Any], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_the_worker_process_closes_joins_after_the_configured_reward_wait(
    origin_settings: Settings, redis: Redis
) -> None:
    settings = origin_settings.model_copy(
        update={
            "reward_wait_s": 0.3,
            "bandit_decay_half_life_s": 0.0,
            "freshness_active_s": 0.0,
            "freshness_casual_s": 0.0,
            "worker_claim_idle_ms": 1000,
        }
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(settings, "w-real", stop))
    try:
        async with serving(create_app(settings), "http://origin") as client:
            body = {"user_id": "u-r", "context": {"page_type": "home", "device": "desktop"}}
            response = await client.post("/v1/personalize", json=body)
            answer = PersonalizeResponse.model_validate_json(response.content)
            cell = response.headers[CONTEXT_HEADER]
            clicked = answer.items[0].item_id
            feedback = {
                "user_id": "u-r",
                "request_id": answer.request_id,
                "feedback": [{"item_id": clicked, "action": "click"}],
            }
            assert (await client.post("/v1/feedback", json=feedback)).status_code == 200
            store = PosteriorStore(redis, POSTERIORS)

            async def learnt() -> bool:
                p = await store.read_cell(cell, [clicked])
                return bool(p.observed[0])

            await until(learnt)
            assert cells(await store.read_cell(ALL_CONTEXTS, [clicked])) == [(2.0, 1.0)]
            record = decode_record(await redis.get(keys.user_record("u-r")), settings.embedding_dim)
            assert record.model is not None
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


# --- the decision log's retention -------------------------------------------------------------


def decision(n: int, user: str = "u-1") -> Decision:
    return Decision(f"r-{n}", user, "user", CELL, "home", n, "origin", "thompson", "1", "m", ())


async def test_a_log_beside_the_decisions_keeps_its_retention_where_appended(
    redis: Redis,
) -> None:
    """The context and shadow logs, which no consumer group reads, are trimmed as they are
    appended to (the decision log is left to the workers' trimmer: below)."""
    stream = keys.contexts_stream(keys.partition_of("u-1", 1))
    by_length = DecisionLog(
        redis,
        partitions=1,
        clock=time.time,
        retention=Retention(entries=100),
        stream=keys.contexts_stream,
    )
    for n in range(1000):
        by_length.log(functools.partial(decision, n))
        await by_length.flush()  # one entry per flush and partition
    assert by_length.counters.written == 1000
    kept = await redis.xlen(stream)
    assert 100 <= kept < 1000  # trimmed by whole nodes ("~"), never below the retention
    assert await newest(redis, stream) == "r-999"
    # An hour later, with a retention of an hour: what was written before goes (by whole
    # nodes), what is written now stays. Entry ids are Redis's time, in milliseconds.
    await asyncio.sleep(0.002)
    written_by = time.time()
    await asyncio.sleep(0.002)
    later = DecisionLog(
        redis,
        partitions=1,
        clock=lambda: written_by + 3600,
        retention=Retention(seconds=3600),
        stream=keys.contexts_stream,
    )
    later.log(functools.partial(decision, 1000))
    await later.flush()
    assert 0 < await redis.xlen(stream) < kept
    assert await newest(redis, stream) == "r-1000"


async def test_the_decision_log_is_not_trimmed_where_appended(
    redis: Redis, make_settings: Callable[..., Settings]
) -> None:
    """The workers' consumer group reads the decision log: trimmed on the append path, a
    backlog the workers have not read would go (origin.worker.retention keeps it)."""
    settings = make_settings(event_partitions=1, decision_retention_entries=1000)
    log = configured_log(settings, redis, time.time)
    for n in range(3000):
        log.log(functools.partial(decision, n))
        await log.flush()
    assert await redis.xlen(keys.decisions_stream(0)) == 3000
    contexts = configured_log(settings, redis, time.time, keys.contexts_stream)
    for n in range(3000):
        contexts.log(functools.partial(decision, n))
        await contexts.flush()
    assert await redis.xlen(keys.contexts_stream(0)) < 3000


async def test_flushes_run_one_at_a_time_so_the_log_keeps_the_order_of_answers(
    redis: Redis,
) -> None:
    """A caller's flush while the background flush has a batch in flight waits for it:
    two pipelines in flight at once could land the later answer first."""
    log = DecisionLog(redis, partitions=1, clock=time.time)
    earlier = 3 * BATCH  # three batches, written one after another
    for n in range(earlier):
        log.log(functools.partial(decision, n))
    in_flight = asyncio.create_task(log.flush())
    await asyncio.sleep(0)  # the first batch is on its way to Redis
    log.log(functools.partial(decision, earlier))
    await log.flush()
    assert in_flight.done()
    logged = [
        d.request_id
        for _, f in await redis.xrange(keys.decisions_stream(0))
        for d in decode_entry(f[DECISION_FIELD])
    ]
    assert logged == [f"r-{n}" for n in range(earlier + 1)]


async def newest(redis: Redis, stream: str) -> str:
    [(_, fields)] = await redis.xrevrange(stream, count=1)
    return decode_entry(fields[DECISION_FIELD])[-1].request_id


async def test_the_worker_streams_the_items_it_changed_to_every_regions_edges(
    loop: Loop, origin_settings: Settings
) -> None:
    regions = ("eu-west", "us-east")
    store = PosteriorStore(loop.redis, POSTERIORS)
    updates = ItemUpdates(SyncPublisher(loop.redis, regions, loop.clock), store)
    worker = StreamWorker(
        loop.redis,
        partitions=origin_settings.event_partitions,
        dim=origin_settings.embedding_dim,
        consumer="w-streams",
        clock=loop.clock,
        block_ms=20,
        posteriors=POSTERIORS,
        joins=JoinConfig(wait_s=WAIT_S, grace_s=GRACE_S),
        on_items=updates.publish,
    )
    answer = await loop.answer("u-1")
    items = [i.item_id for i in answer.items]
    while await worker.poll(">") > 0:
        pass
    for region in regions:
        sent = [
            sync_entry(fields)[0].message
            for _, fields in await loop.redis.xrange(keys.edge_sync_stream(region))
        ]
        by_cell = {m.cell: m for m in sent if isinstance(m, ItemPosteriors)}
        assert set(by_cell) == {CELL, ALL_CONTEXTS}
        for cell, message in by_cell.items():
            assert sorted(message.item_ids) == sorted(items)
            held = await loop.posteriors(cell, list(message.item_ids))
            rows = message.rows_of()
            assert [r[:2] for r in rows] == cells(held)  # what Redis holds now
    assert updates.published == 2 * len(items)


async def segment_pool(loop: Loop, user_id: str) -> Pool:
    """The pool the origin fills for ``user_id``'s segment (home, desktop)."""
    response = await loop.client.post(
        POOLS_PATH,
        json={"user_id": user_id, "context": {"page_type": "home", "device": "desktop"}},
        headers={FILL_SCOPE_HEADER: SEGMENT_SCOPE},
    )
    assert response.status_code == 200, response.text
    _, pool = decode_pool_fill(response.content)
    return pool


async def test_the_origin_ranks_a_known_user_under_the_users_population_prior(
    loop: Loop,
) -> None:
    """What users are like moves a user with little evidence: a population whose mean
    taste points at one item brings it into the user's answer (retrieval looks near the
    model as it ranks, and the ranking draws from it), and a pool fill carries the prior
    to the edges."""
    first = await loop.answer("u-pop")
    await loop.work()
    await loop.feedback("u-pop", first.items[0].item_id, "click", "ix-1", first.request_id)
    await loop.work()  # the user is known: a record with one click's evidence
    # an item of the clicked one's category (whose unseen items the click made likelier
    # for everybody: the category's cold prior), never shown to the user
    clicked = first.items[0]
    shown = {i.item_id for i in first.items}
    index = loop.origin.index
    target = next(
        i.item_id
        for i in index.items
        if i.category_name == clicked.metadata.category and i.item_id not in shown
    )
    direction = await loop.vector(target)
    dim = loop.settings.embedding_dim
    learnt_var = loop.settings.user_prior_scale / dim
    # users alike (a tight spread), all of them keen on the target
    population = Population(3, (2.0 * direction).astype(np.float32), 0.05 * learnt_var, 500)
    await loop.redis.set(keys.POPULATION_PRIOR, population_bytes(population))
    loop.clock.tick(3)  # past the origin's cache of the prior
    answer = await loop.answer("u-pop", options={"exploration_rate": 0})
    assert target in [i.item_id for i in answer.items]
    # a pool fill ranks no user, but carries the prior the origin ranked under
    pool = await segment_pool(loop, "u-pop")
    assert pool.population is not None
    assert population_from_bytes(pool.population).version == 3


async def test_the_origin_draws_a_user_of_whom_nothing_is_known_from_what_users_are_like(
    loop: Loop,
) -> None:
    """A user with no record is ranked under the users' population prior itself (as the
    edge ranks one: ``edge.serve.pool_answer.newcomer``): where users are keen on one
    item's direction, that item comes first for a newcomer, found by retrieval near the
    prior's mean."""
    index = loop.origin.index
    target = index.items[len(index.items) // 2].item_id
    direction = await loop.vector(target)
    dim = loop.settings.embedding_dim
    learnt_var = loop.settings.user_prior_scale / dim
    population = Population(5, (6.0 * direction).astype(np.float32), 0.05 * learnt_var, 500)
    await loop.redis.set(keys.POPULATION_PRIOR, population_bytes(population))
    answer = await loop.answer("u-newcomer", options={"exploration_rate": 0})
    assert answer.items[0].item_id == target


async def test_the_origin_ranks_a_known_user_along_the_directions_tastes_co_vary_in(
    loop: Loop,
) -> None:
    """A population prior of rank 1 (``PERSO_POPULATION_RANK``): users spread little in
    every direction but much along one, an item's. A user's one click on an item of its
    category moves them along that direction (``relevance.population.for_ranking``), so the
    item comes first; a pool fill carries the prior, rank and all."""
    first = await loop.answer("u-rank")
    await loop.work()
    clicked = first.items[0]
    await loop.feedback("u-rank", clicked.item_id, "click", "ix-1", first.request_id)
    await loop.work()
    index = loop.origin.index
    target = next(
        i.item_id
        for i in index.items
        if i.category_name == clicked.metadata.category
        and i.item_id not in {s.item_id for s in first.items}
    )
    direction = await loop.vector(target)
    if float(direction @ await loop.vector(clicked.item_id)) < 0:
        direction = -direction  # the click says yes to the direction's near side
    dim = loop.settings.embedding_dim
    learnt_var = loop.settings.user_prior_scale / dim
    population = Population(
        4,
        np.zeros(dim, np.float32),
        0.05 * learnt_var,
        500,
        basis=direction.astype(np.float32).reshape(dim, 1),
        spread=np.array([4.0 * learnt_var], np.float32),
    )
    await loop.redis.set(keys.POPULATION_PRIOR, population_bytes(population))
    loop.clock.tick(3)  # past the origin's cache of the prior
    answer = await loop.answer("u-rank", options={"exploration_rate": 0})
    assert target in [i.item_id for i in answer.items[:3]]
    pool = await segment_pool(loop, "u-rank")
    assert pool.population is not None
    carried = population_from_bytes(pool.population)
    assert carried.rank == 1
    assert carried.basis is not None
    np.testing.assert_array_equal(carried.basis[:, 0], population.basis[:, 0])  # type: ignore[index]
