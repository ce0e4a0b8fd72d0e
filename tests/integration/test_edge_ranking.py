"""Power and active users ranked at the edge (issue 18): their segment's pool from the
origin's pool fill, their own state from the origin once, then no origin call on their
requests' path. The real origin and edge apps in process, the suite's Redis between them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from edge.app import create_app as create_edge
from edge.cache.key import pool_cache_key, variant
from edge.http.asgi import EdgeFront
from edge.node import Edge
from origin.app import create_app as create_origin
from origin.learned.user_models import UserRecord, encode_record
from protocol import keys
from protocol.api import PersonalizeRequest, PersonalizeResponse
from protocol.audience import Shared
from protocol.segments import Segment
from relevance.population import Population, for_ranking, population_bytes
from relevance.slate import PRESELECT
from relevance.user_model import UserModel, model_bytes
from sync.messages import InvalidateUser, UserUpdate
from sync.publisher import SyncPublisher
from tests.apps import serving
from tests.credentials import bearer, user_token
from tests.fakes import FakeClock
from tests.integration.test_edge_api import Switchable, applied, body, subscribed


class Stack:
    def __init__(
        self, client: httpx.AsyncClient, network: Switchable, clock: FakeClock, app: EdgeFront
    ) -> None:
        self.client, self.network, self.clock, self.app = client, network, clock, app
        self.origin_app: Any = None

    def category_slug(self, item_id: str) -> str:
        """The catalog's category (its slug) of ``item_id``, as preferences name it."""
        index = self.origin_app.state.origin.index
        slug: str = index.items[index.row_of[item_id]].category
        return slug

    @property
    def node(self) -> Edge:
        node: Edge = self.app.fastapi.state.edge
        return node

    async def ask(
        self, user_id: str, segment: Segment = Segment.POWER, **parts: Any
    ) -> tuple[PersonalizeResponse, httpx.Response]:
        headers = bearer(user_token(user_id, now_s=self.clock(), segment=segment))
        response = await self.client.post(
            "/v1/personalize", json=body(user_id, **parts), headers=headers
        )
        assert response.status_code == 200, response.text
        return PersonalizeResponse.model_validate_json(response.content), response


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Stack]:
    """An origin and an edge ranking at the edge, as ``settings`` configure both."""
    clock = FakeClock()
    settings = settings.model_copy(update={"edge_ranking": True})
    origin_app = create_origin(settings, rng=np.random.default_rng(7))
    network = Switchable(origin_app)
    edge_app = create_edge(settings, region="us-east", clock=clock, origin_transport=network)
    async with serving(origin_app, "http://origin"), serving(edge_app, "http://edge") as client:
        await subscribed(edge_app)
        stack = Stack(client, network, clock, edge_app)
        stack.origin_app = origin_app
        yield stack


@pytest.fixture
async def stack(origin_settings: Settings) -> AsyncIterator[Stack]:
    """Without the users' own candidates: these tests pin the pool's and the banks' workings
    call by call, and own candidates add calls in the background and void banks as their
    rows arrive (``tests/integration/test_edge_own_candidates.py`` tests them)."""
    async with running(origin_settings.model_copy(update={"edge_own_candidates": 0})) as stack:
        yield stack


async def set_model(redis: Redis, user_id: str, mean: np.ndarray, version: int = 1) -> UserModel:
    model = UserModel(mean.astype(np.float32), np.full(mean.shape, 1e-3, np.float32))
    record = UserRecord(version=version, model=model)
    await redis.set(keys.user_record(user_id), encode_record(record, mean.shape[0]))
    return model


