"""Feedback events a worker holds back for their user's freshness tier
(``origin.worker.freshness_tiers``): per user, when they are due and what is held, in
stream order. Their entries stay pending in Redis until applied, so a crash loses
nothing; the worker renews its claim on them (``by_stream``) so that no other worker
takes them for a dead worker's.
"""

from __future__ import annotations

from origin.worker.streams import StreamEntry
from protocol.events import FeedbackEvent

Held = tuple[StreamEntry, FeedbackEvent]


class HeldEvents:
    def __init__(self) -> None:
        # user -> (due, in stream order)
        self._by_user: dict[str, tuple[float, list[Held]]] = {}
        # Held entries by (stream, entry id): ids are per stream, and two streams hand out
        # the same id in the same millisecond.
        self._keys: set[tuple[str, bytes]] = set()

    def __len__(self) -> int:
        """Entries held."""
        return len(self._keys)

    def __contains__(self, user: str) -> bool:
        """Whether anything of ``user``'s is held (their later events queue behind it)."""
        return user in self._by_user

    def holds(self, entry: StreamEntry) -> bool:
        return entry.key in self._keys

    def hold(self, entry: StreamEntry, event: FeedbackEvent, due: float) -> None:
        """Hold ``event`` behind what its user has held; ``due`` counts only for a user
        with nothing held yet (the first held event sets when they all are due)."""
        at, items = self._by_user.get(event.user_id, (due, []))
        items.append((entry, event))
        self._by_user[event.user_id] = (at, items)
        self._keys.add(entry.key)

    def due(self, now: float, *, everything: bool = False) -> list[str]:
        """The users whose held events are due at ``now`` (every user's with
        ``everything``)."""
        return [u for u, (at, _) in self._by_user.items() if everything or at <= now]

    def of(self, users: list[str]) -> list[Held]:
        """What ``users`` have held, user by user, each in stream order."""
        return [item for user in users for item in self._by_user[user][1]]

    def release(self, users: list[str]) -> None:
        """Forget what ``users`` had held (applied and acknowledged)."""
        for user in users:
            _, items = self._by_user.pop(user)
            self._keys.difference_update(entry.key for entry, _ in items)

    def by_stream(self) -> dict[str, list[bytes]]:
        """The held entries' ids by stream."""
        out: dict[str, list[bytes]] = {}
        for _, items in self._by_user.values():
            for entry, _ in items:
                out.setdefault(entry.stream, []).append(entry.entry_id)
        return out
