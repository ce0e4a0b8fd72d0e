"""A user's explicit category preferences (the preference signal) and how ranking
uses them.

Stored in ``u:{id}:pref`` (``origin.learned.stated_preferences``: the layout, reads, the
version), a fenced hash. A statement about a category replaces the previous
one (the latest explicit word wins), strength 0 clears it, and a user holds at most
``MAX_CATEGORIES`` of them.

A change is a read-modify-write (the cap needs the current set), done under the per-user
preference lock (5 s). Lock alone is not enough: a holder paused past its
lease would still write. So the hash is a fenced hash (``coordination.fencing``): the read
registers the lease's fencing token and the write (one script, the whole hash at once) is
refused when a later holder has read or written since.

Ranking (``relevance.preferences``, one rule for the origin and an edge's pool ranking): a
negative preference of strength 1 removes the category from the candidates (as a request
filter would); any other preference shifts the category's items' scores by
``strength * SHIFT_PER_STRENGTH``, up or down. Here only ``by_code``: the strengths by the
catalog's category codes, as the origin's pipeline ranks them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from coordination.fencing import FencedHashes
from coordination.lock import Lock, locked
from coordination.retry import RetryPolicy
from origin.exceptions import TooManyPreferences
from origin.learned.stated_preferences import Strengths, decode, encode
from protocol import keys
from protocol.api import CategoryPreference, Direction
from redis_client.client import RedisClient

# The preference lock: a user's preference change, 5 s.
LOCK_TTL_MS = 5_000
# The critical section is two round trips: many short waits, at most ~1.6 s in all, so a
# request that cannot get the lock answers 409 well before the holder's lease would lapse.
LOCK_RETRY = RetryPolicy(attempts=20, base_delay_s=0.005, max_delay_s=0.1)
MAX_CATEGORIES = 50


@dataclass(frozen=True, slots=True)
class CategoryChange:
    """What the user said about one category."""

    category: str
    direction: Direction
    strength: float  # [0, 1]; 0 clears the category

    @property
    def signed(self) -> float:
        return self.strength if self.direction == "positive" else -self.strength


def changed(current: Strengths, change: CategoryChange, cap: int) -> dict[str, float]:
    """The preferences after ``change``: the category's strength replaced (removed at 0).
    Raises ``TooManyPreferences`` for a new category when ``cap`` are already held."""
    updated = dict(current)
    if change.strength == 0:
        updated.pop(change.category, None)
        return updated
    if change.category not in updated and len(updated) >= cap:
        raise TooManyPreferences(change.category, cap)
    updated[change.category] = change.signed
    return updated


def by_code(strengths: Strengths, code_of: Callable[[str], int | None]) -> dict[int, float]:
    """Strengths by catalog category code; categories the catalog no longer has drop out."""
    out: dict[int, float] = {}
    for category, strength in strengths.items():
        code = code_of(category)
        if code is not None:
            out[code] = strength
    return out


def listed(strengths: Strengths) -> list[CategoryPreference]:
    """The API's view, by category name."""
    return [
        CategoryPreference(
            category=category,
            direction="positive" if strength > 0 else "negative",
            strength=abs(strength),
        )
        for category, strength in sorted(strengths.items())
    ]


class PreferenceStore:
    """Reads and fenced writes of users' preferences, and changes under the user's lock."""

    def __init__(
        self,
        redis: RedisClient,
        lock: Lock,
        *,
        cap: int = MAX_CATEGORIES,
        retry: RetryPolicy = LOCK_RETRY,
        ttl_ms: int = LOCK_TTL_MS,
    ) -> None:
        self._redis = redis
        self._lock = lock
        self._cap = cap
        self._retry = retry
        self._ttl_ms = ttl_ms
        self._hashes = FencedHashes(redis)

    async def read(self, user_id: str) -> dict[str, float]:
        """The current preferences, for anyone (no token registered)."""
        return decode(await self._redis.hgetall(keys.user_preferences(user_id)))

    async def read_as(self, user_id: str, fencing: int) -> dict[str, float]:
        """The current preferences, read by the holder of ``fencing``; raises
        ``StaleFencingToken`` if a later holder has used the store."""
        fields, _ = await self._hashes.read_as(keys.user_preferences(user_id), fencing)
        return decode(fields)

    async def write(self, user_id: str, strengths: Strengths, fencing: int) -> None:
        """Replace the user's preferences with ``strengths`` in one script; raises
        ``StaleFencingToken`` (nothing written) if a later holder has used the store."""
        await self._hashes.replace(keys.user_preferences(user_id), encode(strengths), fencing)

    async def change(self, user_id: str, change: CategoryChange) -> dict[str, float]:
        """Apply ``change`` under the user's lock and return the preferences after it.

        Raises ``LockNotAcquired`` (another change held the lock through every retry),
        ``StaleFencingToken`` (this lease lapsed and a later holder used the store),
        ``TooManyPreferences`` and ``RedisError``; in each case nothing was written.
        """
        resource = keys.user_preferences_resource(user_id)
        async with locked(self._lock, resource, self._ttl_ms, retry=self._retry) as lease:
            current = await self.read_as(user_id, lease.fencing)
            updated = changed(current, change, self._cap)
            if updated != current:
                await self.write(user_id, updated, lease.fencing)
        return updated