async def test_a_power_user_is_ranked_at_the_edge_after_one_pool_and_one_state(
    stack: Stack,
) -> None:
    started = stack.network.calls  # the popular list, fetched at start-up
    first, response = await stack.ask("ann")
    assert (first.metadata.tier, first.metadata.ranked_by) == ("edge", "edge")
    assert response.headers["x-cache"] == "MISS"
    assert stack.network.calls == started + 2  # the user's state, the segment's pool
    assert len(first.items) == 20
    assert [i.rank for i in first.items] == list(range(1, 21))
    again, response = await stack.ask("ann")
    assert (again.metadata.tier, again.metadata.cache_hit) == ("edge", True)
    assert again.metadata.ranked_by == "edge"
    assert response.headers["x-cache"] == "HIT"
    assert stack.network.calls == started + 2  # nothing more asked of the origin
    # another power user of the segment: their state once, the pool is the segment's
    await stack.ask("bob")
    assert stack.network.calls == started + 3
    assert stack.node.counters.ranked_here == 3
    assert stack.node.counters.pool_fills == 1
    assert stack.node.counters.user_fetches == 2


async def test_two_users_pool_but_each_gets_their_own_ranking(
    stack: Stack, origin_settings: Settings, redis: Redis
) -> None:
    dim = origin_settings.embedding_dim
    rng = np.random.default_rng(3)
    await set_model(redis, "ann", 6 * rng.normal(size=dim) / np.sqrt(dim))
    await set_model(redis, "bob", 6 * rng.normal(size=dim) / np.sqrt(dim))
    options = {"options": {"exploration_rate": 0.0}}
    ann, _ = await stack.ask("ann", **options)
    bob, _ = await stack.ask("bob", **options)
    assert stack.node.counters.pool_fills == 1  # one pool for both
    assert [i.item_id for i in ann.items] != [i.item_id for i in bob.items]
    # the same again for each: ranked from their own model, not the other's
    assert [i.item_id for i in (await stack.ask("ann", **options))[0].items] == [
        i.item_id for i in ann.items
    ]


async def test_a_hidden_category_never_shows_and_a_preference_change_is_asked_again(
    stack: Stack,
) -> None:
    shown, _ = await stack.ask("ann")
    category = shown.items[0].metadata.category
    slug = stack.category_slug(shown.items[0].item_id)
    # the stack's own origin: a second origin app could not open its vector store
    async with httpx.AsyncClient(transport=stack.network, base_url="http://origin") as origin:
        said = await origin.post(
            "/v1/preferences",
            json={"user_id": "ann", "category": slug, "direction": "negative", "strength": 1},
        )
    assert said.status_code == 200, said.text
    await applied(stack.app, 1)  # the InvalidateUser of the preference change
    assert stack.node.user_models is not None
    assert stack.node.user_models.ready("ann") is None  # asked again before ranked here
    for _ in range(3):
        answer, _ = await stack.ask("ann")
        assert answer.metadata.tier == "edge"
        assert category not in {i.metadata.category for i in answer.items}


async def test_the_sync_stream_keeps_an_edge_ranked_users_model_fresh(
    stack: Stack, origin_settings: Settings, redis: Redis
) -> None:
    dim = origin_settings.embedding_dim
    await stack.ask("ann")
    calls = stack.network.calls
    publisher = SyncPublisher(redis, origin_settings.regions, stack.clock)
    target = np.zeros(dim, np.float32)
    target[0] = 8.0
    model = UserModel(target, np.full(dim, 1e-3, np.float32))
    await publisher.publish([UserUpdate("ann", 5, model=model_bytes(model))])
    await applied(stack.app, 1)
    held = stack.node.user_models.ready("ann") if stack.node.user_models else None
    assert held is not None
    assert held.version == 5
    await stack.ask("ann")
    assert stack.network.calls == calls  # the new model came with the stream
    # ranked from it: the bank drawn from the old model is void, not served
    banks = stack.node.run_banks
    assert banks is not None
    assert (banks.counters.void, banks.counters.drawn) == (1, 2)
    assert stack.node.counters.ranked_from_bank == 0
    await publisher.publish([InvalidateUser("ann", reason="purchase")])
    await applied(stack.app, 2)
    assert stack.node.user_models is not None
    assert stack.node.user_models.ready("ann") is not None  # only a preference drops it


