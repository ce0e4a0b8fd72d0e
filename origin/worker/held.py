"""Feedback events a worker holds back for their user's freshness tier
(``origin.worker.freshness_tiers``): per user, when they are due and what is held, in
stream order. Their entries stay pending in Redis until applied, so a crash loses
nothing; the worker renews its claim on them (``by_stream``) so that no other worker
takes them for a dead worker's.

Users are found by when they are due (a heap), not by scanning them all: a worker behind
may hold a hundred thousand users, and it asks what is due on every batch (a scan took
19 ms a batch at 120,000 held users in ``benchmarks.freshness_overload``). ``due`` takes
a ``limit``, so that a worker that catches up applies what it held a batch's worth at a
time between its reads, rather than reading nothing while it applies everything at once.
"""

from __future__ import annotations

import heapq
import itertools

from origin.event_streams.streams import StreamEntry
from protocol.events import FeedbackEvent

Held = tuple[StreamEntry, FeedbackEvent]


class HeldEvents:
    def __init__(self) -> None:
        # user -> (due, their mark in the queue, what is held in stream order)
        self._by_user: dict[str, tuple[float, int, list[Held]]] = {}
        # (due, order held, user) for every user held; a released user's stays until it
        # comes up (and is skipped then). Ties go in the order the users were held.
        self._queue: list[tuple[float, int, str]] = []
        self._order = itertools.count()
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
        user = event.user_id
        held = self._by_user.get(user)
        if held is None:
            held = (due, next(self._order), [])
            self._by_user[user] = held
            heapq.heappush(self._queue, (due, held[1], user))
        held[2].append((entry, event))
        self._keys.add(entry.key)

    def due(self, now: float, *, everything: bool = False, limit: int | None = None) -> list[str]:
        """The users whose held events are due at ``now`` (every user's with
        ``everything``), the earliest due first, at most ``limit`` of them (None: all)."""
        out: list[str] = []
        seen: list[tuple[float, int, str]] = []
        queue = self._queue
        while queue and (limit is None or len(out) < limit):
            at, order, user = queue[0]
            if not everything and at > now:
                break
            heapq.heappop(queue)
            held = self._by_user.get(user)
            if held is None or held[1] != order:
                continue  # released since (and perhaps held again, under a later mark)
            out.append(user)
            seen.append((at, order, user))
        # Still held until released: back in the queue (a failed apply keeps them due).
        for mark in seen:
            heapq.heappush(queue, mark)
        return out

    def of(self, users: list[str]) -> list[Held]:
        """What ``users`` have held, user by user, each in stream order."""
        return [item for user in users for item in self._by_user[user][2]]

    def release(self, users: list[str]) -> None:
        """Forget what ``users`` had held (applied and acknowledged)."""
        for user in users:
            _, _, items = self._by_user.pop(user)
            self._keys.difference_update(entry.key for entry, _ in items)

    def by_stream(self) -> dict[str, list[bytes]]:
        """The held entries' ids by stream."""
        out: dict[str, list[bytes]] = {}
        for _, _, items in self._by_user.values():
            for entry, _ in items:
                out.setdefault(entry.stream, []).append(entry.entry_id)
        return out
