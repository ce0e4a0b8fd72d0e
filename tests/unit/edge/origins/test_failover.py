"""An edge's client of several origins, each behind its own httpx ``MockTransport``:
failover, no retry of rejections, the deadline held, ejection, panic, health checks.
Two origins that run for real are in ``tests/integration/test_edge_origins.py``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import httpx
import pytest

from edge.exceptions import CircuitOpen, OriginRejected, OriginUnavailable
from edge.origins.client import OriginClient
from edge.origins.rotation import EjectionRules
from protocol.audience import Personal
from resilience.circuit_breaker import State
from tests.fakes import FakeClock
from tests.unit.edge.origins.test_client import ACCEPTED, ANSWER, REQUEST, Sleeps

URLS = ("http://a", "http://b", "http://c")
MINE = Personal("u")
Outcome = int | type[httpx.RequestError] | Callable[[httpx.Request], Awaitable[httpx.Response]]


class Origin:
    """One origin's transport: answers from a script (a status, or an error to raise; the
    last one repeats), recording the path and read timeout of each request. A timeout moves
    the clock by the request's whole timeout first, as a hung origin would."""

    def __init__(self, clock: FakeClock, *outcomes: Outcome, ready: int = 200) -> None:
        self.clock = clock
        self.outcomes = list(outcomes) or [200]
        self.ready = ready
        self.calls: list[str] = []
        self.timeouts: list[float] = []
        self.transport = httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(self.ready, json={"status": "ready"})
        self.calls.append(request.url.path)
        self.timeouts.append(request.extensions["timeout"]["read"])
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, int):
            body = ANSWER if request.url.path == "/v1/personalize" else ACCEPTED
            return httpx.Response(outcome, json=body if outcome == 200 else {"error": "x"})
        if isinstance(outcome, type):
            if issubclass(outcome, httpx.TimeoutException):
                self.clock.tick(request.extensions["timeout"]["read"])
            raise outcome("scripted", request=request)
        return await outcome(request)


