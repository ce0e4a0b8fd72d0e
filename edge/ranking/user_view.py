"""What an edge knows about a user from the feedback that passed through it.

Enough for the segment cache key: the user's segment (interactions over the last 24 hours), their
last few interacted items, and how long ago the last one was. Bounded: the least
recently seen users are forgotten first, and a forgotten user is simply ``new`` again.

An interaction counts from when it happened: the feedback's own time when it gives one
(a client that buffered events offline sends them later; the body's validation bounds
it), else when the edge heard of it; never later than now.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from protocol.segments import POWER_MIN_PER_DAY, Segment, segment_for

DAY_S = 86_400
# The last 11 interactions tell a power user (11 or more within a day) exactly, and hold
# the last 5 that key their entries; more would only cost memory (about 1.7 KB per user).
HISTORY = POWER_MIN_PER_DAY


@dataclass(frozen=True, slots=True)
class UserSnapshot:
    segment: Segment
    recent_items: tuple[str, ...]
    # Seconds since the user's last interaction; None when the edge knows of none.
    since_interaction_s: float | None


_NEW = UserSnapshot(Segment.NEW, (), since_interaction_s=None)


class UserViews:
    def __init__(self, *, max_users: int, clock: Callable[[], float]) -> None:
        self._max_users = max_users
        self._clock = clock
        self._history: OrderedDict[str, deque[tuple[float, str]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._history)

    def __contains__(self, user_id: str) -> bool:
        """Whether the edge has seen the user's feedback (and still remembers it)."""
        return user_id in self._history

    def record(
        self, user_id: str, item_ids: Sequence[str], at: Sequence[float | None] = ()
    ) -> None:
        """Remember interactions the origin has accepted, each at its time in ``at``
        (seconds since the epoch; None or missing: now), the newest ``HISTORY`` kept."""
        now = self._clock()
        history = self._history.get(user_id)
        if history is None:
            history = deque(maxlen=HISTORY)
            self._history[user_id] = history
            if len(self._history) > self._max_users:
                self._history.popitem(last=False)
        else:
            self._history.move_to_end(user_id)
        times = [min(now, t) if t is not None else now for t in at]
        times += [now] * (len(item_ids) - len(times))
        fresh = sorted(zip(times, item_ids, strict=False), key=_time)  # stable: in order
        if history and fresh and fresh[0][0] < history[-1][0]:
            fresh = sorted([*history, *fresh], key=_time)  # some older than what is held
            history.clear()
        history.extend(fresh)

    def snapshot(self, user_id: str) -> UserSnapshot:
        history = self._history.get(user_id)
        if not history:
            return _NEW
        now = self._clock()
        last_day = sum(1 for ts, _ in history if now - ts < DAY_S)
        return UserSnapshot(
            segment=segment_for(last_day, ever_seen=True),
            recent_items=tuple(item for _, item in history),
            since_interaction_s=now - history[-1][0],
        )


def _time(interaction: tuple[float, str]) -> float:
    return interaction[0]
