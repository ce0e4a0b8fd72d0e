"""How the workers learn, as the settings configure it: their freshness tiers, the item
posteriors', the users' models' and the joins' configurations. A worker process
(``origin.worker.app``) and a recompute from the log (``origin.worker.recompute``), which must
learn the same way, both take them from here."""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import Settings
from origin.learned.posteriors import PosteriorConfig
from origin.worker.batch import ModelConfig
from origin.worker.freshness_tiers import FreshnessPolicy
from origin.worker.joins import JoinConfig


@dataclass(frozen=True)
class Learning:
    freshness: FreshnessPolicy
    posteriors: PosteriorConfig
    model: ModelConfig
    joins: JoinConfig


def learning(settings: Settings) -> Learning:
    return Learning(
        freshness=FreshnessPolicy(
            settings.freshness_active_s,
            settings.freshness_casual_s,
            settings.freshness_overload_lag_s,
        ),
        posteriors=PosteriorConfig(decay_half_life_s=settings.bandit_decay_half_life_s),
        model=ModelConfig(
            prior_scale=settings.user_prior_scale,
            drift_half_life_s=settings.user_drift_half_life_s,
        ),
        joins=JoinConfig(
            wait_s=settings.reward_wait_s,
            grace_s=settings.reward_grace_s,
            retention_s=settings.decision_retention_s,
            retention_entries=settings.decision_retention_entries,
        ),
    )
