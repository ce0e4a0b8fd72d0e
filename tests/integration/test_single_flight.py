"""``coordination.SingleFlight`` against a real Redis.

Leases are judged on a fake clock, so a stuck leader is made stale by ticking it, not by
waiting; followers really poll (ms-level sleeps) unless a test makes their sleep tick the
fake clock. Only the done record's own TTL (PX) is waited for in real time.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable

import pytest
from redis.asyncio import Redis

from coordination.exceptions import SingleFlightTimeout
from coordination.flight_record import FlightRecord, JsonValue
from coordination.single_flight import (
    IdempotencyConfig,
    SingleFlight,
    idempotent,
    read_record,
)
from protocol import keys
from tests.fakes import FakeClock

pytestmark = pytest.mark.cluster


SCOPE = "vector_rebuild"
LEASE_MS = 5_000

MakeFlight = Callable[..., SingleFlight]


class Boom(Exception):
    pass


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_flight(redis: Redis, clock: FakeClock) -> MakeFlight:
    """A flight of ``SCOPE`` on the fake clock, polling every few real ms."""

    def make(
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, **config: int
    ) -> SingleFlight:
        fields = {"in_progress_ttl_ms": LEASE_MS, "poll_min_ms": 1, "poll_max_ms": 5, **config}
        return SingleFlight(
            redis,
            IdempotencyConfig(SCOPE, **fields),
            clock=clock,
            sleep=sleep,
            rng=random.Random(3).random,
        )

    return make


@pytest.fixture
def flight(make_flight: MakeFlight) -> SingleFlight:
    return make_flight()


class Worker:
    """Counts its calls; each call waits for ``gate`` (when given), then returns ``value``."""

    def __init__(self, value: object, gate: asyncio.Event | None = None) -> None:
        self.value = value
        self.gate = gate
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.value


async def until_record(
    flight: SingleFlight, key: str, wanted: Callable[[FlightRecord], bool]
) -> FlightRecord:
    for _ in range(2_000):
        record = await flight.status(key)
        if record is not None and wanted(record):
            return record
        await asyncio.sleep(0.001)
    raise AssertionError(f"the record of {key} never became what the test waits for")


async def until_status(flight: SingleFlight, key: str, status: str) -> FlightRecord:
    return await until_record(flight, key, lambda record: record.status == status)


async def test_one_leader_runs_and_twenty_followers_get_its_result(
    make_flight: MakeFlight,
) -> None:
    polls = 0

    async def counting_sleep(seconds: float) -> None:
        nonlocal polls
        polls += 1
        await asyncio.sleep(seconds)

    flight = make_flight(sleep=counting_sleep)
    gate = asyncio.Event()
    worker = Worker({"rebuilt": 1_000, "slots": ["a", "b"]}, gate)
    callers = [asyncio.create_task(flight.run("ns-1", worker)) for _ in range(21)]
    await until_status(flight, "ns-1", "in_progress")
    await asyncio.sleep(0.02)  # the followers are polling by now
    gate.set()
    results = await asyncio.gather(*callers)
    assert worker.calls == 1
    assert results == [{"rebuilt": 1_000, "slots": ["a", "b"]}] * 21
    assert polls >= 20


async def test_a_done_result_is_served_from_the_record_until_it_expires(
    make_flight: MakeFlight, redis: Redis
) -> None:
    flight = make_flight(ttl_ms=150)
    first = Worker("v1")
    assert await flight.run("ns-1", first) == "v1"
    again = Worker("v2")
    assert await flight.run("ns-1", again) == "v1"
    assert again.calls == 0
    assert 0 < await redis.pttl(keys.idempotency(SCOPE, "ns-1")) <= 150
    await asyncio.sleep(0.2)  # the done record's own TTL (PX)
    assert await flight.status("ns-1") is None
    assert await flight.run("ns-1", again) == "v2"


async def test_keys_and_scopes_are_separate(make_flight: MakeFlight, redis: Redis) -> None:
    flight = make_flight()
    other = SingleFlight(redis, IdempotencyConfig("other_scope"))
    assert await flight.run("ns-1", Worker("a")) == "a"
    assert await flight.run("ns-2", Worker("b")) == "b"
    assert await other.run("ns-1", Worker("c")) == "c"


async def test_results_make_a_json_round_trip_for_every_caller(
    flight: SingleFlight, redis: Redis
) -> None:
    gate = asyncio.Event()
    worker = Worker({"ids": (1, 2), 3: "x", "score": 0.25, "none": None}, gate)
    leader = asyncio.create_task(flight.run("ns-1", worker))
    await until_status(flight, "ns-1", "in_progress")
    follower = asyncio.create_task(flight.run("ns-1", worker))
    gate.set()
    expected = {"ids": [1, 2], "3": "x", "score": 0.25, "none": None}
    assert await leader == expected
    assert await follower == expected
    assert await flight.run("ns-1", worker) == expected
    raw = await redis.get(keys.idempotency(SCOPE, "ns-1"))
    assert json.loads(raw)["result"] == expected


@pytest.mark.parametrize("value", [{1, 2}, b"bytes", float("nan")])
async def test_a_result_without_a_json_form_is_refused_and_not_stored(
    flight: SingleFlight, value: object
) -> None:
    with pytest.raises(TypeError):
        await flight.run("ns-1", Worker(value))
    assert await flight.status("ns-1") is None
    assert await flight.run("ns-1", Worker("ok")) == "ok"


async def test_a_failing_worker_clears_the_record_and_the_next_caller_runs(
    flight: SingleFlight,
) -> None:
    async def fails() -> object:
        raise Boom("index unreachable")

    with pytest.raises(Boom):
        await flight.run("ns-1", fails)
    assert await flight.status("ns-1") is None
    worker = Worker("rebuilt")
    assert await flight.run("ns-1", worker) == "rebuilt"
    assert worker.calls == 1


async def test_followers_of_a_failed_leader_take_the_lead_one_at_a_time(
    flight: SingleFlight,
) -> None:
    gate = asyncio.Event()
    calls = 0

    async def fails_once() -> object:
        nonlocal calls
        calls += 1
        if calls == 1:
            await gate.wait()
            raise Boom("first run")
        return "second run"

    leader = asyncio.create_task(flight.run("ns-1", fails_once))
    await until_status(flight, "ns-1", "in_progress")
    followers = [asyncio.create_task(flight.run("ns-1", fails_once)) for _ in range(5)]
    await asyncio.sleep(0.01)
    gate.set()
    with pytest.raises(Boom):
        await leader
    assert await asyncio.gather(*followers) == ["second run"] * 5
    assert calls == 2


async def test_a_cancelled_leader_frees_the_key(flight: SingleFlight) -> None:
    leader = asyncio.create_task(flight.run("ns-1", Worker("never", asyncio.Event())))
    await until_status(flight, "ns-1", "in_progress")
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert await flight.status("ns-1") is None


async def test_a_stuck_leader_is_taken_over_and_its_late_end_changes_nothing(
    flight: SingleFlight, clock: FakeClock, redis: Redis
) -> None:
    old_gate, new_gate = asyncio.Event(), asyncio.Event()
    stuck = asyncio.create_task(flight.run("ns-1", Worker("old", old_gate)))
    old = await until_status(flight, "ns-1", "in_progress")
    name = keys.idempotency(SCOPE, "ns-1")
    # The key outlives the lease, so that the next caller sees the run timed out.
    assert LEASE_MS < await redis.pttl(name) <= 2 * LEASE_MS

    clock.tick(LEASE_MS / 1000)
    successor = asyncio.create_task(flight.run("ns-1", Worker("new", new_gate)))
    current = await until_record(flight, "ns-1", lambda record: record.owner != old.owner)
    assert current.status == "in_progress"
    assert current.started_ms == old.deadline_ms

    # The old leader ends while its successor runs: neither its result nor its record
    # deletion may land.
    old_gate.set()
    assert await stuck == "old"  # its own caller still gets what it waited for
    assert await flight.status("ns-1") == current

    new_gate.set()
    assert await successor == "new"
    record = await flight.status("ns-1")
    assert record is not None
    assert (record.status, record.owner, record.result) == ("done", current.owner, "new")
    assert await flight.run("ns-1", Worker("later")) == "new"


async def test_a_stuck_leader_that_fails_late_does_not_free_its_successors_key(
    flight: SingleFlight, clock: FakeClock
) -> None:
    gate = asyncio.Event()

    async def fails_late() -> object:
        await gate.wait()
        raise Boom("too late")

    stuck = asyncio.create_task(flight.run("ns-1", fails_late))
    old = await until_status(flight, "ns-1", "in_progress")
    clock.tick(LEASE_MS / 1000)
    successor = asyncio.create_task(flight.run("ns-1", Worker("new", asyncio.Event())))
    current = await until_record(flight, "ns-1", lambda record: record.owner != old.owner)
    assert current.status == "in_progress"
    gate.set()
    with pytest.raises(Boom):
        await stuck
    assert await flight.status("ns-1") == current
    successor.cancel()
    with pytest.raises(asyncio.CancelledError):
        await successor


async def test_a_lapsed_run_is_marked_timeout_then_taken_over(
    flight: SingleFlight, clock: FakeClock, redis: Redis
) -> None:
    run = await flight.begin("ns-1", "crashed-leader")
    assert run is not None
    assert await flight.begin("ns-1", "second") is None
    assert not await flight.expire("ns-1", run)  # the lease is not over yet
    name = keys.idempotency(SCOPE, "ns-1")
    ttl_before = await redis.pttl(name)

    clock.tick(LEASE_MS / 1000 + 0.25)
    assert await flight.expire("ns-1", run)
    lapsed = await flight.status("ns-1")
    assert lapsed is not None
    assert (lapsed.status, lapsed.owner) == ("timeout", "crashed-leader")
    assert lapsed.error == "lease lapsed 250 ms before the run finished"
    assert 0 < await redis.pttl(name) <= ttl_before  # marking keeps the key's TTL
    assert not await flight.expire("ns-1", run)  # only once
    # The crashed leader, were it to come back, can neither finish nor free the key.
    assert not await flight.finish("ns-1", run, "stale")
    assert not await flight.release("ns-1", run)

    worker = Worker("retried")
    assert await flight.run("ns-1", worker) == "retried"
    assert worker.calls == 1
    assert await flight.take_over("ns-1", lapsed, "late-follower") is None


async def test_racing_followers_take_over_a_lapsed_run_once(
    flight: SingleFlight, clock: FakeClock
) -> None:
    assert await flight.begin("ns-1", "crashed-leader") is not None
    clock.tick(LEASE_MS / 1000)
    worker = Worker("once")
    results = await asyncio.gather(*(flight.run("ns-1", worker) for _ in range(10)))
    assert results == ["once"] * 10
    assert worker.calls == 1


async def test_a_follower_gives_up_after_its_wait_bound(
    make_flight: MakeFlight, clock: FakeClock
) -> None:
    async def sleep(seconds: float) -> None:
        clock.tick(seconds)
        await asyncio.sleep(0)

    flight = make_flight(sleep=sleep, wait_timeout_ms=200, poll_min_ms=10, poll_max_ms=80)
    assert await flight.begin("ns-1", "slow-leader") is not None
    with pytest.raises(SingleFlightTimeout) as raised:
        await flight.run("ns-1", Worker("unused"))
    assert raised.value.key == keys.idempotency(SCOPE, "ns-1")
    assert raised.value.waited_ms == 200  # the last wait is cut to the bound
    record = await flight.status("ns-1")
    assert record is not None
    assert record.owner == "slow-leader"


async def test_status_follows_the_run(flight: SingleFlight, redis: Redis) -> None:
    assert await flight.status("ns-1") is None
    gate = asyncio.Event()
    leader = asyncio.create_task(flight.run("ns-1", Worker([1, 2], gate)))
    await until_status(flight, "ns-1", "in_progress")
    record = await read_record(redis, SCOPE, "ns-1")
    assert record is not None
    assert record.deadline_ms - record.started_ms == LEASE_MS
    assert record.finished_ms is None
    gate.set()
    await leader
    record = await read_record(redis, SCOPE, "ns-1")
    assert record is not None
    assert (record.status, record.result, record.error) == ("done", [1, 2], None)
    assert record.finished_ms == record.started_ms  # the fake clock did not move
    assert await read_record(redis, "other_scope", "ns-1") is None


async def test_the_decorator_shares_one_run_per_key(flight: SingleFlight) -> None:
    calls: list[str] = []
    gate = asyncio.Event()

    @idempotent(lambda namespace, batch=100: namespace, flight)
    async def rebuild(namespace: str, batch: int = 100) -> dict[str, JsonValue]:
        calls.append(namespace)
        await gate.wait()
        return {"namespace": namespace, "batch": batch}

    callers = [asyncio.create_task(rebuild(ns)) for ns in ("a", "a", "b", "a", "b")]
    await until_status(flight, "a", "in_progress")
    await until_status(flight, "b", "in_progress")
    gate.set()
    results = await asyncio.gather(*callers)
    assert sorted(calls) == ["a", "b"]
    assert [r["namespace"] for r in results if isinstance(r, dict)] == ["a", "a", "b", "a", "b"]
    assert rebuild.__name__ == "rebuild"
