"""Rate limits shared by the edge processes of one PoP, kept in its store (the API's
rate-limit tiers: a Redis-based distributed counter).

With ``PERSO_EDGE_STORE=redis`` the PoP's processes share their entries in a PoP-local
Redis; they share their limits there too, so that a client spread over N processes gets
the tier's limit, not N times it. Each check is one Lua script over two keys: the user's
limit for the endpoint and the API key's total (``protocol.keys.rate_limit_user`` and
``rate_limit_total``, one hash tag: the region and the API key), each a GCRA theoretical
arrival time (``edge.limits.gcra``, whose arithmetic the script mirrors), taken from both or
neither. The script reads the time from the PoP store's own clock (``TIME``): the
processes' clocks differ by their skew, and a limit judged by several clocks would let a
request through early on the fastest one. Keys expire when their time has passed, so the
store holds only the users limited in the last burst's worth of time.

When the PoP store cannot be reached the check fails open: it is decided by this
process's own buckets (``edge.limits.rate_limit.RateLimiter``: each process then lets a client
have the whole limit, so up to N times it over the PoP), logged when it starts and ends,
and counted (``perso_edge_rate_limit_checks_total{decided_by="process"}``). A circuit
breaker keeps a PoP store that is down from costing every request a timeout: after a
failure, checks stay local for a second (doubling while probes fail, up to
``OPEN_MAX_S``), then one probe tries the store again. Refusing every request while the
store is away would turn a cache's outage into the API's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from redis.exceptions import RedisError

from edge.limits.gcra import SHORTFALL, US, Rate
from edge.limits.rate_limit import Decision, RateLimiter, Scope
from protocol import keys
from protocol.tiers import LIMITS, Tier, TierLimit
from redis_client.client import RedisClient
from resilience.circuit_breaker import CircuitBreaker

log = logging.getLogger(__name__)

# How long checks stay with the process's own buckets after the store failed, and at most
# (doubled by each failed probe).
OPEN_S = 1.0
OPEN_MAX_S = 8.0

_ALLOWED = Decision(allowed=True, retry_after_s=0.0, scope=None)


@dataclass
class LimitCounters:
    shared: int = 0  # checks the PoP store decided
    process: int = 0  # checks this process's own buckets decided (the store unreachable)
    store_errors: int = 0  # checks the store failed (each then decided by the process)


class PopRateLimiter:
    """``check()`` once per request, as ``RateLimiter.check``, against the PoP store."""

    # KEYS[1] the user's TAT   KEYS[2] the API key's total TAT (one hash tag)
    # ARGV[1] user interval µs   ARGV[2] user capacity   ARGV[3] total interval µs
    # ARGV[4] total capacity   ARGV[5] shortfall (tokens)   ARGV[6] now µs, '': TIME
    # Returns {1} when both were taken, {0, wait µs (text: an exact double), 'user' or
    # 'total'} when neither was. Lua numbers are doubles, as edge.gcra's floats: the same
    # operations in the same order give the same results.
    CHECK = """
local now
if ARGV[6] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[6])
end
local shortfall = tonumber(ARGV[5])
local function take(key, interval, capacity)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new = tat + interval
  local over = new - now - capacity * interval
  if over <= shortfall * interval then return new, 0 end
  return new, over
end
local user_new, user_wait = take(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
local total_new, total_wait = take(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
if user_wait > 0 or total_wait > 0 then
  if user_wait >= total_wait then return {0, string.format('%.17g', user_wait), 'user'} end
  return {0, string.format('%.17g', total_wait), 'total'}
end
local user_ms = math.ceil((user_new - now) / 1000)
local total_ms = math.ceil((total_new - now) / 1000)
redis.call('SET', KEYS[1], string.format('%.17g', user_new), 'PX', user_ms)
redis.call('SET', KEYS[2], string.format('%.17g', total_new), 'PX', total_ms)
return {1}
"""

    def __init__(
        self,
        redis: RedisClient,
        region: str,
        *,
        fallback: RateLimiter,
        clock: Callable[[], float],
        limits: Mapping[Tier, Mapping[str, TierLimit]] = LIMITS,
    ) -> None:
        self._region = region
        self._fallback = fallback
        self._limits = limits
        self._script = redis.register_script(self.CHECK)
        self._breaker = CircuitBreaker(
            clock=clock, failure_threshold=1, min_calls=1, open_s=OPEN_S, max_open_s=OPEN_MAX_S
        )
        self._failing = False
        self.counters = LimitCounters()

    @property
    def fallback(self) -> RateLimiter:
        """The process's own buckets, which decide while the store is unreachable."""
        return self._fallback

    async def check(
        self,
        tier: Tier,
        endpoint: str,
        user_id: str,
        api_key_id: str,
        *,
        at_us: int | None = None,
    ) -> Decision:
        """Takes one request from the user's limit and the API key's total at this PoP,
        or from neither. ``at_us`` replaces the store's clock (tests compare the script
        with ``edge.limits.gcra``); the product leaves it to the store."""
        limit = self._limit(tier, endpoint)
        if not self._breaker.allow():
            self.counters.process += 1
            return self._fallback.check(tier, endpoint, user_id, api_key_id)
        user = Rate.of(limit.per_user_rps, limit.per_user_burst)
        total = Rate.of(limit.total_rps)
        names = [
            keys.rate_limit_user(self._region, api_key_id, endpoint, user_id),
            keys.rate_limit_total(self._region, api_key_id, endpoint),
        ]
        args = [
            user.interval_us,
            user.capacity,
            total.interval_us,
            total.capacity,
            SHORTFALL,
            "" if at_us is None else at_us,
        ]
        try:
            reply = await self._script(keys=names, args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._breaker.record_failure()
            self.counters.store_errors += 1
            self.counters.process += 1
            if not self._failing:
                self._failing = True
                log.warning(
                    "PoP store unreachable for rate limits (%s: %s): this process's own "
                    "buckets decide until it answers again",
                    type(exc).__name__,
                    exc,
                )
            return self._fallback.check(tier, endpoint, user_id, api_key_id)
        except asyncio.CancelledError:
            self._breaker.abandon()
            raise
        self._breaker.record_success()
        if self._failing:
            self._failing = False
            log.info("PoP store answers again: rate limits are shared by the PoP")
        self.counters.shared += 1
        return decision_of(reply)

    def _limit(self, tier: Tier, endpoint: str) -> TierLimit:
        try:
            return self._limits[tier][endpoint]
        except KeyError:
            raise ValueError(f"no rate limit for tier {tier!r}, endpoint {endpoint!r}") from None


def decision_of(reply: list[object]) -> Decision:
    """The script's reply as a ``Decision``."""
    if int(str(reply[0])) == 1:
        return _ALLOWED
    wait_us, scope = (_text(part) for part in reply[1:3])
    if scope not in ("user", "total"):
        raise ValueError(f"rate limit script answered scope {scope!r}")
    named: Scope = "user" if scope == "user" else "total"
    return Decision(allowed=False, retry_after_s=float(wait_us) / US, scope=named)


def _text(part: object) -> str:
    return part.decode() if isinstance(part, bytes) else str(part)
