"""What accepted feedback changes, besides the event appended for the embedding workers:
the user's recent interactions (session state and emotional signals derive from them) and
the bandit of the context segment each interaction happened in.

``learn`` is pure: from the events of one request and the user's state before them, the
interactions to record and the bandit observations to apply. The features of an
observation are those the ranking saw for that (user, item): the user's profile as it was
before the interaction, the item's columns, the device and local time of the user's last
request (feedback carries no context of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from origin.bandit import reward_of
from origin.context_features import context_segment, extract, local_time, profile_of
from origin.item_index import ItemIndex
from origin.posterior_store import Observation
from origin.user_state import Interaction, UserState
from protocol.events import FeedbackEvent


@dataclass(frozen=True)
class Learned:
    interactions: list[Interaction]
    observations: list[Observation]


def learn(
    events: Sequence[FeedbackEvent],
    state: UserState,
    index: ItemIndex,
    *,
    user_vector: npt.NDArray[np.float32] | None,
    session_idle_ms: int,
) -> Learned:
    interactions: list[Interaction] = []
    observations: list[Observation] = []
    for event in events:
        row = index.row_of.get(event.item_id)
        category = index.items[row].category if row is not None else None
        interactions.append(
            Interaction(
                interaction_id=event.interaction_id,
                item_id=event.item_id,
                action=event.action,
                timestamp_ms=event.timestamp_ms,
                category=category,
                duration_ms=event.duration_ms,
                position=event.position,
            )
        )
        if row is None:
            continue  # an item the catalog does not know has no features to learn from
        local = local_time(event.timestamp_ms, state.context.utc_offset_min or 0)
        profile = profile_of(
            state,
            index,
            device=state.context.device,
            local=local,
            now_ms=event.timestamp_ms,
            session_idle_ms=session_idle_ms,
            user_vector=user_vector,
        )
        features = extract(profile, index, np.array([row], np.intp))[0]
        observations.append(
            Observation(
                interaction_id=event.interaction_id,
                item_id=event.item_id,
                segment=context_segment(state.context.device, local),
                reward=reward_of(event.action, event.reward_override),
                features=features,
            )
        )
    return Learned(interactions, observations)
