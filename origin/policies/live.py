"""What the live ranking policy makes of a ranking: its rules and a user's model.

A ``ranker`` policy sets the draws' spread, maximal marginal relevance's weight and the
emotion rules (``RankingRules``; a request's own ``exploration_rate`` and
``diversity_weight`` still replace the first two), and the strength of the users' prior,
applied to each model as it is ranked (the models were learnt under
``PERSO_USER_PRIOR_SCALE``): the users' population prior (``relevance.population``), its
spread scaled by the policy's strength, or without one ``relevance.user_model.with_prior``.
The graded reward's weight, the pre-selection and the propensities' draws stay the
settings'. The references
(``random``, ``popular``) rank by ``relevance.references`` instead and read no model.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.settings import Settings
from origin.ranking.pipeline import RankingRules
from protocol.policies import Policy, PolicyConfig
from relevance.population import Population, as_ranked
from relevance.user_model import UserModel


def ranking_rules(settings: Settings, config: PolicyConfig) -> RankingRules:
    """The ranking's rules: the policy's knobs, and the settings' ``PERSO_VALUE_WEIGHT``
    and ``PERSO_PROPENSITY_DRAWS``."""
    return RankingRules(
        exploration_weight=config.exploration_weight,
        diversity_weight=config.diversity_weight,
        emotion=config.emotion_rules,
        value_weight=settings.value_weight,
        propensity_draws=settings.propensity_draws,
    )


@dataclass(frozen=True, slots=True)
class LivePolicy:
    """The policy an origin ranks by, its rules, the prior the users' models were learnt
    under, the deployment epoch that made it live (0: none, the configured policy) and the
    model version that epoch deployed (``PERSO_MODEL_VERSION`` before any): what every
    answer, pool and decision it ranks carries."""

    policy: Policy
    rules: RankingRules
    learnt_prior_scale: float
    model_version: str
    epoch: int = 0

    @classmethod
    def of(
        cls, settings: Settings, policy: Policy, epoch: int = 0, model_version: str | None = None
    ) -> LivePolicy:
        rules = ranking_rules(settings, policy.config)
        version = model_version or settings.model_version
        return cls(policy, rules, settings.user_prior_scale, version, epoch)

    @property
    def label(self) -> str:
        return self.policy.label

    def user_model(
        self, model: UserModel | None, population: Population | None = None
    ) -> UserModel | None:
        """``model`` (learnt under ``PERSO_USER_PRIOR_SCALE``) as the policy ranks it: under
        the users' ``population`` prior when there is one (``relevance.population``), its
        spread scaled by the policy's prior strength relative to the learnt one; else
        under the policy's prior strength alone (itself when it is the learnt one)."""
        if model is None:
            return None
        return as_ranked(
            model,
            learnt_scale=self.learnt_prior_scale,
            ranked_scale=self.policy.config.user_prior_scale,
            population=population,
        )

    def newcomer(self, population: Population | None, dim: int) -> UserModel | None:
        """A user of whom nothing is known, as the policy ranks one: nobody's evidence
        under the users' ``population`` prior (its mean: what users are like); None without
        one of dimension ``dim`` (the items' own terms alone)."""
        if population is None or population.dim != dim:
            return None
        return self.user_model(UserModel.prior(dim, self.learnt_prior_scale), population)

    def prior_var(self, dim: int, population: Population | None = None) -> float:
        """The prior variance of a model as ``user_model`` ranks it."""
        ratio = self.policy.config.user_prior_scale / self.learnt_prior_scale
        if population is not None and population.dim == dim:
            return float(population.marginal().mean()) * ratio
        return self.policy.config.user_prior_scale / max(dim, 1)
