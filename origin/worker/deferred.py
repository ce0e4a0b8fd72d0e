"""Feedback events a worker defers for their user's freshness tier
(``origin.worker.freshness_tiers``): per user, when they are due and what is deferred, in
stream order. Their entries stay pending in Redis until applied, so a crash loses
nothing; the worker renews its claim on them (``by_stream``) so that no other worker
takes them for a dead worker's.

Users are found by when they are due (a heap), not by scanning them all: a worker behind
may defer a hundred thousand users, and it asks what is due on every batch (a scan took
19 ms a batch at 120,000 deferred users in ``benchmarks.freshness_overload``). ``due`` takes
a ``limit``, so that a worker that catches up applies what it deferred a batch's worth at a
time between its reads, rather than reading nothing while it applies everything at once.
"""

from __future__ import annotations

import heapq
import itertools

from origin.event_streams.streams import StreamEntry
from protocol.events import FeedbackEvent

Deferred = tuple[StreamEntry, FeedbackEvent]


class DeferredEvents:
    def __init__(self) -> None:
        # user -> (due, their mark in the queue, what is deferred in stream order)
        self._by_user: dict[str, tuple[float, int, list[Deferred]]] = {}
        # (due, order deferred, user) for every user deferred; a released user's stays until it
        # comes up (and is skipped then). Ties go in the order the users were deferred.
        self._queue: list[tuple[float, int, str]] = []
        self._order = itertools.count()
        # Deferred entries by (stream, entry id): ids are per stream, and two streams hand out
        # the same id in the same millisecond.
        self._keys: set[tuple[str, bytes]] = set()

    def __len__(self) -> int:
        """Entries deferred."""
        return len(self._keys)

    def __contains__(self, user: str) -> bool:
        """Whether anything of ``user``'s is deferred (their later events queue behind it)."""
        return user in self._by_user

    def defers(self, entry: StreamEntry) -> bool:
        return entry.key in self._keys

    def defer(self, entry: StreamEntry, event: FeedbackEvent, due: float) -> None:
        """Defer ``event`` behind what its user has deferred; ``due`` counts only for a user
        with nothing deferred yet (the first deferred event sets when they all are due)."""
        user = event.user_id
        pending = self._by_user.get(user)
        if pending is None:
            pending = (due, next(self._order), [])
            self._by_user[user] = pending
            heapq.heappush(self._queue, (due, pending[1], user))
        pending[2].append((entry, event))
        self._keys.add(entry.key)

    def due(self, now: float, *, everything: bool = False, limit: int | None = None) -> list[str]:
        """The users whose deferred events are due at ``now`` (every user's with
        ``everything``), the earliest due first, at most ``limit`` of them (None: all)."""
        out: list[str] = []
        seen: list[tuple[float, int, str]] = []
        queue = self._queue
        while queue and (limit is None or len(out) < limit):
            at, order, user = queue[0]
            if not everything and at > now:
                break
            heapq.heappop(queue)
            pending = self._by_user.get(user)
            if pending is None or pending[1] != order:
                continue  # released since (and perhaps deferred again, under a later mark)
            out.append(user)
            seen.append((at, order, user))
        # Still deferred until released: back in the queue (a failed apply keeps them due).
        for mark in seen:
            heapq.heappush(queue, mark)
        return out

    def of(self, users: list[str]) -> list[Deferred]:
        """What ``users`` have deferred, user by user, each in stream order."""
        return [item for user in users for item in self._by_user[user][2]]

    def release(self, users: list[str]) -> None:
        """Forget what ``users`` had deferred (applied and acknowledged)."""
        for user in users:
            _, _, items = self._by_user.pop(user)
            self._keys.difference_update(entry.key for entry, _ in items)

    def by_stream(self) -> dict[str, list[bytes]]:
        """The deferred entries' ids by stream."""
        out: dict[str, list[bytes]] = {}
        for _, _, items in self._by_user.values():
            for entry, _ in items:
                out.setdefault(entry.stream, []).append(entry.entry_id)
        return out
