"""The reference policies' slates (``protocol.policies``: kinds ``random`` and ``popular``),
what a candidate ranker is measured against and what can be promoted instead of it.

- ``random_slate``: ``count`` of the ``n`` candidates, uniformly at random, in random
  order. Every ordered choice is equally likely, so each candidate is at each position
  with probability exactly 1/n: that is each shown item's propensity (computed, not
  estimated by re-sampling as ``relevance.slate`` does).
- ``popular_slate``: the candidates by the posterior mean of their engagement rate,
  alpha / (alpha + beta), best first (ties by candidate order): deterministic, each
  shown item's propensity 1.

Both return ``relevance.slate.Slate``: scores on the probit scale (the posterior mean's,
Φ⁻¹ of the rate), and ``exploration`` where an item is not in the posterior means' top
``count``, as a Thompson slate marks it.
"""

from __future__ import annotations

import numpy as np

from relevance.normal import ppf
from relevance.slate import Array, Rows, Slate


def _by_mean(mean: Array) -> Rows:
    order: Rows = np.argsort(-mean, kind="stable")
    return order


def _slate(rows: Rows, mean: Array, count: int, propensity: float) -> Slate:
    greedy = _by_mean(mean)[:count]
    return Slate(
        rows=rows,
        scores=ppf(mean[rows]),
        propensities=np.full(rows.shape[0], propensity),
        exploration=~np.isin(rows, greedy),
    )


def random_slate(alpha: Array, beta: Array, count: int, rng: np.random.Generator) -> Slate:
    """``count`` of the candidates (at most all of them), uniformly at random."""
    n = alpha.shape[0]
    count = min(count, n)
    rows: Rows = rng.permutation(n)[:count].astype(np.intp)
    mean = alpha / (alpha + beta)
    return _slate(rows, mean, count, 1.0 / n if n else 1.0)


def popular_slate(alpha: Array, beta: Array, count: int) -> Slate:
    """The ``count`` candidates of the best posterior mean, best first."""
    mean = alpha / (alpha + beta)
    count = min(count, mean.shape[0])
    return _slate(_by_mean(mean)[:count], mean, count, 1.0)
