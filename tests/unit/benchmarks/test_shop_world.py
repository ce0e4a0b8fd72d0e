from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from benchmarks.click_model import Outcome, examination, expected_clicks
from benchmarks.shop_world import (
    FEEDBACK,
    Feedback,
    ShopWorld,
    WorldConfig,
    catalog_items,
    global_slate_regret_pct,
    linear_slate_regret_pct,
    make_world,
    oracle_slate,
    regret,
    reported,
    requests,
    stream,
    visible_r2,
)

SMALL = WorldConfig(items=12, categories=3, users=6, slate_size=3)


@pytest.fixture(scope="module")
def default_world() -> ShopWorld:
    return make_world(WorldConfig(), seed=1)


@pytest.mark.parametrize("seed", range(8))
def test_the_oracle_slate_beats_every_slate_by_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    attract = rng.random(7) * 0.6
    examine = examination(3, 0.7)
    best = expected_clicks(attract[oracle_slate(attract, 3)], examine)
    every = [
        expected_clicks(attract[list(slate)], examine)
        for slate in itertools.permutations(range(7), 3)
    ]
    assert best == pytest.approx(max(every))


def test_in_a_small_world_the_oracle_is_best_and_its_regret_zero() -> None:
    world = make_world(SMALL, seed=4)
    k = SMALL.slate_size
    for user in range(SMALL.users):
        assert regret(world, user, world.oracle[user]) == pytest.approx(0.0)
        regrets = [
            regret(world, user, np.array(slate, np.intp))
            for slate in itertools.permutations(range(SMALL.items), k)
        ]
        assert min(regrets) == pytest.approx(0.0, abs=1e-12)
        assert min(regrets) >= -1e-12
        # The oracle's slate reversed is worse (examination falls with the position).
        assert regret(world, user, world.oracle[user][::-1]) > 0


def test_a_world_is_determined_by_its_seed() -> None:
    one, again, other = make_world(SMALL, 3), make_world(SMALL, 3), make_world(SMALL, 4)
    assert np.array_equal(one.attract, again.attract)
    assert np.array_equal(one.catalog.visible, again.catalog.visible)
    assert one.favourites == again.favourites
    assert not np.array_equal(one.attract, other.attract)
    assert requests(one, 50, 3) == requests(again, 50, 3)
    assert requests(one, 50, 3) != requests(one, 50, 4)


def test_streams_are_reproducible_and_apart_per_label() -> None:
    draws = stream(1, "outcomes", "lin_ts").random(4)
    assert np.array_equal(draws, stream(1, "outcomes", "lin_ts").random(4))
    assert not np.array_equal(draws, stream(1, "outcomes", "beta_ts").random(4))
    assert not np.array_equal(draws, stream(2, "outcomes", "lin_ts").random(4))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_visible_vectors_are_informative_but_imperfect(seed: int) -> None:
    world = make_world(WorldConfig(), seed)
    assert 0.6 <= visible_r2(world) <= 0.85
    norms = np.linalg.norm(world.catalog.visible, axis=1)
    assert norms == pytest.approx(np.ones(len(norms)))


def test_attraction_is_calibrated(default_world: ShopWorld) -> None:
    ranked = np.sort(default_world.attract, axis=1)[:, ::-1]
    assert 0.3 <= float(np.median(ranked[:, 0])) <= 0.5  # a user's best item
    assert 0.25 <= float(np.median(ranked[:, 9])) <= 0.45  # their tenth best
    assert 0.01 <= float(default_world.attract.mean()) <= 0.08  # a random item


def test_tastes_sit_in_the_favourite_categories(default_world: ShopWorld) -> None:
    counts = [len(f) for f in default_world.favourites]
    assert set(counts) == {1, 2, 3}
    category = default_world.catalog.category
    in_favourites = [
        np.isin(category[default_world.oracle[j]], default_world.favourites[j]).mean()
        for j in range(default_world.config.users)
    ]
    assert float(np.mean(in_favourites)) >= 0.7


def test_power_users_ask_far_more_than_casual_ones(default_world: ShopWorld) -> None:
    stream_of_requests = requests(default_world, 20_000, seed=1)
    per_user = np.bincount([r.user for r in stream_of_requests], minlength=300)
    activity = np.array(default_world.activity)
    power, casual = per_user[activity == "power"].mean(), per_user[activity == "casual"].mean()
    assert power > 5 * casual
    shares = {a: float(np.mean(activity == a)) for a in ("power", "active", "casual")}
    assert shares == pytest.approx({"power": 0.2, "active": 0.5, "casual": 0.3}, abs=0.07)
    assert {r.count for r in stream_of_requests} == {10}