def several(
    *origins: Origin, clock: FakeClock, retries: int = 1, seed: int = 7, timeout_s: float = 1.0
) -> OriginClient:
    return OriginClient(
        URLS[: len(origins)],
        timeout_s=timeout_s,
        transport={url: o.transport for url, o in zip(URLS, origins, strict=False)},
        retries=retries,
        ejection=EjectionRules(after=3, base_s=2.0, max_s=10.0),
        clock=clock,
        rng=random.Random(seed),
        sleep=Sleeps(clock),
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def personalize(client: OriginClient) -> None:
    await client.personalize(REQUEST, audience=MINE)


def tried(*origins: Origin) -> list[int]:
    return [len(o.calls) for o in origins]


@pytest.mark.parametrize("failure", [503, 502, 504, httpx.ConnectError, httpx.ReadTimeout])
async def test_an_outage_is_retried_on_the_other_origin(clock: FakeClock, failure: Outcome) -> None:
    seen = []
    for seed in range(6):  # the call starts on either origin, by the random tie-break
        failing, healthy = Origin(clock, failure), Origin(clock, 200)
        client = several(failing, healthy, clock=clock, seed=seed)
        await personalize(client)
        seen.append(tried(failing, healthy))
        assert client.links[0].outages == len(failing.calls)
        await client.aclose()
    assert set(map(tuple, seen)) == {(0, 1), (1, 1)}


@pytest.mark.parametrize(
    ("failure", "error", "status"),
    [
        (400, OriginRejected, 400),
        (422, OriginRejected, 422),
        (404, OriginRejected, 404),
        # a 500 is the origin failing on this request's content: another fails alike
        (500, OriginRejected, 500),
        (501, OriginRejected, 501),
        # neither an outage nor safe to repeat: the request may have been received
        (httpx.RemoteProtocolError, OriginUnavailable, None),
    ],
)
async def test_a_rejection_is_never_retried_elsewhere(
    clock: FakeClock, failure: Outcome, error: type[Exception], status: int | None
) -> None:
    a, b = Origin(clock, failure), Origin(clock, failure)
    client = several(a, b, clock=clock, retries=3)
    for _ in range(4):
        with pytest.raises(error) as info:
            await client.feedback(b"{}")
        if status is not None:
            assert isinstance(info.value, OriginRejected)
            assert info.value.status == status
    assert sum(tried(a, b)) == 4  # one attempt per call, never a second
    await client.aclose()


async def test_a_retry_never_goes_back_to_the_origin_that_just_failed(clock: FakeClock) -> None:
    """Three origins all failing, three attempts a call: each attempt on another origin
    than the one before (never the same one twice in a row)."""
    origins = [Origin(clock, 503) for _ in range(3)]
    sequence: list[str] = []
    for origin, url in zip(origins, URLS, strict=True):
        inner = origin.handle

        async def handle(
            request: httpx.Request,
            url: str = url,
            inner: Callable[[httpx.Request], Awaitable[httpx.Response]] = inner,
        ) -> httpx.Response:
            if request.url.path != "/readyz":
                sequence.append(url)
            return await inner(request)

        origin.transport = httpx.MockTransport(handle)
    client = several(*origins, clock=clock, retries=2, timeout_s=10.0)
    for _ in range(2):
        with pytest.raises(OriginUnavailable, match="origin answered 503"):
            await personalize(client)
    assert len(sequence) == 6
    for call in (sequence[:3], sequence[3:]):
        assert call[0] != call[1] != call[2]
    await client.aclose()


async def test_a_hung_origin_leaves_the_retry_its_share_of_the_deadline(
    clock: FakeClock,
) -> None:
    a, b = Origin(clock, httpx.ReadTimeout), Origin(clock, httpx.ReadTimeout)
    client = several(a, b, clock=clock)
    started = clock()
    with pytest.raises(OriginUnavailable):
        await personalize(client)
    # 60% of the budget for the first attempt, the rest for the second, on the other origin.
    first, second = (a, b) if a.timeouts else (b, a)
    assert (first.timeouts, second.timeouts) == ([pytest.approx(0.6)], [pytest.approx(0.4)])
    assert clock() - started == pytest.approx(1.0)  # within the deadline, not beyond
    await client.aclose()


async def test_a_hung_origin_then_a_healthy_one_answers_in_time(clock: FakeClock) -> None:
    hung, healthy = Origin(clock, httpx.ReadTimeout), Origin(clock, 200)
    for seed in range(4):
        client = several(hung, healthy, clock=clock, seed=seed)
        started = clock()
        await personalize(client)
        assert clock() - started <= 0.6 + 1e-9
        await client.aclose()


async def test_no_retry_once_the_deadline_is_too_close(clock: FakeClock) -> None:
    """A 503 after 0.75 s of a 1 s budget: less than 30% left, the other origin is not tried."""

    async def slow_503(request: httpx.Request) -> httpx.Response:
        clock.tick(0.75)
        return httpx.Response(503)

    a, b = Origin(clock, slow_503), Origin(clock, slow_503)
    client = several(a, b, clock=clock)
    with pytest.raises(OriginUnavailable, match="503"):
        await personalize(client)
    assert sum(tried(a, b)) == 1
    await client.aclose()


async def test_an_origin_failing_in_a_row_is_ejected_and_comes_back_after_its_time(
    clock: FakeClock,
) -> None:
    down, up = Origin(clock, httpx.ConnectError), Origin(clock, 200)
    client = several(down, up, clock=clock)
    calls = 0
    while len(down.calls) < 3:  # every call answered: the other origin takes the retry
        await personalize(client)
        calls += 1
    first, second = client.links
    assert first.ejected()
    assert not second.ejected()
    assert (first.outages, first.ejections) == (3, 1)
    for _ in range(20):
        await personalize(client)
    assert len(down.calls) == 3  # not tried while ejected
    assert len(up.calls) == calls + 20
    clock.tick(2.0)
    down.outcomes = [200]
    for _ in range(20):
        await personalize(client)
    assert len(down.calls) > 3  # back in the rotation once its time is up
    assert not first.ejected()
    await client.aclose()


async def test_fewest_in_flight_takes_the_next_call(clock: FakeClock) -> None:
    release = asyncio.Event()
    arrived = asyncio.Semaphore(0)

    async def held(request: httpx.Request) -> httpx.Response:
        arrived.release()
        await release.wait()
        return httpx.Response(200, json=ANSWER)

    a, b = Origin(clock, held), Origin(clock, held)
    client = several(a, b, clock=clock)
    first = asyncio.create_task(personalize(client))
    await arrived.acquire()
    second = asyncio.create_task(personalize(client))
    await arrived.acquire()
    # The second call went to the origin that had none in flight.
    assert [link.inflight for link in client.links] == [1, 1]
    release.set()
    await asyncio.gather(first, second)
    assert tried(a, b) == [1, 1]
    await client.aclose()


async def test_panic_still_tries_ejected_origins_least_recently_failed_first(
    clock: FakeClock,
) -> None:
    a, b = Origin(clock, httpx.ConnectError), Origin(clock, httpx.ConnectError)
    client = several(a, b, clock=clock, timeout_s=10.0)
    while not all(link.ejected() for link in client.links):
        with pytest.raises(OriginUnavailable):
            await personalize(client)
    assert client.panics == 0
    # Every origin ejected; b fails its health check a moment later: a failed longest ago.
    clock.tick(0.5)
    b.ready = 503
    await client.check()
    a.outcomes, b.outcomes = [200], [200]
    await personalize(client)
    assert client.panics == 1
    assert tried(a, b) == [4, 3]
    # It answered: back in the rotation; b still out.
    first, second = client.links
    assert (first.ejected(), second.ejected()) == (False, True)
    assert tried(a, b) == [first.requests, second.requests]  # the counters say the same
    await client.aclose()


async def test_every_circuit_open_fails_at_once_without_a_network_call(clock: FakeClock) -> None:
    a, b = Origin(clock, 503), Origin(clock, 503)
    client = several(a, b, clock=clock)
    while client.circuit_state() is not State.OPEN:
        with pytest.raises(OriginUnavailable):
            await personalize(client)
    sent = sum(tried(a, b))
    with pytest.raises(CircuitOpen, match="circuit open"):
        await personalize(client)
    assert sum(tried(a, b)) == sent
    assert client.refused == 1
    assert client.circuits_opened == 2
    assert 0 < client.retry_after_s() <= 1.0
    await client.aclose()


async def test_a_failed_health_check_takes_the_origin_out_and_a_pass_brings_it_back(
    clock: FakeClock,
) -> None:
    a, b = Origin(clock, 200, ready=503), Origin(clock, 200)
    client = several(a, b, clock=clock)
    await client.check()
    first, second = client.links
    assert (first.standing.ready, first.ejected(), second.standing.ready) == (False, True, True)
    for _ in range(10):
        await personalize(client)
    assert tried(a, b) == [0, 10]
    a.ready = 200
    await client.check()
    assert (first.standing.ready, first.ejected()) == (True, False)
    for _ in range(10):
        await personalize(client)
    assert len(a.calls) > 0
    await client.aclose()


async def test_a_pass_after_a_failed_check_lets_the_open_circuit_probe_at_once(
    clock: FakeClock,
) -> None:
    a, b = Origin(clock, httpx.ConnectError), Origin(clock, 200)
    client = OriginClient(
        URLS[:2],
        timeout_s=1.0,
        transport={URLS[0]: a.transport, URLS[1]: b.transport},
        ejection=EjectionRules(after=100),  # only the breaker acts on the calls here
        clock=clock,
        rng=random.Random(1),
        sleep=Sleeps(clock),
    )
    first = client.links[0]
    while first.breaker.state is not State.OPEN:
        await personalize(client)
    a.ready = 503
    await client.check()
    assert first.breaker.retry_after_s() > 0
    a.ready, a.outcomes = 200, [200]
    await client.check()
    assert first.breaker.retry_after_s() == 0.0
    assert first.candidate(clock()).cooling is False
    await client.aclose()


async def test_an_edge_of_one_origin_tries_it_even_when_ejected(clock: FakeClock) -> None:
    """One origin: ejection leaves nothing else, so the breaker alone decides (as before)."""
    down = Origin(clock, httpx.ConnectError, httpx.ConnectError, httpx.ConnectError, 200)
    client = OriginClient(
        URLS[0],
        timeout_s=1.0,
        transport=down.transport,
        retries=0,
        ejection=EjectionRules(after=2),
        clock=clock,
        sleep=Sleeps(clock),
    )
    for _ in range(3):
        with pytest.raises(OriginUnavailable):
            await personalize(client)
    assert client.links[0].ejected()
    await personalize(client)
    assert (client.panics, len(down.calls)) == (2, 4)
    assert not client.links[0].ejected()
    await client.watch(asyncio.Event(), 0.01)  # nothing to choose between: no checks
    assert client.links[0].standing.ready is None
    await client.aclose()


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((State.CLOSED, State.OPEN), State.CLOSED),
        ((State.OPEN, State.OPEN), State.OPEN),
        ((State.OPEN, State.HALF_OPEN), State.HALF_OPEN),
        ((State.HALF_OPEN, State.HALF_OPEN), State.HALF_OPEN),
    ],
)
async def test_the_circuit_over_all_origins(
    clock: FakeClock, states: tuple[State, State], expected: State
) -> None:
    client = several(Origin(clock), Origin(clock), clock=clock)
    for link, state in zip(client.links, states, strict=True):
        breaker = link.breaker
        if state is not State.CLOSED:
            for _ in range(5):
                breaker.record_failure()
        if state is State.HALF_OPEN:
            clock.tick(1.0)
            assert breaker.allow()
    assert client.circuit_state() is expected
    await client.aclose()


async def test_several_origins_have_a_breaker_each(clock: FakeClock) -> None:
    client = several(Origin(clock), Origin(clock), clock=clock)
    first, second = client.links
    assert first.breaker is not second.breaker
    with pytest.raises(TypeError, match="several origins"):
        _ = client.breaker
    with pytest.raises(ValueError, match="each once"):
        OriginClient(["http://a", "http://a"], timeout_s=1.0)
    await client.aclose()
