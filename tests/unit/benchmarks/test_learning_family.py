from __future__ import annotations

import dataclasses

import pytest

from benchmarks.learning_baselines import BetaPrior, LinearThompsonConfig
from benchmarks.learning_family import FAMILY, NAMES, Shop, shop
from benchmarks.learning_policies import BETA_TS, CHOSEN, GRIDS, LIN_TS, VW, BaselineConfig
from benchmarks.learning_tuning import chosen_lines, literal, on_edge
from benchmarks.shop_world import FEEDBACK, WorldConfig, make_world, visible_r2
from benchmarks.vw_policy import VWConfig


def test_the_family_has_six_uniquely_named_worlds() -> None:
    assert len(FAMILY) >= 6
    assert len(set(NAMES)) == len(NAMES)
    assert {"clicks", "dismisses", "graded", "large_catalog", "many_users", "subtle"} <= set(NAMES)


@pytest.mark.parametrize("world", FAMILY, ids=NAMES)
def test_every_world_is_a_valid_world_run_long_enough(world: Shop) -> None:
    # A WorldConfig checks itself when made: remaking it from its fields must pass too.
    assert WorldConfig(**{f.name: getattr(world.config, f.name) for f in
                          dataclasses.fields(WorldConfig)}) == world.config  # fmt: skip
    assert world.config.feedback in FEEDBACK
    assert world.slates >= 1_000
    assert world.pace > 0
    assert world.summary


def test_the_worlds_differ_along_every_dimension() -> None:
    configs = [s.config for s in FAMILY]
    assert {c.feedback for c in configs} == set(FEEDBACK)
    popularity = {c.popularity_noise for c in configs}
    assert None in popularity
    assert len(popularity - {None}) >= 2
    assert len({c.items for c in configs}) >= 2
    assert len({c.users for c in configs}) >= 2
    assert len({c.activity_shares for c in configs}) >= 2
    assert len({c.latent_dim for c in configs}) >= 2
    assert len({c.visible_noise for c in configs}) >= 2
    assert len({s.pace for s in FAMILY}) >= 2


def test_the_former_world_is_in_the_family_unchanged() -> None:
    assert shop("dismisses").config == WorldConfig()


def test_a_shop_is_found_by_name_and_an_unknown_one_lists_the_family() -> None:
    assert shop("subtle").config.latent_dim == 16
    with pytest.raises(KeyError) as caught:
        shop("nope")
    assert all(name in str(caught.value) for name in NAMES)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_subtle_world_shows_about_half_of_the_tastes(seed: int) -> None:
    assert 0.4 <= visible_r2(make_world(shop("subtle").config, seed)) <= 0.6


def test_a_shop_needs_slates_and_a_pace() -> None:
    with pytest.raises(ValueError, match="positive"):
        Shop("x", "", WorldConfig(), slates=0, pace=60.0)


def test_every_world_has_its_chosen_configurations() -> None:
    assert set(CHOSEN) == set(NAMES)


LIN_GRID: list[BaselineConfig] = [
    LinearThompsonConfig(prior_precision=p, exploration=e)
    for p in (1.0, 4.0, 16.0)
    for e in (0.02, 0.05, 0.1)
]
BETA_GRID: list[BaselineConfig] = [BetaPrior(1.0, b) for b in (1.0, 10.0, 100.0, 1000.0)]
VW_GRID: list[BaselineConfig] = [
    *(
        VWConfig(softmax_lambda=lam, learning_rate=lr, cb_type="dm")
        for lam in (30.0, 300.0, 1000.0)
        for lr in (0.03, 0.1, 0.3)
    ),
    *(VWConfig(softmax_lambda=lam, learning_rate=0.5, cb_type="mtr") for lam in (30.0, 100.0)),
]


@pytest.mark.parametrize(
    ("winner", "grid", "expected"),
    [
        # Inside on both axes.
        (LinearThompsonConfig(prior_precision=4.0, exploration=0.05), LIN_GRID, []),
        (
            LinearThompsonConfig(prior_precision=16.0, exploration=0.02),
            LIN_GRID,
            [
                "prior_precision=16 is the highest tried (1, 4, 16)",
                "exploration=0.02 is the lowest tried (0.02, 0.05, 0.1)",
            ],
        ),
        (BetaPrior(1.0, 1000.0), BETA_GRID, ["beta=1000 is the highest tried (1, 10, 100, 1000)"]),
        (BetaPrior(1.0, 100.0), BETA_GRID, []),
        (VWConfig(softmax_lambda=300.0, learning_rate=0.1, cb_type="dm"), VW_GRID, []),
        # VW's cost models are judged apart: mtr is tried at two exploration levels only,
        # either is an end.
        (
            VWConfig(softmax_lambda=30.0, learning_rate=0.5, cb_type="mtr"),
            VW_GRID,
            ["softmax_lambda=30 is the lowest tried (30, 100)"],
        ),
    ],
)
def test_a_winner_on_its_grids_end_is_told(
    winner: BaselineConfig, grid: list[BaselineConfig], expected: list[str]
) -> None:
    assert on_edge(winner, grid) == expected


@pytest.mark.parametrize("world", NAMES)
@pytest.mark.parametrize("name", [BETA_TS, LIN_TS, VW])
def test_every_chosen_configuration_is_in_its_grid(world: str, name: str) -> None:
    assert CHOSEN[world][name] in GRIDS[name]


def test_chosen_lines_are_the_source_of_the_configurations() -> None:
    assert literal(BetaPrior(1.0, 1000.0), GRIDS[BETA_TS]) == "BetaPrior(alpha=1.0, beta=1000.0)"
    assert (
        literal(VWConfig(softmax_lambda=300.0, learning_rate=0.1), GRIDS[VW])
        == "VWConfig(softmax_lambda=300.0, learning_rate=0.1)"
    )
    # A knob the grid does not vary is shown where it differs from its default.
    assert (
        literal(VWConfig(softmax_lambda=300.0, learning_rate=0.1, cb_type="mtr"), GRIDS[VW])
        == 'VWConfig(softmax_lambda=300.0, learning_rate=0.1, cb_type="mtr")'
    )
    chosen = CHOSEN["clicks"]
    source = chosen_lines("clicks", chosen)
    assert source.startswith('    "clicks": {')
    namespace = {
        "RANDOM": "random", "BETA_TS": "beta_ts", "EPSILON_GREEDY": "epsilon_greedy",
        "LIN_TS": "lin_ts", "VW": "vw_cb_adf", "BetaPrior": BetaPrior,
        "LinearThompsonConfig": LinearThompsonConfig, "VWConfig": VWConfig,
    }  # fmt: skip
    assert eval("{" + source + "}", namespace) == {"clicks": chosen}
