"""Every deduplication key and how long it lives, in one place (the deduplication
keys).

A dedup mark says "this was already done"; a retry that finds it changes nothing. The
deduplication keys are four; this project keys two of them differently, by the interaction
id that every feedback event carries (client-sent or derived,
``protocol.events.derive_interaction_id``):

designed key                                  TTL    here
--------------------------------------------  -----  -----------------------------------------
embed_update:{interaction_id}                 1 h    feedback_seen (TTL: settings
                                                     PERSO_FEEDBACK_DEDUP_TTL_S, 1 h)
bandit_dedup:{item}:{context}:{time bucket}   60 s   bandit_applied (BANDIT_APPLIED_TTL_S, 1 h)
feedback_dedup:{user_id}:{item_id}:{action}   60 s   feedback_dedup, defined, not used yet
request_dedup:{request_id}                    30 s   request_dedup, defined, not used yet

``feedback_seen`` marks an accepted interaction in the slot of its events partition and is
checked in the same script as the XADD (``origin.event_streams.event_log``); the worker's window of
applied observations (``origin.learned.user_models``, the last 50) absorbs what slips
through, so a user's model moves once per interaction. ``bandit_applied`` is set per context
cell and observation (a closed decision, or an interaction without one) by the script that
updates the item posteriors (``origin.learned.posteriors``): a retry is absorbed whenever it
comes, not only within the seed's 60 s time bucket.

Not used yet: ``feedback_dedup`` would drop a repeated (user, item, action) within 60 s even
under a new interaction id, which changes what the learners see, and its user slot differs
from the events partition's, so it cannot join the intake script under Redis Cluster.
``request_dedup`` needs the origin to cache whole responses by request id. Both are here so
that whoever adds them spells the keys and TTLs the seed gives.

In the key names below (unlike the seed's placeholders above) the part in braces is the
Redis Cluster hash tag: a mark lives in the slot of the data that the script setting it
also writes. Single-flight records (``protocol.keys.idempotency``)
are results, not marks, and stay with the other keys.
"""

from __future__ import annotations

# --- marks in use ------------------------------------------------------------------------


def feedback_seen(partition: int, user_id: str, interaction_id: str) -> str:
    """Dedup mark of a user's accepted interaction, in the slot of its stream so that the
    check and the XADD run in one script; lives for the configured dedup TTL. The user is
    part of it: another user's interaction id must never silence this user's feedback."""
    return f"events:{{{partition}}}:seen:{user_id}:{interaction_id}"


def bandit_applied(segment: str, interaction_id: str) -> str:
    """Marks an observation as applied to the cell's item posteriors (the bandit
    update's deduplication key, by observation rather than by a time bucket)."""
    return f"bandit:{{{segment}}}:applied:{interaction_id}"


# How long an applied-mark lives: longer than any retry of a feedback request.
BANDIT_APPLIED_TTL_S = 3600

# --- deduplication keys defined but not used yet -----------------------------------------


def feedback_dedup(user_id: str, item_id: str, action: str) -> str:
    """Feedback deduplication: the request id of the user's last ``action`` on
    ``item_id``; in the user's slot, with the user's other keys."""
    return f"feedback_dedup:{{{user_id}}}:{item_id}:{action}"


# A repeated (user, item, action) within 60 s is the same feedback.
FEEDBACK_DEDUP_TTL_S = 60


def request_dedup(request_id: str) -> str:
    """Request deduplication: the cached response of a request, for its retries."""
    return f"request_dedup:{{{request_id}}}"


# A client retries within 30 s or not at all.
REQUEST_DEDUP_TTL_S = 30
