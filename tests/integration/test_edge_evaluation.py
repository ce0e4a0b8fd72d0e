"""Offline evaluation of the answers an edge ranks itself (``edge.ranking.shadow``): each ranking's
context in the context log under the ranking's own id, which the edge's decisions name;
the shadow's run on it in the shadow log; a replay of the live policy on the record
reproducing what the edge logged. The real origin and edge apps in process, the suite's
Redis between them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest
from redis.asyncio import Redis

from config.settings import Settings
from evaluation.replay import replay, rows_of
from origin.offline.window import records_of
from protocol import keys
from protocol.contexts import decode_context
from protocol.decisions import DECISION_FIELD, decode_entry
from protocol.shadows import decode_shadow
from tests.integration.test_edge_ranking import Stack, running
from tests.integration.test_learning_loop import written

SHADOW = "greedy:exploration_weight=0"


@pytest.fixture
async def stack(origin_settings: Settings) -> AsyncIterator[Stack]:
    settings = origin_settings.model_copy(
        update={"context_log_rate": 1.0, "shadow_policy": SHADOW, "shadow_rate": 1.0}
    )
    async with running(settings) as stack:
        yield stack


async def flushed(stack: Stack, shadowed: int) -> None:
    """The edge's decisions, contexts and ``shadowed`` shadow records are in Redis."""
    node = stack.node
    evaluation = node.evaluation
    assert evaluation is not None
    assert evaluation.shadow is not None
    for _ in range(1000):
        if evaluation.shadow.counters.logged >= shadowed:
            break
        await asyncio.sleep(0.01)
    assert node.decisions is not None
    for log in (node.decisions, *evaluation.logs()):
        await written(log)


async def logged(redis: Redis, stream: str) -> list[bytes]:
    """Every record of ``stream`` (an entry holds one, or a flush's batch)."""
    out: list[bytes] = []
    for _, fields in await redis.xrange(stream):
        out += records_of(bytes(fields[DECISION_FIELD]))
    return out


async def test_an_edge_ranked_answer_joins_its_context_and_its_shadow(
    stack: Stack, origin_settings: Settings, redis: Redis
) -> None:
    answers = [(await stack.ask(user))[0] for user in ("ann", "bob", "ann")]
    assert {a.metadata.tier for a in answers} == {"edge"}
    await flushed(stack, len(answers))
    partitions = range(origin_settings.event_partitions)
    decisions = [
        d
        for p in partitions
        for raw in await logged(redis, keys.decisions_stream(p))
        for d in decode_entry(raw)
        if d.served_by.startswith("edge:")
    ]
    contexts = {
        c.request_id: c
        for p in partitions
        for c in map(decode_context, await logged(redis, keys.contexts_stream(p)))
    }
    shadows = {
        s.request_id: s
        for p in partitions
        for s in map(decode_shadow, await logged(redis, keys.shadow_stream(p)))
    }
    # Each decision names its own ranking, not the pool fill's, and finds its context and
    # the shadow's run on it (the origin's own answers, the edge's popular list, have
    # theirs too: not these).
    by_request = {d.request_id: d for d in decisions}
    assert set(by_request) == {a.request_id for a in answers}
    assert len({d.ranked_as for d in decisions} - set(by_request)) == len(answers)
    for answer in answers:
        d = by_request[answer.request_id]
        shown = [i.item_id for i in answer.items]
        context, shadow = contexts[d.ranked_as], shadows[d.ranked_as]
        assert context.user_id == answer.user_id
        assert context.user is not None  # the user's own model, as ranked
        assert context.retrieved >= len(context.items) >= context.count == len(shown)
        assert set(shown) <= set(context.items)
        assert list(shadow.shown) == shown
        assert shadow.policy == "greedy/inline"
        assert shadow.live == stack.node.policy.label
        assert all(0 < p <= 1 for p in shadow.live_p)  # the live replay makes what was shown
        assert set(shadow.would_p) == {1.0}  # by the means: one slate
    metrics = (await stack.client.get("/metrics")).text
    sampled = 'perso_edge_shadow_sampled_total{policy="greedy/inline",region="us-east"}'
    assert f"{sampled} {len(answers)}.0" in metrics


async def test_a_replay_on_an_edge_context_reproduces_its_propensities(
    origin_settings: Settings, redis: Redis
) -> None:
    settings = origin_settings.model_copy(update={"context_log_rate": 1.0})
    async with running(settings) as stack:
        answer, _ = await stack.ask("cat")
        evaluation = stack.node.evaluation
        assert stack.node.decisions is not None
        assert evaluation is not None
        for log in (stack.node.decisions, *evaluation.logs()):
            await written(log)
        partitions = range(origin_settings.event_partitions)
        [decision] = [
            d
            for p in partitions
            for raw in await logged(redis, keys.decisions_stream(p))
            for d in decode_entry(raw)
            if d.request_id == answer.request_id
        ]
        [context] = [
            c
            for p in partitions
            for c in map(decode_context, await logged(redis, keys.contexts_stream(p)))
            if c.request_id == decision.ranked_as
        ]
        shown = [s.item_id for s in decision.shown]
        vectors = np.stack([stack_vector(stack, item) for item in context.items])
        live = stack.node.policy.config
        replayed = replay(
            context, vectors, rows_of(context, shown), live, np.random.default_rng(0), draws=1023
        )
    # Estimates of the same probabilities: the edge's of 64 runs, the served one among them
    # (so 1/64 + 63/64 of the truth, on average), the replay's of 1,024 independent ones.
    # Nobody has engaged with anything yet: the items' posteriors tie, the pre-selection's
    # 100 are taken by their ids' keys (``relevance.slate.preselected``), the same in the
    # replay, and the slate is close to a random one of them (about 1% per item and
    # position; the logged mean's standard error about 0.003). A replay that pre-selected
    # other items than the edge (a cut through the tie, decided by rounding and row order)
    # found about half the shown ones impossible.
    assert not np.any(replayed.propensity == 0)  # each about 1e-5 by chance
    logged_p = np.array([s.propensity for s in decision.shown])
    expected = 1 / 64 + 63 / 64 * replayed.propensity.mean()
    assert logged_p.mean() == pytest.approx(expected, abs=0.01)


def stack_vector(stack: Stack, item: str) -> np.ndarray:
    index = stack.origin_app.state.origin.index
    vector: np.ndarray = index.vectors[index.row_of[item]].astype(np.float32)
    return vector
