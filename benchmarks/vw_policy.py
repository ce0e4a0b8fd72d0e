"""Vowpal Wabbit ``--cb_explore_adf`` (the engine behind Azure Personalizer) as a slate
policy for ``benchmarks.learning``. Needs the ``vowpalwabbit`` wheel (the bench extra);
``benchmarks.learning`` reports null figures for it without.

Features, the same visible vectors the other learners see:

- shared (the context): the user's id, one-hot (namespace ``U``);
- each action: its visible vector (``A``, 32 dense features) and its item id (``I``);
- ``-q UA``: user x visible-vector interactions, i.e. a linear model of the visible vector
  per user beside the population's (the ``A`` terms) and a bias per item (the ``I`` terms).

A slate from a per-action contextual bandit: VW scores every item of the catalog and
returns its exploration distribution (softmax explorer: ``pmf ~ exp(-lambda x predicted
cost)``, monotone in the score). The slate is a Plackett-Luce draw from that pmf: slot 1 is
VW's own sampled action, slot s a draw from the pmf renormalised over the items not yet
placed (done at once with the Gumbel-top-k trick). Each shown item is then learned as its
own cb example: the shared features, that item's action line, cost = -click, probability =
the probability its slot chose it given the slots above, and its position as a feature
(``P``, at learn time only: an additive position term, the usual way to let a cb model
absorb position bias; leaving it out at prediction time shifts every action's score
equally, which changes neither the ranking nor the softmax pmf).

Learning from shown items: the cost model is VW's direct method (``--cb_type dm``, a
regression on the shown items), chosen by the tuning grid over VW's default ``mtr`` on the
former single world (now the family's ``dismisses``: 77.8% regret against 73.8% over a
5,000-slate tuning run); the grid still tries ``mtr`` on every world. A likely reason, not
verified: ``mtr`` weighs each example by 1 / p, and with thousands of actions a softmax
tail's probabilities are 1e-4 and below.

Speed: VW's text parser is most of the cost of scoring 2,000 actions (about 10 ms a slate
on one core), so the action examples are parsed once and reused for every prediction, as
is each user's shared example; prediction then takes about 1.5 ms a slate (1.7-3 ms with
the ten learning examples, at 2,000 items; scoring grows with the catalog). Reuse is safe
because a prediction writes only the examples' prediction fields; the unit tests check that
the pmf is the one a freshly parsed example gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from benchmarks.click_model import Outcome, Rows, Vector, top_k
from benchmarks.shop_world import Catalog, Request

# A slot's probability is never below this: VW divides by it, and a float32 softmax can
# round an item's probability to zero (such an item is drawn only when fewer than k items
# have any probability left).
MIN_PROBABILITY = 1e-6


@dataclass(frozen=True, slots=True)
class VWConfig:
    softmax_lambda: float = 30.0
    learning_rate: float = 0.5
    cb_type: str = "dm"
    item_ids: bool = True
    position_feature: bool = True
    bits: int = 20


def arguments(config: VWConfig) -> str:
    """The VW command line of ``config``."""
    return (
        f"--cb_explore_adf --softmax --lambda {config.softmax_lambda:g} "
        f"--cb_type {config.cb_type} -q UA -l {config.learning_rate:g} -b {config.bits} "
        "--quiet"
    )


def action_line(vector: Vector, row: int, config: VWConfig) -> str:
    """An item's action features in VW's text format."""
    dense = " ".join(f"{j}:{float(x):.6g}" for j, x in enumerate(vector))
    return f"|A {dense}" + (f" |I i{row}" if config.item_ids else "")


def shared_line(user_id: str) -> str:
    return f"shared |U {user_id}"


def learn_lines(
    user_id: str,
    action: str,
    *,
    clicked: bool,
    probability: float,
    position: int,
    config: VWConfig,
) -> list[str]:
    """One shown item as a cb example: cost -1 for a click, 0 otherwise."""
    label = f"0:{-1.0 if clicked else 0.0:g}:{max(probability, MIN_PROBABILITY):.6g}"
    tail = f" |P p{position}" if config.position_feature else ""
    return [shared_line(user_id), f"{label} {action}{tail}"]


def plackett_luce(rng: np.random.Generator, pmf: Vector, k: int) -> tuple[Rows, Vector]:
    """A ranking of k items drawn without replacement in proportion to ``pmf`` (Gumbel-top-k:
    the same distribution as drawing slot by slot), and each slot's probability of its item
    given the slots above."""
    with np.errstate(divide="ignore"):
        keys = np.log(pmf) - np.log(-np.log(rng.random(len(pmf))))
    rows = top_k(keys, k)
    chosen = pmf[rows]
    left = 1.0 - np.concatenate([[0.0], np.cumsum(chosen)[:-1]])
    return rows, np.clip(chosen / np.maximum(left, 1e-12), MIN_PROBABILITY, 1.0)


class VowpalWabbit:
    """``cb_explore_adf`` over the whole catalog, slates by Plackett-Luce (module docstring)."""

    name = "vw_cb_adf"

    def __init__(self, catalog: Catalog, rng: np.random.Generator, config: VWConfig) -> None:
        # Optional (the bench extra): imported here so the benchmark runs without it.
        import vowpalwabbit  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415

        self._catalog = catalog
        self._rng = rng
        self._config = config
        self._index_of = {item_id: i for i, item_id in enumerate(catalog.item_ids)}
        self._workspace: Any = vowpalwabbit.Workspace(arguments(config))
        self._lines = [action_line(v, i, config) for i, v in enumerate(catalog.visible)]
        self._actions: list[Any] = self._workspace.parse([shared_line("-"), *self._lines])[1:]
        self._shared: dict[str, Any] = {}
        self._propensities: dict[int, Vector] = {}

    def configuration(self) -> dict[str, Any]:
        return {
            **asdict(self._config),
            "arguments": arguments(self._config),
            "features": "shared: user id; action: visible vector, item id; -q UA; "
            "position as a feature when learning",
            "slate": "Plackett-Luce draw from the softmax pmf over the whole catalog; each "
            "shown item learned as its own cb example (cost -click, its slot's probability)",
        }

    def pmf(self, user_id: str) -> Vector:
        """VW's exploration distribution over the catalog, in catalog order."""
        shared = self._shared.get(user_id)
        if shared is None:
            shared = self._shared[user_id] = self._workspace.parse([shared_line(user_id)])[0]
        return np.asarray(self._workspace.predict([shared, *self._actions]), dtype=np.float64)

    async def slate(self, request: Request) -> list[str]:
        rows, probabilities = plackett_luce(self._rng, self.pmf(request.user_id), request.count)
        self._propensities[request.index] = probabilities
        return [self._catalog.item_ids[int(r)] for r in rows]

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        probabilities = self._propensities.pop(request.index)
        for position, item_id in enumerate(slate):
            row = self._index_of[item_id]
            self._workspace.learn(
                learn_lines(
                    request.user_id,
                    self._lines[row],
                    clicked=bool(outcome.clicked[position]),
                    probability=float(probabilities[position]),
                    position=position + 1,
                    config=self._config,
                )
            )

    async def aclose(self) -> None:
        self._workspace.finish()