@pytest.mark.parametrize(
    "parts",
    [
        {"options": {"include_explanation": True}},
        {"constraints": {"count": 100, "exclude_items": ["x"]}},
    ],
    ids=["explanations", "too-large-to-share"],
)
async def test_what_the_edge_cannot_rank_the_origin_does(
    stack: Stack, parts: dict[str, Any]
) -> None:
    answer, _ = await stack.ask("ann", **parts)
    assert (answer.metadata.tier, answer.metadata.ranked_by) == ("origin", "origin")
    assert stack.node.counters.ranked_here == 0


async def test_new_users_are_served_the_segments_own_draws_in_turn(stack: Stack) -> None:
    """Users of whom nothing is known get the segment's ranking, drawn from its pool at the
    edge: one bank of runs, a run each, so that consecutive new users see different
    draws (each exploring), and no state is fetched for them."""
    fetches = stack.node.counters.user_fetches
    slates = []
    for n in range(6):
        answer, _ = await stack.ask(f"new-{n}", segment=Segment.NEW)
        assert (answer.metadata.tier, answer.metadata.ranked_by) == ("edge", "edge")
        slates.append(tuple(i.item_id for i in answer.items))
    assert len(set(slates)) > 1
    assert stack.node.counters.user_fetches == fetches
    banks = stack.node.segment_banks
    assert banks is not None
    assert (banks.counters.drawn, banks.counters.served) == (1, 5)


async def test_a_casual_user_is_ranked_by_their_own_model_from_their_first_signal(
    stack: Stack,
) -> None:
    # one interaction is enough: the user is known, and ranked here like any known user
    answer, _ = await stack.ask("cas", segment=Segment.CASUAL)
    assert (answer.metadata.tier, answer.metadata.ranked_by) == ("edge", "edge")
    assert stack.node.counters.ranked_here == 1


async def test_with_the_origin_down_a_known_user_is_still_ranked_at_the_edge(
    stack: Stack,
) -> None:
    await stack.ask("ann")
    stack.network.down = True
    answer, _ = await stack.ask("ann")
    assert (answer.metadata.tier, answer.metadata.degraded) == ("edge", False)
    assert answer.metadata.ranked_by == "edge"


async def test_a_second_power_user_never_gets_a_ranking_derived_from_the_first(
    stack: Stack, origin_settings: Settings, redis: Redis
) -> None:
    """The leak issue 16 closed (two power users with the same last items shared one
    personal entry), in pool form: an edge that knows neither user, both with the same
    recent items; the second is ranked from the shared pool and their own model, and the
    edge stores nothing but the segment's pool."""
    dim = origin_settings.embedding_dim
    rng = np.random.default_rng(11)
    direction = rng.normal(size=dim) / np.sqrt(dim)
    await set_model(redis, "ann", 8 * direction)
    await set_model(redis, "bob", -8 * direction)
    shown, _ = await stack.ask("ann", segment=Segment.CASUAL)  # a casual user's first visit
    same_items = [{"item_id": item.item_id, "action": "click"} for item in shown.items[:5]]
    for user in ("ann", "bob"):
        token = bearer(user_token(user, now_s=stack.clock(), segment=Segment.POWER))
        clicked = await stack.client.post(
            "/v1/feedback", json={"user_id": user, "feedback": same_items}, headers=token
        )
        assert clicked.status_code == 200, clicked.text
    assert (
        stack.node.views.snapshot("ann").recent_items
        == stack.node.views.snapshot("bob").recent_items
    )
    options = {"options": {"exploration_rate": 0.0}}
    ann, _ = await stack.ask("ann", **options)
    bob, _ = await stack.ask("bob", **options)
    assert (ann.metadata.tier, bob.metadata.tier) == ("edge", "edge")
    assert [i.item_id for i in bob.items] != [i.item_id for i in ann.items]
    assert all(item.explanation is None for item in [*ann.items, *bob.items])
    # what the edge keeps: the casual answer and the segment's pool, both shared (power:
    # the tokens say more than the five clicks the edge saw)
    segment = Segment.POWER.value
    pool = pool_cache_key(
        segment=segment,
        device="mobile",
        variant_parts=variant(PersonalizeRequest(**body("x", **options))),
    )
    held = await stack.node.store.get(pool)
    assert held is not None
    assert held.pool is not None
    assert held.audience == Shared(segment)
    assert await stack.node.store.size() == 2
    # bob's ranking is his model's over the pool, whatever ann was shown
    again, _ = await stack.ask("bob", **options)
    assert [i.item_id for i in again.items] == [i.item_id for i in bob.items]


