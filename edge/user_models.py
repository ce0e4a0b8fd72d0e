"""The users an edge can rank for itself: for each user it serves, the model the stream
workers last wrote (pushed by the sync stream, ``sync.messages.UserUpdate``) and their
stated preferences (fetched from the origin once, ``protocol.user_state``).

A user is ready to be ranked at the edge (``ready``) once their preferences are known: a
model pushed by the sync stream alone is not enough, since ranking without a hidden
category's preference would show it. A preference change drops the user (``forget``), and
the edge asks again.

Bounded by a memory budget: least recently used users go first. Versions never go back:
an update older than (or as old as) the model held is ignored, so a redelivered or
reordered message cannot undo a newer one. A model of another dimension than the edge's
(a catalog of another model) is refused.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace

from relevance.user_model import UserModel

# What one held user costs beyond its model's numbers: the key, the entry, the model and
# its arrays' headers, the table's slot (measured with tracemalloc on CPython 3.11 over
# 10,000 users decoded from their updates: 448 bytes).
ENTRY_OVERHEAD_BYTES = 450
# Per stated preference: its key and value objects and its slot in a dict.
PREFERENCE_OVERHEAD_BYTES = 120


@dataclass(frozen=True, slots=True)
class HeldModel:
    version: int
    model: UserModel
    # None until fetched from the origin: the user cannot be ranked at the edge before.
    preferences: Mapping[str, float] | None = None


class UserModels:
    def __init__(self, budget_bytes: int, dim: int) -> None:
        if budget_bytes <= 0:
            raise ValueError(f"budget_bytes must be positive, not {budget_bytes}")
        self._budget = budget_bytes
        self._dim = dim
        self._held: OrderedDict[str, HeldModel] = OrderedDict()
        self._bytes = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, user_id: str) -> bool:
        return user_id in self._held

    @property
    def dim(self) -> int:
        """The dimension of the models held (the catalog's)."""
        return self._dim

    @property
    def bytes(self) -> int:
        """What the held models cost, by this table's estimate."""
        return self._bytes

    def get(self, user_id: str) -> HeldModel | None:
        """The user's model, if held (and now the most recently used)."""
        held = self._held.get(user_id)
        if held is not None:
            self._held.move_to_end(user_id)
        return held

    def peek(self, user_id: str) -> HeldModel | None:
        """The user's model, if held, leaving the order of eviction as it is (an operator
        looking must not keep a user held)."""
        return self._held.get(user_id)

    def apply(self, user_id: str, version: int, model: UserModel) -> bool:
        """Hold ``model`` as the user's at ``version``; False (nothing changed) when a model
        of that version or a newer one is held already."""
        if model.dim != self._dim:
            raise ValueError(f"a user model of dimension {model.dim}, the edge's is {self._dim}")
        held = self._held.get(user_id)
        if held is not None and held.version >= version:
            return False
        preferences = held.preferences if held is not None else None
        self._put(user_id, HeldModel(version, model, preferences))
        return True

    def complete(
        self, user_id: str, version: int, model: UserModel, preferences: Mapping[str, float]
    ) -> HeldModel:
        """What the origin answered for the user (their state as of ``version``): the
        preferences always, the model unless a newer one is held already."""
        if model.dim != self._dim:
            raise ValueError(f"a user model of dimension {model.dim}, the edge's is {self._dim}")
        held = self._held.get(user_id)
        if held is not None and held.version > version:
            fresh = replace(held, preferences=dict(preferences))
        else:
            fresh = HeldModel(version, model, dict(preferences))
        self._put(user_id, fresh)
        return fresh

    def ready(self, user_id: str) -> HeldModel | None:
        """The user's model and preferences when both are known (now the most recently
        used), else None."""
        held = self.get(user_id)
        return held if held is not None and held.preferences is not None else None

    def _put(self, user_id: str, held: HeldModel) -> None:
        before = self._held.get(user_id)
        if before is not None:
            self._bytes -= _cost(before)
        self._held[user_id] = held
        self._held.move_to_end(user_id)
        self._bytes += _cost(held)
        while self._bytes > self._budget and len(self._held) > 1:
            _, gone = self._held.popitem(last=False)
            self._bytes -= _cost(gone)
            self.evicted += 1

    def forget(self, user_id: str) -> None:
        held = self._held.pop(user_id, None)
        if held is not None:
            self._bytes -= _cost(held)


def _cost(held: HeldModel) -> int:
    model = held.model
    preferences = held.preferences or {}
    stated = sum(len(c) + PREFERENCE_OVERHEAD_BYTES for c in preferences)
    return int(model.mean.nbytes + model.var.nbytes) + stated + ENTRY_OVERHEAD_BYTES