@pytest.mark.parametrize(
    ("slate", "problem"),
    [
        (["shop-00001", "shop-00001"], "repeats"),
        (["shop-00001", "nope"], "unknown"),
        ([f"shop-{i:05d}" for i in range(1, 5)], "at most"),
    ],
)
def test_bad_slates_are_refused(slate: list[str], problem: str) -> None:
    world = make_world(SMALL, 1)
    with pytest.raises(ValueError, match=problem):
        world.rows(slate)


def test_short_slates_earn_only_their_positions() -> None:
    world = make_world(SMALL, 1)
    rows = world.rows(["shop-00002"])
    assert rows.tolist() == [1]
    assert regret(world, 0, rows) == pytest.approx(
        world.oracle_clicks[0] - world.attract[0, 1] * world.examine[0]
    )


def test_catalog_items_are_what_the_admin_api_takes() -> None:
    world = make_world(SMALL, 1)
    items = catalog_items(world)
    assert len(items) == SMALL.items
    first = items[0]
    assert set(first) == {
        "item_id", "version", "title", "category", "category_name", "price", "popularity",
        "image",
    }  # fmt: skip
    assert first["item_id"] == "shop-00001"
    assert len(first["image"]) == SMALL.visible_dim
    assert math.isclose(math.hypot(*first["image"]), 1.0, abs_tol=1e-5)
    assert all(0 <= item["popularity"] <= 1 and item["price"] > 0 for item in items)
    assert {item["category_name"] for item in items} <= set(world.catalog.category_names)


def test_references_order_the_policies_we_expect(default_world: ShopWorld) -> None:
    users = np.array([r.user for r in requests(default_world, 5_000, seed=1)], np.intp)
    linear = linear_slate_regret_pct(default_world, users)
    everyone = global_slate_regret_pct(default_world, users)
    assert 0 < linear < everyone < 100


def outcome_of(**flags: list[int]) -> Outcome:
    """An outcome of a 3-item slate; each keyword names the positions flagged."""
    kinds = ("clicked", "carted", "purchased", "dismissed")
    return Outcome(**{k: np.isin(np.arange(3), flags.get(k, [])) for k in kinds})


@pytest.mark.parametrize(
    ("feedback", "expected"),
    [
        ("clicks", [(0, "click"), (2, "click")]),
        ("dismisses", [(0, "click"), (1, "dismiss"), (2, "click")]),
        ("graded", [(0, "click"), (0, "add_to_cart"), (0, "purchase"), (2, "click")]),
    ],
)
def test_a_shop_reports_what_its_feedback_says(
    feedback: Feedback, expected: list[tuple[int, str]]
) -> None:
    happened = outcome_of(clicked=[0, 2], carted=[0], purchased=[0], dismissed=[1])
    assert reported(happened, feedback) == expected


def test_nothing_is_reported_of_an_ignored_slate() -> None:
    for feedback in FEEDBACK:
        assert reported(outcome_of(), feedback) == []


def test_a_catalog_without_popularity_carries_none() -> None:
    world = make_world(WorldConfig(items=12, categories=3, users=6, slate_size=3,
                                   popularity_noise=None), 1)  # fmt: skip
    assert world.catalog.popularity is None
    assert all("popularity" not in item for item in catalog_items(world))


def test_the_activity_mix_follows_its_shares() -> None:
    world = make_world(WorldConfig(users=2_000, activity_shares=(0.05, 0.25, 0.70)), 1)
    activity = np.array(world.activity)
    shares = {a: float(np.mean(activity == a)) for a in ("power", "active", "casual")}
    assert shares == pytest.approx({"power": 0.05, "active": 0.25, "casual": 0.70}, abs=0.03)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"categories": 49}, "categories"),
        ({"feedback": "likes"}, "feedback"),
        ({"popularity_noise": -1.0}, "popularity_noise"),
        ({"activity_shares": (0.5, 0.5)}, "activity_shares"),
        ({"activity_shares": (0.0, 0.0, 0.0)}, "activity_shares"),
    ],
)
def test_impossible_worlds_are_refused(changes: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        WorldConfig(**changes)  # type: ignore[arg-type]
