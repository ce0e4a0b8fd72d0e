"""What the origin's answers mean to the edge, beyond their bodies: the audience a
personalize answer was built for, its context cell, policy and propensities (the decision
log's), and the segment an explanation was made for. Read from the headers the origin
sends (``protocol.audience``, ``protocol.decisions``, ``protocol.api``)."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from protocol.api import SEGMENT_SCOPE, ExplainResponse, PersonalizeResponse
from protocol.audience import AUDIENCE_HEADER, Audience, declared
from protocol.decisions import (
    CONTEXT_HEADER,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    parse_propensities,
)
from protocol.segments import Segment


@dataclass(frozen=True, slots=True)
class Personalized:
    """The origin's personalize answer, the audience it was built for, and what the edge's
    decision log needs of it: the context cell, the policy and each item's propensity."""

    answer: PersonalizeResponse
    audience: Audience
    context: str = ""
    policy: str = ""
    propensities: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Explained:
    """The origin's explanation, and the segment it was made for when it used nothing of the
    user's but that segment (``EXPLAIN_SCOPE_HEADER``); None: the user's own."""

    answer: ExplainResponse
    segment: Segment | None


def read_personalized(
    answer: PersonalizeResponse, headers: httpx.Headers, *, asked: Audience, user_id: str
) -> Personalized:
    """An answer with what its headers say: the audience the origin built it for
    (``protocol.audience.declared``), its context cell, policy and propensities."""
    return Personalized(
        answer,
        declared(headers.get(AUDIENCE_HEADER), asked=asked, user_id=user_id),
        context=headers.get(CONTEXT_HEADER, ""),
        policy=headers.get(POLICY_HEADER, ""),
        propensities=parse_propensities(headers.get(PROPENSITIES_HEADER), len(answer.items)),
    )


def explained_segment(scope: str | None) -> Segment | None:
    """The segment of an ``EXPLAIN_SCOPE_HEADER`` value (``segment:<segment>``), else None."""
    if scope is None:
        return None
    kind, _, name = scope.partition(":")
    if kind != SEGMENT_SCOPE:
        return None
    try:
        return Segment(name)
    except ValueError:
        return None
