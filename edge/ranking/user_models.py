"""The users an edge can rank for itself: for each user it serves, the model the stream
workers last wrote and their stated preferences, both pushed by the sync stream
(``sync.messages.UserUpdate``) or, for a user the edge has heard nothing complete of,
fetched from the origin once (``protocol.user_model_wire``).

A user is ready to be ranked at the edge (``ready``) once their preferences are known: a
model alone is not enough, since ranking without a hidden category's preference would
show it. Preferences have their own version (``protocol.user_model_wire``), which only grows:
the edge keeps the newest it heard of. A preference change makes the edge forget the
preferences it holds (``forget_preferences``) but not their version, so that an update
read before the change and delivered after it cannot bring them back; the next update or
fetch brings the new ones.

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
    # None until known (pushed or fetched): the user cannot be ranked at the edge before.
    preferences: Mapping[str, float] | None = None
    # The version of the preferences held, or of the ones forgotten (-1: none heard of).
    preferences_version: int = -1


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

    def apply(
        self,
        user_id: str,
        version: int,
        model: UserModel,
        preferences: Mapping[str, float] | None = None,
        preferences_version: int = -1,
    ) -> bool:
        """Hold ``model`` as the user's at ``version`` unless a model of that version or a
        newer one is held, and ``preferences`` unless ones of that version or newer are (or
        were, and a change forgot them); False when nothing changed."""
        if model.dim != self._dim:
            raise ValueError(f"a user model of dimension {model.dim}, the edge's is {self._dim}")
        held = self._held.get(user_id)
        newer_model = held is None or version > held.version
        newer_preferences = preferences is not None and (
            held is None or preferences_version > held.preferences_version
        )
        if not (newer_model or newer_preferences):
            return False
        fresh = held if held is not None else HeldModel(version, model)
        if newer_model:
            fresh = replace(fresh, version=version, model=model)
        if newer_preferences:
            assert preferences is not None
            fresh = replace(
                fresh, preferences=dict(preferences), preferences_version=preferences_version
            )
        self._put(user_id, fresh)
        return True

    def complete(
        self,
        user_id: str,
        version: int,
        model: UserModel,
        preferences: Mapping[str, float],
        preferences_version: int = 0,
    ) -> HeldModel:
        """What the origin answered for the user (their state as of ``version``, their
        preferences as of ``preferences_version``): each unless a newer one is held, or
        was (an answer read before a preference change, arriving after it, leaves the user
        without preferences: not ready)."""
        self.apply(user_id, version, model, preferences, preferences_version)
        return self._held[user_id]

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

    def forget_preferences(self, user_id: str) -> None:
        """The user changed their preferences: the ones held are no longer theirs (their
        version is kept: nothing older is taken again)."""
        held = self._held.get(user_id)
        if held is not None and held.preferences is not None:
            self._put(user_id, replace(held, preferences=None))

    def forget(self, user_id: str) -> None:
        held = self._held.pop(user_id, None)
        if held is not None:
            self._bytes -= _cost(held)


def _cost(held: HeldModel) -> int:
    model = held.model
    preferences = held.preferences or {}
    stated = sum(len(c) + PREFERENCE_OVERHEAD_BYTES for c in preferences)
    return int(model.mean.nbytes + model.var.nbytes) + stated + ENTRY_OVERHEAD_BYTES