async def test_the_edge_ranks_by_the_rules_the_origin_ranks_by(origin_settings: Settings) -> None:
    """The ranking's configured rules reach the edge's ranking as they reach the origin's
    (``build_edge``, ``origin.policies.live.ranking_rules``), not the code's defaults."""
    configured = origin_settings.model_copy(
        update={
            "exploration_weight": 0.2,
            "diversity_weight": 0.4,
            "value_weight": 0.5,
            "propensity_draws": 7,
        }
    )
    async with running(configured) as stack:
        rules = stack.origin_app.state.origin.ranking
        node = stack.node
        at_edge = (
            node.exploration_weight,
            node.diversity_weight,
            node.value_weight,
            node.preselect,
            node.propensity_draws,
        )
        at_origin = (
            rules.exploration_weight,
            rules.diversity_weight,
            rules.value_weight,
            rules.preselect,
            rules.propensity_draws,
        )
        assert at_edge == at_origin == (0.2, 0.4, 0.5, PRESELECT, 7)
        # the user's bank holds 1 + 7 runs: the first request and 7 more, then drawn anew
        for _ in range(9):
            answer, _ = await stack.ask("ann")
            assert answer.metadata.tier == "edge"
        banks = node.run_banks
        assert banks is not None
        assert (banks.counters.drawn, banks.counters.served, banks.counters.used_up) == (2, 7, 1)


async def test_a_users_next_requests_are_served_the_runs_of_their_bank(stack: Stack) -> None:
    first, _ = await stack.ask("ann")
    banks = stack.node.run_banks
    assert banks is not None
    assert len(banks) == 1
    later = [(await stack.ask("ann"))[0] for _ in range(3)]
    assert all(a.metadata.tier == "edge" for a in later)
    assert stack.node.counters.ranked_from_bank == 3
    # another user draws their own bank
    await stack.ask("bob")
    assert (len(banks), stack.node.counters.ranked_from_bank) == (2, 3)
    metrics = (await stack.client.get("/metrics")).text
    assert 'perso_edge_ranked_from_bank_total{region="us-east"} 3.0' in metrics
    assert 'perso_edge_run_banks{region="us-east"} 2.0' in metrics
    # each bank's item draws made for it or shared with an earlier bank over the pool
    draws = stack.node.item_draws
    assert draws is not None
    assert draws.counters.drawn + draws.counters.shared == banks.counters.drawn == 2
    assert 'perso_edge_bank_item_draws_total{draws="shared",region="us-east"}' in metrics
    # a request with exclusions is drawn for itself, and banks nothing
    shown = first.items[0].item_id
    excluding, _ = await stack.ask("ann", constraints={"count": 20, "exclude_items": [shown]})
    assert excluding.metadata.tier == "edge"
    assert shown not in {i.item_id for i in excluding.items}
    assert (banks.counters.drawn, stack.node.counters.ranked_from_bank) == (2, 3)
    # another count is another policy: ann's bank is void and drawn anew
    fewer, _ = await stack.ask("ann", constraints={"count": 5})
    assert len(fewer.items) == 5
    assert (banks.counters.void, banks.counters.drawn) == (1, 3)


def co_varying(dim: int, learnt_var: float, target: np.ndarray, rank: int) -> Population:
    """Users who spread little in every direction but, at rank 1, much along ``target``."""
    if not rank:
        return Population(1, np.zeros(dim, np.float32), learnt_var, 500)
    return Population(
        1,
        np.zeros(dim, np.float32),
        0.005 * learnt_var,
        500,
        basis=target.astype(np.float32).reshape(dim, 1),
        spread=np.array([8 * learnt_var], np.float32),
    )


