"""What an edge leaves beside its decision log for offline evaluation, for the answers it
ranks itself (``edge.serve.pool_answer``): a sample of their contexts (``protocol.contexts``,
``PERSO_CONTEXT_LOG_RATE``) and the shadow policy's run on a sample of them
(``evaluation.shadow``, ``PERSO_SHADOW_POLICY`` and ``PERSO_SHADOW_RATE``), as the origin
does for its own (``origin.offline``).

Both are built off the request's path: the request hands over a closure (the pool, the
user's model as ranked, the policy's draw settings) and is answered; the record is built
when the context log flushes or the shadow gets to it. An edge reads a shadow written
inline or a reference (``protocol.policy_specs``); it has no registry to look a name up
in, so a registered name runs at the origins only (logged once).

The record is keyed by the answer's ``ranking_id`` (``protocol.decisions``): every
decision served from that ranking joins it. Requests with their own ``exploration_rate``
or ``diversity_weight`` are left out: a replay of the live policy would not reproduce
them.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from config.settings import ConfigError, Settings
from decision_log.writer import DecisionLog, configured_log, shadow_writer
from edge.cache.prepared_pool import PreparedPool
from edge.ranking.pool_ranking import Policy as Draws
from edge.ranking.pool_ranking import pool_candidates
from evaluation.recording import context_of
from evaluation.shadow import ShadowRunner
from protocol import keys
from protocol.contexts import RankedContext, encode_context
from protocol.decisions import EncodedDecision
from protocol.exceptions import MalformedMessage
from protocol.policies import Policy
from protocol.policy_specs import inline, is_inline
from redis_client.client import RedisClient
from relevance.user_model import UserModel

log = logging.getLogger(__name__)


@dataclass
class EdgeEvaluation:
    """The context log, the shadow (None: none configured, or a name this edge cannot
    read) and its log, and what samples a decision for each."""

    contexts: DecisionLog
    context_rate: float
    shadow: ShadowRunner | None
    shadow_log: DecisionLog
    sample: Callable[[], float] = random.random

    def logs(self) -> list[DecisionLog]:
        return [self.contexts, self.shadow_log]

    def beside(
        self,
        *,
        ranking_id: str,
        user_id: str,
        at_ms: int,
        pool: Callable[[], PreparedPool],
        model: Callable[[], UserModel],
        draws: Draws,
        exclude: Collection[str],
        preferences: Mapping[str, float],
        shown: list[str],
        live: Policy,
        prior_var: Callable[[], float],
    ) -> None:
        """Log the context of a ranking made here, and hand it to the shadow, each when
        sampled; never blocks. ``pool``, ``model`` and ``prior_var``: the pool ranked (with
        the user's own candidates), the user's model as ranked and its prior variance, each
        computed only for a sampled ranking."""
        log_context = self.context_rate > 0 and self.sample() < self.context_rate
        shadowed = self.shadow is not None and self.shadow.sampled()
        if not (log_context or shadowed):
            return
        user, user_prior_var, ranked_from = model(), prior_var(), pool()

        def record() -> tuple[RankedContext, npt.NDArray[np.float32]]:
            taking = pool_candidates(
                ranked_from, user, draws, exclude=exclude, preferences=preferences
            )
            ids = ranked_from.pool.item_ids
            item_ids = ids if taking.rows is None else [ids[r] for r in taking.rows]
            return context_of(
                taking.terms,
                taking.shift,
                np.zeros(len(taking.terms)),  # the emotion rules are the origin's alone
                user,
                item_ids,
                request_id=ranking_id,
                user_id=user_id,
                at_ms=at_ms,
                count=draws.count,
                prior_var=user_prior_var,
            )

        if log_context:
            self.contexts.log(lambda: EncodedDecision(user_id, encode_context(record()[0])))
        if shadowed and self.shadow is not None:
            self.shadow.submit(record, shown, live)


def evaluation_of(
    settings: Settings, redis: RedisClient, clock: Callable[[], float]
) -> EdgeEvaluation:
    """The edge's context log and shadow over ``redis`` (the decision log's)."""

    shadow_log = configured_log(settings, redis, clock, keys.shadow_stream)
    return EdgeEvaluation(
        contexts=configured_log(settings, redis, clock, keys.contexts_stream),
        context_rate=settings.context_log_rate,
        shadow=_shadow(settings, shadow_log),
        shadow_log=shadow_log,
    )


def _shadow(settings: Settings, shadow_log: DecisionLog) -> ShadowRunner | None:
    spec = settings.shadow_policy
    if not spec:
        return None
    if not is_inline(spec):
        log.warning(
            "PERSO_SHADOW_POLICY=%s names a registered policy: the origins shadow it, this "
            "edge cannot look it up (write it inline to shadow here too)",
            spec,
        )
        return None
    try:
        policy = inline(spec)
    except MalformedMessage as exc:
        raise ConfigError(f"PERSO_SHADOW_POLICY: {exc}") from exc
    return ShadowRunner(
        policy,
        shadow_writer(shadow_log),
        rate=settings.shadow_rate,
        sample=random.random,
        rng=np.random.default_rng(),
    )
