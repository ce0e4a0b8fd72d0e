"""What an edge logs of every answer it serves (``protocol.decisions``): the request id it
gave the answer, who saw it, the items in the order served, and from the entry they came
from the context cell, the policy and each item's score and propensity (computed by the
origin for the fill: a cached ranking served again is the same draw of the same policy).

``served`` returns a closure that builds the record later, in the decision log's flush
(``sync.decision_log``): the hit path only puts the closure in a buffer. An item served at
another position than it held in the entry (the caller excluded some) keeps the
propensity of its place in the fill; the popular list's answers are deterministic
(propensity 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from edge.cache import CachedItem, Entry
from protocol.audience import Personal
from protocol.decisions import Decision, Shown

POPULAR_POLICY = "popular/1"


def served(
    entry: Entry,
    items: Sequence[CachedItem],
    *,
    request_id: str,
    user_id: str,
    page: str,
    served_by: str,
    at_ms: int,
) -> Callable[[], Decision]:
    """The record of serving ``items`` (taken from ``entry``) to ``user_id``, built when
    called."""

    def build() -> Decision:
        place = {id(item): n for n, item in enumerate(entry.items)}
        shown = []
        for position, item in enumerate(items, start=1):
            n = place.get(id(item))
            score = entry.scores[n] if n is not None and n < len(entry.scores) else 0.0
            propensity = (
                entry.propensities[n] if n is not None and n < len(entry.propensities) else 1.0
            )
            shown.append(Shown(item.item_id, position, float(score), float(propensity)))
        policy, _, version = (entry.policy or POPULAR_POLICY).partition("/")
        audience = entry.audience
        return Decision(
            request_id=request_id,
            user_id=user_id,
            audience="user" if isinstance(audience, Personal) else f"segment:{audience.segment}",
            context=entry.context,
            page=page,
            at_ms=at_ms,
            served_by=served_by,
            policy=policy,
            policy_version=version,
            model_version=entry.model_version,
            shown=tuple(shown),
        )

    return build
