"""The answer to a ranked personalize request, whoever asked (``/v1/personalize``, an edge's
pool fill): its body, the headers an edge caches and logs decisions by, and the decision
the origin logs when no edge will."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fastapi import Request

from origin.catalog.item_index import ItemIndex
from origin.ranking.contexts import context_record
from origin.ranking.pipeline import Ranking
from origin.ranking.response import ranked_items
from origin.ranking.retrieval import Candidates
from origin.runtime import Origin
from protocol import audience
from protocol.api import PersonalizeRequest, PersonalizeResponse, ResponseMetadata
from protocol.audience import AUDIENCE_HEADER
from protocol.contexts import RankedContext, encode_context
from protocol.decisions import (
    CONTEXT_HEADER,
    DECISION_BY_HEADER,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    Decision,
    EncodedDecision,
    Shown,
    propensities_header,
)
from relevance.population import Population
from web.responses import elapsed_ms

FALLBACK_POLICY = "popular"


@dataclass(frozen=True)
class RankedFrom:
    """What a ranking was ranked from: the candidates of its one retrieval, their effective
    posteriors and values of its one posterior read (``origin.ranking.pools`` pools them)."""

    candidates: Candidates
    alpha: npt.NDArray[np.float64]
    beta: npt.NDArray[np.float64]
    value: npt.NDArray[np.float64]
    # (n, 6): the stored posteriors they come from (``protocol.pools.Pool.stored``); None:
    # none were read.
    stored: npt.NDArray[np.float64] | None = None
    # The users' population prior the ranking read (``relevance.population``); None: none.
    population: Population | None = None


@dataclass(frozen=True)
class RankedRequest:
    """A request's ranking, whether it is degraded, the context cell it was for, the policy
    that ranked it (name and version; the popular fallback's version is the configured
    policy's), and what it was ranked from (None for the popular fallback, which ranks
    nothing)."""

    ranking: Ranking
    degraded: bool
    cell: str
    policy: str
    ranked_from: RankedFrom | None = None
    policy_version: str | None = None
    # The live deployment's model version when it ranked (None: the live one at answering).
    model_version: str | None = None
    # What the answer leaves beside the decision log: its context (``protocol.contexts``)
    # and the shadow policy's run on it (``origin.offline.shadow``).
    log_context: bool = False
    shadowed: bool = False

    def label(self, origin: Origin) -> str:
        """``name/version`` of the policy, as responses, headers and decisions carry it."""
        return f"{self.policy}/{self.policy_version or origin.settings.policy_version}"

    def model(self, origin: Origin) -> str:
        """The model version the answer, its pool and its decision carry."""
        return self.model_version or origin.model_version


def personalize_response(
    origin: Origin,
    index: ItemIndex,
    body: PersonalizeRequest,
    ranking: Ranking,
    *,
    started: float,
    degraded: bool,
    policy: str,
    model_version: str,
) -> PersonalizeResponse:
    return PersonalizeResponse(
        request_id=str(uuid.uuid4()),
        user_id=body.user_id,
        items=ranked_items(index, ranking, explain=body.options.include_explanation),
        metadata=ResponseMetadata(
            latency_ms=elapsed_ms(started),
            tier="origin",
            ranked_by="origin",
            cache_hit=False,
            exploration_applied=ranking.exploration_applied,
            model_version=model_version,
            policy=policy,
            degraded=degraded,
        ),
    )


def decision_of(
    origin: Origin,
    response: PersonalizeResponse,
    ranked: RankedRequest,
    *,
    personal: bool,
    page: str,
    at_ms: int,
) -> Decision:
    """The decision record of an answer the origin serves itself at ``at_ms``."""
    return Decision(
        request_id=response.request_id,
        user_id=response.user_id,
        audience=audience.USER if personal else f"{audience.SEGMENT}:shared",
        context=ranked.cell,
        page=page,
        at_ms=at_ms,
        served_by="origin",
        policy=ranked.policy,
        policy_version=ranked.label(origin).partition("/")[2],
        model_version=ranked.model(origin),
        shown=tuple(
            Shown(item.item_id, item.rank, item.score, r.propensity)
            for item, r in zip(response.items, ranked.ranking.items, strict=True)
        ),
    )


def log_beside(
    origin: Origin,
    index: ItemIndex,
    body: PersonalizeRequest,
    response: PersonalizeResponse,
    ranked: RankedRequest,
) -> None:
    """What an answer leaves beside the decision log, each built off the request path: its
    context's record (``protocol.contexts``) when sampled for the context log, and the
    shadow policy's sample (``origin.offline.shadow``)."""
    inputs, ranked_from = ranked.ranking.inputs, ranked.ranked_from
    if inputs is None or ranked_from is None:
        return
    ids = index.item_ids[ranked_from.candidates.rows]
    at_ms, user_id, rid = origin.now_ms(), response.user_id, response.request_id
    live = origin.live
    prior_var = origin.prior_var(index, live, ranked_from.population)
    count = body.constraints.count

    def record() -> tuple[RankedContext, npt.NDArray[np.float32]]:
        return context_record(
            inputs,
            ids,
            request_id=rid,
            user_id=user_id,
            at_ms=at_ms,
            count=count,
            prior_var=prior_var,
        )

    if ranked.log_context and origin.contexts is not None:
        contexts = origin.contexts
        contexts.log(lambda: EncodedDecision(user_id, encode_context(record()[0])))
    if ranked.shadowed and origin.shadow is not None:
        shown = [item.item_id for item in response.items]
        origin.shadow.submit(record, shown, live.policy)


def answered(
    origin: Origin,
    index: ItemIndex,
    body: PersonalizeRequest,
    ranked: RankedRequest,
    request: Request,
    *,
    started: float,
    personal: bool,
) -> tuple[PersonalizeResponse, dict[str, str]]:
    """The answer to a ranked request and its headers (who it may be served to, and what an
    edge needs to log its decisions); the origin logs the decision itself unless the caller
    says it will (``DECISION_BY_HEADER``)."""
    label = ranked.label(origin)
    response = personalize_response(
        origin,
        index,
        body,
        ranked.ranking,
        started=started,
        degraded=ranked.degraded,
        policy=label,
        model_version=ranked.model(origin),
    )
    # The popular fallback ranks nothing (and a policy may be named "popular" too).
    built_for_user = personal and ranked.ranked_from is not None
    headers = {
        # Who the answer may be served to (protocol.audience): edges cache by it.
        AUDIENCE_HEADER: audience.header_value(built_for_user),
        CONTEXT_HEADER: ranked.cell,
        POLICY_HEADER: label,
        PROPENSITIES_HEADER: propensities_header(r.propensity for r in ranked.ranking.items),
    }
    log_beside(origin, index, body, response, ranked)
    if request.headers.get(DECISION_BY_HEADER) is None:
        page, served_ms = body.context.page_type.value, origin.now_ms()
        origin.decisions.log(
            lambda: decision_of(
                origin, response, ranked, personal=built_for_user, page=page, at_ms=served_ms
            )
        )
    return response, headers
