"""When the edge's client of its origins (``edge.origins.client``) tries a failed call
again, and how long each attempt may take: pure rules over the call's kind, its failure,
its attempts and what is left of its budget.

A failed attempt is tried again (``retries`` times) only on an outage: a connect error (the
request never left), a timeout or 429/502/503/504; with several origins, at once on another
origin than the one that failed, with one, on it after a fully jittered pause. Personalize,
explain and token read (a token is signed, not stored). Feedback appends events, but the
origins share one Redis that recognises a repeated interaction (its ``interaction_id``,
sent or derived from the same body, which a retry sends unchanged), so a retry on any
origin completes what a lost answer left undone and repeats nothing. No retry starts once
less than 30% of the call's budget (``timeout_s``) is left; with another origin to fail over
to, an attempt may use 60% of it, so a hung origin leaves its replacement time.
"""

from __future__ import annotations

import random
from typing import Literal

import httpx

from edge.origins.link import status_outcome
from resilience.backoff import wait_s

Call = Literal[
    "personalize",
    "feedback",
    "explain",
    "pools",
    "pool_items",
    "item_vectors",
    "user_model",
    "token",
    "policy",
]
# What a failed attempt ended with: the transport's error, or the origin's outage status.
Failure = httpx.HTTPError | int

# Full jitter over base * 2**attempt: 0-20 ms before the first retry, enough to let a
# dropped connection be replaced without adding a visible delay.
BASE_BACKOFF_S = 0.02
# A retry needs this share of the call's budget still left to have a fair chance to finish.
MIN_BUDGET_TO_RETRY = 0.3
# An attempt with another origin to fail over to leaves this share of the budget to the
# retry: more than the 30% a retry needs to start, so scheduling cannot eat the margin.
FAILOVER_RESERVE = 0.4


def backoff_s(attempt: int, rng: random.Random, *, base_s: float = BASE_BACKOFF_S) -> float:
    """The pause before retrying after failed attempt ``attempt`` (0: the first): uniform
    over [0, base * 2**attempt] ("full jitter", ``resilience.backoff``), so the edges that
    saw the same failure do not come back to the origin all at the same instant."""
    return wait_s(attempt, rng.random(), base_s=base_s, jitter="full")


def should_retry(kind: Call, failure: Failure, attempt: int, *, retries: int = 1) -> bool:
    """May the call be tried again after its attempt ``attempt`` (0: the first) failed?"""
    if attempt >= retries:
        return False
    if isinstance(failure, httpx.ConnectError):
        # The connection was never made, so the request was never sent.
        return True
    # Every call is idempotent: personalize, explain and token read; feedback is
    # deduplicated by the origin.
    if isinstance(failure, int):
        return status_outcome(failure) == "outage"
    return isinstance(failure, httpx.TimeoutException)


def attempt_timeout_s(
    remaining_s: float, budget_s: float, *, failover: bool, reserve: float = FAILOVER_RESERVE
) -> float:
    """How long one attempt may take: what is left of the call's budget, less the
    ``reserve`` share of it when a failed attempt would be retried on another origin
    (unless that would leave the attempt less than the reserve itself)."""
    if not failover:
        return remaining_s
    kept = remaining_s - reserve * budget_s
    return kept if kept >= reserve * budget_s else remaining_s


def budget_allows_retry(
    remaining_s: float, budget_s: float, *, min_fraction: float = MIN_BUDGET_TO_RETRY
) -> bool:
    """Is enough of the call's budget left for another attempt to be worth starting?"""
    return remaining_s >= min_fraction * budget_s