def sure_of(vector: np.ndarray, learnt_var: float) -> UserModel:
    """Sure evidence (a twentieth of the prior's variance left) that the user likes
    ``vector``'s item by 6 probit units: far more than the items' own rates differ by."""
    return UserModel((6 * vector).astype(np.float32), np.full(len(vector), 0.05 * learnt_var))


def pair_along(vectors: np.ndarray, learnt_var: float) -> tuple[int, int]:
    """Two catalog rows about 0.6 apart in direction (``seen``, ``target``) such that a user
    sure of ``seen`` ranks ``target`` first of the catalog under the rank-1 prior along
    ``target`` (by half a probit unit), and not under the rank-0 one: chosen by the
    product's own ``for_ranking``, so that the test does not hang on which items the
    origin's draws put in a slate."""
    dim = vectors.shape[1]
    near = np.argwhere(np.abs(vectors @ vectors.T - 0.6) < 0.05)
    for seen, target in near[:300]:
        model = sure_of(vectors[seen], learnt_var)
        by_rank = []
        for rank in (0, 1):
            population = co_varying(dim, learnt_var, vectors[target], rank)
            scores = vectors @ for_ranking(model, learnt_var, population).mean
            top, second = np.argsort(-scores)[:2]
            by_rank.append((int(top), float(scores[top] - scores[second])))
        (top_0, _), (top_1, margin) = by_rank
        if top_1 == target and margin > 0.5 and top_0 != target:
            return int(seen), int(target)
    raise AssertionError("no such pair in the test catalog")


@pytest.mark.parametrize("rank", [0, 1])
async def test_the_edge_ranks_a_user_along_the_directions_tastes_co_vary_in(
    origin_settings: Settings, redis: Redis, rank: int
) -> None:
    """A population prior of rank 1 (``PERSO_POPULATION_RANK``) reaches the edge in the
    segment's pool, and the edge ranks a user under it (``relevance.population.for_ranking``):
    users spread little in every direction but much along one item's (``target``), so a
    user whose evidence points at an item about 0.6 along it (``seen``) gets ``target`` first;
    under a prior of rank 0 as wide as the learnt one, another item."""
    async with running(origin_settings) as stack:
        index = stack.origin_app.state.origin.index
    vectors = index.vectors.astype(np.float64)
    dim = vectors.shape[1]
    learnt_var = origin_settings.user_prior_scale / dim
    seen, target = pair_along(vectors, learnt_var)
    population = co_varying(dim, learnt_var, vectors[target], rank)
    await redis.set(keys.POPULATION_PRIOR, population_bytes(population))
    model = sure_of(vectors[seen], learnt_var)
    await redis.set(keys.user_record("ann"), encode_record(UserRecord(version=1, model=model), dim))
    async with running(origin_settings) as stack:
        await stack.ask("bob")  # the segment's pool: the whole test catalog
        answer, _ = await stack.ask("ann", options={"exploration_rate": 0.0})
        assert answer.metadata.ranked_by == "edge"
        assert (answer.items[0].item_id == index.items[target].item_id) == (rank == 1)


async def test_a_new_user_is_drawn_from_what_users_are_like(
    origin_settings: Settings, redis: Redis
) -> None:
    """A user of whom nothing is known is ranked at the edge under the users' population
    prior that the segment's pool carries (``edge.serve.pool_answer.newcomer``): where users
    are known to like one item's direction by far, that item comes first for a newcomer."""
    async with running(origin_settings) as stack:
        index = stack.origin_app.state.origin.index
        before, _ = await stack.ask("new-0", segment=Segment.NEW)
    dim = index.vectors.shape[1]
    learnt_var = origin_settings.user_prior_scale / dim
    target = index.row_of[before.items[-1].item_id]  # last of the slate without the prior
    mean = (6 * index.vectors[target]).astype(np.float32)
    await redis.set(
        keys.POPULATION_PRIOR, population_bytes(Population(1, mean, 0.05 * learnt_var, 500))
    )
    async with running(origin_settings) as stack:
        answer, _ = await stack.ask("new-1", segment=Segment.NEW, options={"exploration_rate": 0.0})
        assert answer.metadata.ranked_by == "edge"
        assert answer.items[0].item_id == index.items[target].item_id
