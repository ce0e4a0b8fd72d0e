"""Idempotent single-flight: one run of an operation per key, its JSON result
served to every caller until it expires.

The first caller to ``SET NX`` an ``in_progress`` record (``coordination.flight_record``)
at ``keys.idempotency(scope, key)`` is the leader and runs the worker; the others follow:
they poll, jittered, until the record is ``done`` and return its result, or give up after
their wait bound (``SingleFlightTimeout``). The leader stores ``done`` with the result for
``ttl_ms``; a worker that raises has its record deleted, so the next caller runs it again.

The lease is a deadline in the record, judged on the callers' injected clock (wall-clock
seconds, like ``time.time``), rather than the key's TTL alone: a record that merely
vanished would leave no trace of the lapsed run, and a deadline lets tests move time
instead of waiting for it. A caller that finds an ``in_progress`` record past its deadline
marks it ``timeout``; a caller that finds ``timeout`` takes over and runs the worker itself.
Clock skew between callers only moves the moment of a takeover, never what is stored: each
change is a compare-and-set on the record's status and owner token (one Lua script), so a
leader that was taken over cannot overwrite its successor's record when it finally ends.
The key itself expires at twice the lease, so a record nobody comes back to goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, ParamSpec

from redis.exceptions import RedisError

from coordination.exceptions import SingleFlightTimeout
from coordination.flight_record import (
    FlightRecord,
    JsonValue,
    decode_record,
    done,
    encode_record,
    in_progress,
    timed_out,
    to_json_value,
)
from protocol import keys
from redis_client.client import RedisClient

P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class IdempotencyConfig:
    """Where a single-flight keeps its records and for how long: by default an hour for a
    result and ten minutes for a run in progress, in ms."""

    scope: str
    ttl_ms: int = 3_600_000  # how long a done result is served
    in_progress_ttl_ms: int = 600_000  # the leader's lease
    wait_timeout_ms: int = 600_000  # how long a follower waits for the leader
    poll_min_ms: int = 50
    poll_max_ms: int = 1_000

    def __post_init__(self) -> None:
        # A ':' would let ("a:b", "c") and ("a", "b:c") share a key.
        if not self.scope or ":" in self.scope:
            raise ValueError(f"scope must be non-empty and without ':', got {self.scope!r}")
        if min(self.ttl_ms, self.in_progress_ttl_ms, self.wait_timeout_ms) <= 0:
            raise ValueError("ttl_ms, in_progress_ttl_ms and wait_timeout_ms must be positive")
        if not 0 < self.poll_min_ms <= self.poll_max_ms:
            raise ValueError("polls need 0 < poll_min_ms <= poll_max_ms")


def poll_delay(polls: int, min_s: float, max_s: float, u: float) -> float:
    """A follower's wait after ``polls`` looks: the cap doubles from ``min_s`` up to
    ``max_s`` and the wait is in its upper half (``u`` uniform in [0, 1)), so followers
    spread out without ever polling in a tight loop."""
    cap = min(max_s, min_s * math.pow(2.0, min(polls, 60)))
    return cap * (1 + u) / 2


async def read_record(redis: RedisClient, scope: str, key: str) -> FlightRecord | None:
    """The record of ``key`` in ``scope``, or None: for a status endpoint, which needs no
    config."""
    raw = await redis.get(keys.idempotency(scope, key))
    return None if raw is None else decode_record(raw)


class SingleFlight:
    """Single-flight runs of one scope's operations on one Redis."""

    # KEYS[1] record; ARGV[1] expected status, ARGV[2] expected owner, ARGV[3] new record
    # ('' deletes it), ARGV[4] TTL ms of the new record ('0' keeps the key's TTL).
    # Returns 1 if the record had that status and owner and was replaced, else 0.
    SWAP = """
local raw = redis.call('GET', KEYS[1])
if not raw then
    return 0
end
local ok, rec = pcall(cjson.decode, raw)
if not ok or type(rec) ~= 'table' or rec.status ~= ARGV[1] or rec.owner ~= ARGV[2] then
    return 0
end
if ARGV[3] == '' then
    return redis.call('DEL', KEYS[1])
end
if ARGV[4] == '0' then
    redis.call('SET', KEYS[1], ARGV[3], 'KEEPTTL')
else
    redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
"""

    def __init__(
        self,
        redis: RedisClient,
        config: IdempotencyConfig,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self._redis = redis
        self._clock = clock
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random().random
        self._swap = redis.register_script(self.SWAP)

    async def run(self, key: str, worker: Callable[[], Awaitable[object]]) -> JsonValue:
        """The result of ``key``'s run: the cached one, the leader's once it is done, or
        ours if we lead (then ``worker`` runs here). Every caller gets the value after a
        JSON round trip, the leader too."""
        config = self.config
        token = secrets.token_hex(16)
        started = self._clock()
        polls = 0
        while True:
            record = await self.status(key)
            if record is None:
                run = await self._claim(key, self.begin(key, token))
                if run is not None:
                    return await self._lead(key, run, worker)
            elif record.status == "done":
                return record.result
            elif record.status == "timeout":
                run = await self._claim(key, self.take_over(key, record, token))
                if run is not None:
                    return await self._lead(key, run, worker)
            elif record.lapsed(self._now_ms()):
                await self.expire(key, record)
            else:
                waited_s = self._clock() - started
                left_s = config.wait_timeout_ms / 1000 - waited_s
                if left_s <= 0:
                    raise SingleFlightTimeout(self._name(key), round(waited_s * 1000))
                delay_s = poll_delay(
                    polls, config.poll_min_ms / 1000, config.poll_max_ms / 1000, self._rng()
                )
                await self._sleep(min(delay_s, left_s))
                polls += 1
            # Every other branch saw the record change under it: look again at once.

    async def status(self, key: str) -> FlightRecord | None:
        """The record of ``key``, or None when there is none (never run, or expired)."""
        return await read_record(self._redis, self.config.scope, key)

    # --- one round trip each ----------------------------------------------------------------

    async def begin(self, key: str, token: str) -> FlightRecord | None:
        """Lead a new run of ``key`` if there is no record; the ``in_progress`` record."""
        run = in_progress(token, self._now_ms(), self.config.in_progress_ttl_ms)
        created = await self._redis.set(
            self._name(key), encode_record(run), nx=True, px=self._record_ttl_ms()
        )
        return run if created else None

    async def finish(self, key: str, run: FlightRecord, result: JsonValue) -> bool:
        """Store ``run``'s result; False if the run no longer owns the record."""
        record = done(run, self._now_ms(), result)
        return await self._replace(key, run, encode_record(record), self.config.ttl_ms)

    async def release(self, key: str, run: FlightRecord) -> bool:
        """Delete ``run``'s record so that the next caller runs again; False if not ours."""
        return await self._replace(key, run, "", 0)

    async def expire(self, key: str, run: FlightRecord) -> bool:
        """Mark ``run`` timed out, keeping its key's TTL; False if its lease is not over
        or the record changed."""
        now_ms = self._now_ms()
        if not run.lapsed(now_ms):
            return False
        return await self._replace(key, run, encode_record(timed_out(run, now_ms)), 0)

    async def take_over(self, key: str, lapsed: FlightRecord, token: str) -> FlightRecord | None:
        """Lead a new run in place of the timed-out ``lapsed``; the new record, or None if
        someone else took over first."""
        run = in_progress(token, self._now_ms(), self.config.in_progress_ttl_ms)
        replaced = await self._replace(key, lapsed, encode_record(run), self._record_ttl_ms())
        return run if replaced else None

    # --- internals ----------------------------------------------------------------------------

    async def _claim(
        self, key: str, claim: Coroutine[Any, Any, FlightRecord | None]
    ) -> FlightRecord | None:
        """``claim`` (a begin or a take-over) seen through to its end even if we are
        cancelled meanwhile: a record that landed while the reply was on the wire is given
        back, not left to block every caller until its lease ends."""
        attempt = asyncio.ensure_future(claim)
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            with contextlib.suppress(RedisError, asyncio.CancelledError):
                run = await attempt
                if run is not None:
                    await self.release(key, run)
            raise

    async def _lead(
        self, key: str, run: FlightRecord, worker: Callable[[], Awaitable[object]]
    ) -> JsonValue:
        try:
            result = to_json_value(await worker())
        except BaseException:
            # Cancellation included: the next caller need not wait out the lease. If Redis
            # is unreachable the lease ends it anyway; the worker's error is the one to see.
            with contextlib.suppress(RedisError):
                await self.release(key, run)
            raise
        # Not stored if we were taken over: the successor's record stands, and our caller
        # still gets the result it waited for.
        await self.finish(key, run, result)
        return result

    async def _replace(self, key: str, expected: FlightRecord, new: str, ttl_ms: int) -> bool:
        replaced = await self._swap(
            keys=[self._name(key)], args=[expected.status, expected.owner, new, ttl_ms]
        )
        return bool(replaced)

    def _name(self, key: str) -> str:
        return keys.idempotency(self.config.scope, key)

    def _record_ttl_ms(self) -> int:
        return 2 * self.config.in_progress_ttl_ms

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def idempotent(
    key_builder: Callable[P, str], flight: SingleFlight
) -> Callable[[Callable[P, Awaitable[object]]], Callable[P, Awaitable[JsonValue]]]:
    """The single-flight as a decorator: calls of the decorated coroutine function with
    the same ``key_builder(*args, **kwargs)`` share one run through ``flight``. For a
    method, decorate the bound method in ``__init__``, where the flight exists."""

    def decorate(fn: Callable[P, Awaitable[object]]) -> Callable[P, Awaitable[JsonValue]]:
        @functools.wraps(fn)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> JsonValue:
            return await flight.run(key_builder(*args, **kwargs), lambda: fn(*args, **kwargs))

        return wrapper

    return decorate
