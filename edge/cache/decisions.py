"""What an edge logs of every answer it serves (``protocol.decisions``): the request id it
gave the answer, who saw it, the items in the order served, and from the entry they came
from the context cell, the policy and each item's score and propensity (computed by the
origin for the fill: a cached ranking served again is the same draw of the same policy).

``served`` returns a closure that builds the record later, in the decision log's flush
(``decision_log.writer``): the hit path only puts the closure in a buffer. An item served at
another position than it held in the entry (the caller excluded some) keeps the
propensity of its place in the fill; the popular list's answers are deterministic
(propensity 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from edge.cache.entry import CachedItem, Entry
from protocol.audience import SEGMENT, USER, Personal
from protocol.decisions import EncodedDecision, encode_fields

POPULAR_POLICY = "popular/1"


def served_by(region: str) -> str:
    """How the decision log names the edges of ``region``."""
    return f"edge:{region}"


def served(
    entry: Entry,
    items: Sequence[CachedItem],
    *,
    request_id: str,
    user_id: str,
    page: str,
    served_by: str,
    at_ms: int,
) -> Callable[[], EncodedDecision]:
    """The record of serving ``items`` (taken from ``entry``) to ``user_id``, built and
    encoded when called (straight into its wire form: an edge logs every hit, so no
    intermediate objects)."""

    def build() -> EncodedDecision:
        cached = entry.items
        scores, propensities = entry.scores, entry.propensities
        shown: list[list[object]] = []
        n = 0
        for position, item in enumerate(items, start=1):
            # Served items are the entry's in its order, some skipped (exclusions, count):
            # one forward walk finds each one's place in the fill.
            while n < len(cached) and cached[n] is not item:
                n += 1
            if n == len(cached):  # not in order after all: look it up
                n = next((k for k, c in enumerate(cached) if c is item), len(cached))
            score = float(scores[n]) if n < len(scores) else 0.0
            propensity = float(propensities[n]) if n < len(propensities) else 1.0
            shown.append([item.item_id, position, score, propensity])
        policy, _, version = (entry.policy or POPULAR_POLICY).partition("/")
        audience = entry.audience
        return EncodedDecision(
            user_id,
            encode_fields(
                request_id=request_id,
                user_id=user_id,
                audience=USER
                if isinstance(audience, Personal)
                else f"{SEGMENT}:{audience.segment}",
                context=entry.context,
                page=page,
                at_ms=at_ms,
                served_by=served_by,
                policy=policy,
                policy_version=version,
                model_version=entry.model_version,
                shown=shown,
                ranking_id=entry.ranking_id,
            ),
        )

    return build
