"""The reward model doubly robust estimation adds to IPS: a position-based click model
fitted on the log itself.

    r̂(item, k) = e_k · a_item

``e_k`` how much position k's reward is worth (examination), ``a_item`` how attractive the
item is, each by alternating weighted means over the logged (item, position, reward)
triples; an item's attraction is shrunk toward the mean by ``SHRINK`` pseudo-observations,
so an item seen twice is not read as certain. An item the log never showed predicts the
mean attraction. It is the model the estimators' position-based weighting assumes, and it
is cheap: fitted in a few passes, it predicts by a dictionary read.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

SHRINK = 20.0
ROUNDS = 5


@dataclass(frozen=True, slots=True)
class RewardModel:
    examination: Array  # (K,) e_k
    attraction: dict[str, float]
    mean_attraction: float

    def predict(self, item: str, position: int) -> float:
        """r̂ at 0-based ``position``."""
        a = self.attraction.get(item, self.mean_attraction)
        return float(min(1.0, self.examination[position] * a))

    def predict_mean(self, position: int) -> float:
        """r̂ of an item the log knows nothing of."""
        return float(min(1.0, self.examination[position] * self.mean_attraction))


def fit(items: list[list[str]], reward: Array, shown: npt.NDArray[np.bool_]) -> RewardModel:
    """The model of the logged slates ``items`` (n lists of up to K ids), their ``reward``
    (n, K) and which positions were ``shown``."""
    k = reward.shape[1]
    total = float(reward[shown].sum())
    shows = float(shown.sum())
    if shows == 0:
        return RewardModel(np.zeros(k), {}, 0.0)
    examination = np.ones(k)
    attraction: dict[str, float] = {}
    mean_a = total / shows
    for _ in range(ROUNDS):
        earned: dict[str, float] = defaultdict(float)
        exposure: dict[str, float] = defaultdict(float)
        for row, slate in enumerate(items):
            for pos, item in enumerate(slate):
                if shown[row, pos]:
                    earned[item] += float(reward[row, pos])
                    exposure[item] += float(examination[pos])
        attraction = {
            item: (earned[item] + SHRINK * mean_a) / (exposure[item] + SHRINK) for item in earned
        }
        by_position = np.zeros(k)
        weight = np.zeros(k)
        for row, slate in enumerate(items):
            for pos, item in enumerate(slate):
                if shown[row, pos]:
                    by_position[pos] += float(reward[row, pos])
                    weight[pos] += attraction[item]
        examination = np.where(weight > 0, by_position / np.maximum(weight, 1e-12), 0.0)
        mean_a = float(np.mean(list(attraction.values()))) if attraction else 0.0
    return RewardModel(examination, attraction, mean_a)
