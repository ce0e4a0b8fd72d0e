from __future__ import annotations

import numpy as np

from benchmarks.item_residuals import ResidualLinearThompson
from benchmarks.learning_baselines import LinearThompson, LinearThompsonConfig
from tests.unit.benchmarks.test_learning_baselines import EXAMINE, catalog, outcome, request

CONFIG = LinearThompsonConfig(prior_precision=1.0, exploration=0.0)
VISIBLE = [[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]


async def test_an_item_clicked_against_its_vector_learns_a_residual_toward_its_clickers() -> None:
    """Users who like the first direction click item 1 (whose vector points the other
    way): its residual moves toward the first direction; an unshown item keeps none."""
    learner = ResidualLinearThompson(
        catalog(VISIBLE), EXAMINE, np.random.default_rng(0), CONFIG, residual_precision=1.0
    )
    for n in range(30):
        user = request(f"u{n % 3}", count=2, index=n)
        await learner.learn(user, ["it-0", "it-1"], outcome([True, True]))
    features = learner._features
    assert features[1, 0] > 0.1  # pulled toward the first direction its clickers like
    np.testing.assert_array_equal(features[2, :2], VISIBLE[2])


async def test_at_an_overwhelming_residual_precision_it_is_linear_thompson() -> None:
    visible = [[1.0, 0.0], [0.2, 0.9], [0.6, 0.5], [-0.3, 0.4]]  # no two items tie
    plain = LinearThompson(catalog(visible), EXAMINE, np.random.default_rng(0), CONFIG)
    residual = ResidualLinearThompson(
        catalog(visible), EXAMINE, np.random.default_rng(0), CONFIG, residual_precision=1e12
    )
    for n in range(20):
        user = request("u1", count=2, index=n)
        a, b = await plain.slate(user), await residual.slate(user)
        assert a == b
        clicked = outcome([n % 2 == 0, n % 3 == 0])
        await plain.learn(user, a, clicked)
        await residual.learn(user, b, clicked)
