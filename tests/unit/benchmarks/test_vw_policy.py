from __future__ import annotations

import importlib.util
from collections import Counter

import numpy as np
import pytest

from benchmarks.click_model import Outcome
from benchmarks.learning_policies import VW, build
from benchmarks.learning_run import drive
from benchmarks.shop_world import Request, WorldConfig, make_world, requests
from benchmarks.vw_policy import (
    VowpalWabbit,
    VWConfig,
    action_line,
    arguments,
    learn_lines,
    plackett_luce,
    shared_line,
)

needs_vw = pytest.mark.skipif(
    importlib.util.find_spec("vowpalwabbit") is None,
    reason="vowpalwabbit is not installed (the bench extra: make bench-deps)",
)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            VWConfig(),
            "--cb_explore_adf --softmax --lambda 30 --cb_type dm -q UA -l 0.5 -b 20 --quiet",
        ),
        (
            VWConfig(softmax_lambda=100.0, learning_rate=0.1, cb_type="mtr", bits=18),
            "--cb_explore_adf --softmax --lambda 100 --cb_type mtr -q UA -l 0.1 -b 18 --quiet",
        ),
    ],
)
def test_arguments(config: VWConfig, expected: str) -> None:
    assert arguments(config) == expected


@pytest.mark.parametrize(
    ("item_ids", "expected"),
    [(True, "|A 0:0.5 1:-0.25 |I i7"), (False, "|A 0:0.5 1:-0.25")],
)
def test_action_lines(item_ids: bool, expected: str) -> None:
    config = VWConfig(item_ids=item_ids)
    assert action_line(np.array([0.5, -0.25]), 7, config) == expected


@pytest.mark.parametrize(
    ("clicked", "probability", "position_feature", "expected"),
    [
        (True, 0.25, True, "0:-1:0.25 |A 0:1 |P p3"),
        (False, 0.25, True, "0:0:0.25 |A 0:1 |P p3"),
        (True, 0.0, False, "0:-1:1e-06 |A 0:1"),  # never a zero probability
    ],
)
def test_each_shown_item_is_a_cb_example(
    clicked: bool, probability: float, position_feature: bool, expected: str
) -> None:
    config = VWConfig(position_feature=position_feature)
    lines = learn_lines(
        "shopper-0001",
        "|A 0:1",
        clicked=clicked,
        probability=probability,
        position=3,
        config=config,
    )
    assert lines == [shared_line("shopper-0001"), expected]


def test_plackett_luce_slots_have_their_conditional_probabilities() -> None:
    pmf = np.array([0.5, 0.3, 0.2])
    rows, probabilities = plackett_luce(np.random.default_rng(0), pmf, 3)
    assert sorted(rows.tolist()) == [0, 1, 2]
    left = 1.0
    for row, probability in zip(rows, probabilities, strict=True):
        assert probability == pytest.approx(pmf[row] / left)
        left -= pmf[row]
    assert probabilities[-1] == pytest.approx(1.0)


def test_plackett_luce_draws_the_first_slot_from_the_pmf() -> None:
    rng = np.random.default_rng(1)
    pmf = np.array([0.6, 0.25, 0.1, 0.05])
    firsts = Counter(int(plackett_luce(rng, pmf, 2)[0][0]) for _ in range(20_000))
    assert [firsts[i] / 20_000 for i in range(4)] == pytest.approx(pmf.tolist(), abs=0.01)
    # Second slot after a first of 0: 0.25 / 0.4 for row 1.
    seconds = Counter(
        int(rows[1])
        for rows, _ in (plackett_luce(rng, pmf, 2) for _ in range(20_000))
        if rows[0] == 0
    )
    assert seconds[1] / sum(seconds.values()) == pytest.approx(0.625, abs=0.02)


@needs_vw
async def test_reused_examples_predict_what_fresh_ones_do() -> None:
    world = make_world(WorldConfig(items=40, categories=4, users=5, slate_size=4), seed=3)
    policy = await build(VW, world, 3, VWConfig())
    assert isinstance(policy, VowpalWabbit)
    for n, request in enumerate(requests(world, 60, seed=3)):
        slate = await policy.slate(request)
        clicked = np.zeros(len(slate), bool)
        clicked[n % len(slate)] = True
        none = np.zeros(len(slate), bool)
        await policy.learn(request, slate, Outcome(clicked, none, none, none))
    workspace = policy._workspace
    for user_id in world.user_ids[:3]:
        fresh = np.asarray(workspace.predict([shared_line(user_id), *policy._lines]))
        assert policy.pmf(user_id) == pytest.approx(fresh)
    await policy.aclose()


@needs_vw
async def test_vw_learns_what_a_user_clicks() -> None:
    world = make_world(WorldConfig(items=30, categories=3, users=2, slate_size=3), seed=5)
    policy = await build(VW, world, 5, VWConfig(softmax_lambda=30.0))
    assert isinstance(policy, VowpalWabbit)
    liked = world.catalog.item_ids[4]
    before = policy.pmf("shopper-0001")[4]
    for n in range(200):
        request = Request(n, 0, "shopper-0001", "power", "mobile", 3)
        slate = await policy.slate(request)
        clicked = np.array([item == liked for item in slate])
        none = np.zeros(len(slate), bool)
        await policy.learn(request, slate, Outcome(clicked, none, none, none))
    assert policy.pmf("shopper-0001")[4] > max(before, 0.3)
    await policy.aclose()


@needs_vw
async def test_vw_serves_valid_slates_reproducibly() -> None:
    config = WorldConfig(items=60, categories=4, users=8, slate_size=5)
    world = make_world(config, seed=2)
    stream_of_requests = requests(world, 80, seed=2)
    traces = []
    for _ in range(2):
        policy = await build(VW, world, 2, VWConfig())
        traces.append(await drive(world, policy, stream_of_requests, seed=2))
        await policy.aclose()
    assert np.array_equal(traces[0].regret, traces[1].regret)
    assert (traces[0].regret >= -1e-12).all()
