"""The edge's origin client against httpx's MockTransport: the transport seam (STYLE 10).
The real origin is exercised by the integration and end-to-end tests."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest

from edge.exceptions import OriginRejected, OriginUnavailable
from edge.origins.client import OriginClient
from edge.origins.retries import Call, Failure, backoff_s, budget_allows_retry, should_retry
from protocol.api import FILL_SCOPE_HEADER, PersonalizeRequest
from protocol.audience import AUDIENCE_HEADER, Audience, Personal, Shared
from resilience.circuit_breaker import CircuitBreaker, State
from tests.fakes import FakeClock

REQUEST = PersonalizeRequest.model_validate(
    {"user_id": "u", "context": {"page_type": "home", "device": "mobile"}}
)
ANSWER = {
    "request_id": "r",
    "user_id": "u",
    "items": [],
    "metadata": {
        "latency_ms": 1.0,
        "tier": "origin",
        "cache_hit": False,
        "exploration_applied": False,
        "model_version": "m",
    },
}


ACCEPTED = {"status": "accepted", "processed": 1, "latency_ms": 1}
MINE = Personal("u")


class Sleeps:
    """The client's ``sleep``: records each pause and moves the fake clock by it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.tick(seconds)


def client(
    handler: httpx.MockTransport,
    *,
    clock: FakeClock | None = None,
    retries: int = 1,
    breaker: CircuitBreaker | None = None,
) -> OriginClient:
    clock = clock or FakeClock()
    return OriginClient(
        "http://origin",
        timeout_s=1.0,
        transport=handler,
        retries=retries,
        breaker=breaker,
        clock=clock,
        rng=random.Random(7),
        sleep=Sleeps(clock),
    )


async def test_a_shared_audience_is_asked_for_with_a_header() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    origin = client(httpx.MockTransport(handle))
    await origin.personalize(REQUEST, audience=Shared("new"))
    await origin.personalize(REQUEST, audience=MINE)
    assert seen[0].headers[FILL_SCOPE_HEADER] == "segment"
    assert FILL_SCOPE_HEADER not in seen[1].headers
    await origin.aclose()


@pytest.mark.parametrize(
    ("asked", "header", "built_for"),
    [
        (Shared("new"), "segment", Shared("new")),
        # Anything the origin does not say is shared is the requesting user's.
        (Shared("new"), "user", MINE),
        (Shared("new"), None, MINE),
        (Shared("new"), "garbage", MINE),
        # A shared answer to a personal request is still kept as the user's own.
        (MINE, "segment", MINE),
        (MINE, "user", MINE),
    ],
)
async def test_the_answer_is_for_the_audience_both_sides_agree_on(
    asked: Audience, header: str | None, built_for: Audience
) -> None:
    headers = {AUDIENCE_HEADER: header} if header is not None else {}
    answer = httpx.Response(200, json=ANSWER, headers=headers)
    origin = client(httpx.MockTransport(lambda _: answer))
    assert (await origin.personalize(REQUEST, audience=asked)).audience == built_for
    await origin.aclose()


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(503, json={"error": "x"}), OriginUnavailable),
        (httpx.Response(502, text="bad gateway"), OriginUnavailable),
        (httpx.Response(504, text="gateway timeout"), OriginUnavailable),
        # The origin's own overload (PERSO_ORIGIN_MAX_INFLIGHT), not this request's fault.
        (httpx.Response(429, json={"error": "overloaded"}), OriginUnavailable),
        # A 500 is the origin failing on this request's content: a retry fails alike.
        (httpx.Response(500, text="boom"), OriginRejected),
        (httpx.Response(200, text="not json"), OriginUnavailable),
        (httpx.Response(200, json={"items": "wrong"}), OriginUnavailable),
        (httpx.Response(400, json={"error": "invalid_request"}), OriginRejected),
    ],
)
async def test_failures_are_classified(response: httpx.Response, error: type[Exception]) -> None:
    origin = client(httpx.MockTransport(lambda _: response))
    with pytest.raises(error):
        await origin.personalize(REQUEST, audience=MINE)
    await origin.aclose()


async def test_transport_errors_mean_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    origin = client(httpx.MockTransport(refuse))
    with pytest.raises(OriginUnavailable):
        await origin.feedback(b"{}")
    assert await origin.healthy() is False
    await origin.aclose()


async def test_rejection_keeps_the_origin_answer() -> None:
    origin = client(httpx.MockTransport(lambda _: httpx.Response(400, content=b'{"field":"x"}')))
    with pytest.raises(OriginRejected) as info:
        await origin.feedback(b"{}")
    assert (info.value.status, info.value.body) == (400, b'{"field":"x"}')
    await origin.aclose()


async def test_the_service_token_is_sent_with_every_request() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "accepted", "processed": 1, "latency_ms": 1})

    client = OriginClient(
        "http://origin", timeout_s=1.0, token="t0k", transport=httpx.MockTransport(handle)
    )
    try:
        await client.feedback(b"{}")
    finally:
        await client.aclose()
    assert seen[0].headers["authorization"] == "Bearer t0k"


@pytest.mark.parametrize(
    ("kind", "failure", "attempt", "retries", "expected"),
    [
        # personalize is a read: connect errors, timeouts and 5xx may be tried again.
        ("personalize", httpx.ConnectError("refused"), 0, 1, True),
        ("personalize", httpx.ReadTimeout("slow"), 0, 1, True),
        ("personalize", httpx.ConnectTimeout("slow"), 0, 1, True),
        ("personalize", httpx.PoolTimeout("busy"), 0, 1, True),
        ("personalize", 503, 0, 1, True),
        ("personalize", 502, 0, 1, True),
        ("personalize", 504, 0, 1, True),
        # a 500 is about this request's content: the same body fails the same way
        ("personalize", 500, 0, 1, False),
        ("personalize", 501, 0, 1, False),
        ("personalize", httpx.RemoteProtocolError("cut"), 0, 1, False),
        # ... within the number of retries.
        ("personalize", 503, 1, 1, False),
        ("personalize", 503, 1, 2, True),
        ("personalize", 503, 0, 0, False),
        ("personalize", httpx.ConnectError("refused"), 1, 1, False),
        # feedback appends events, which the origin deduplicates: as safe to repeat.
        ("feedback", httpx.ConnectError("refused"), 0, 1, True),
        ("feedback", httpx.ReadTimeout("slow"), 0, 1, True),
        ("feedback", httpx.ConnectTimeout("slow"), 0, 1, True),
        ("feedback", 503, 0, 1, True),
        ("feedback", 429, 0, 1, True),
        ("feedback", 422, 0, 1, False),
        ("feedback", httpx.ConnectError("refused"), 1, 1, False),
    ],
)
def test_should_retry(
    kind: Call, failure: Failure, attempt: int, retries: int, expected: bool
) -> None:
    assert should_retry(kind, failure, attempt, retries=retries) is expected


class Extreme(random.Random):
    """An rng whose draws are the low or the high end of [0, 1]."""

    def __init__(self, *, high: bool) -> None:
        super().__init__(0)
        self.high = high

    def random(self) -> float:
        return 1.0 if self.high else 0.0


@pytest.mark.parametrize(
    ("attempt", "base_s", "highest"),
    [(0, 0.02, 0.02), (1, 0.02, 0.04), (2, 0.02, 0.08), (0, 0.1, 0.1), (3, 0.1, 0.8)],
)
def test_backoff_is_full_jitter(attempt: int, base_s: float, highest: float) -> None:
    assert backoff_s(attempt, Extreme(high=False), base_s=base_s) == 0.0
    assert backoff_s(attempt, Extreme(high=True), base_s=base_s) == pytest.approx(highest)
    drawn = [backoff_s(attempt, random.Random(seed), base_s=base_s) for seed in range(200)]
    assert all(0.0 <= d <= highest for d in drawn)
    assert len(set(drawn)) == 200


@pytest.mark.parametrize(
    ("remaining_s", "budget_s", "expected"),
    [(1.0, 1.0, True), (0.3, 1.0, True), (0.29, 1.0, False), (0.0, 1.0, False), (-0.1, 1.0, False)],
)
def test_budget_allows_retry(remaining_s: float, budget_s: float, expected: bool) -> None:
    assert budget_allows_retry(remaining_s, budget_s) is expected


def scripted(*outcomes: int | type[httpx.RequestError]) -> tuple[httpx.MockTransport, list[float]]:
    """A transport answering with each outcome in turn (a status, or an error raised), and
    the read timeout each request was sent with."""
    timeouts: list[float] = []
    queue = list(outcomes)

    def handle(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        outcome = queue.pop(0)
        if isinstance(outcome, int):
            body = ANSWER if request.url.path == "/v1/personalize" else ACCEPTED
            return httpx.Response(outcome, json=body if outcome == 200 else {"error": "x"})
        raise outcome("scripted", request=request)

    return httpx.MockTransport(handle), timeouts


async def call(origin: OriginClient, kind: Call) -> None:
    if kind == "personalize":
        await origin.personalize(REQUEST, audience=MINE)
    else:
        await origin.feedback(b"{}")


@pytest.mark.parametrize(
    ("kind", "outcomes", "retries", "error"),
    [
        ("personalize", (503, 200), 1, None),
        ("personalize", (503, 503), 1, OriginUnavailable),
        ("personalize", (502, 503, 200), 2, None),
        ("personalize", (500,), 1, OriginRejected),
        ("personalize", (503,), 0, OriginUnavailable),
        ("personalize", (httpx.ReadTimeout, 200), 1, None),
        ("personalize", (httpx.ConnectError, 200), 1, None),
        ("personalize", (httpx.RemoteProtocolError,), 1, OriginUnavailable),
        ("personalize", (400,), 1, OriginRejected),
        ("personalize", (503, 404), 1, OriginRejected),
        ("feedback", (httpx.ConnectError, 200), 1, None),
        ("feedback", (httpx.ReadTimeout, 200), 1, None),
        ("feedback", (503, 200), 1, None),
        ("feedback", (503, 503), 1, OriginUnavailable),
        ("feedback", (422,), 1, OriginRejected),
        ("feedback", (500,), 1, OriginRejected),
    ],
)
async def test_retries(
    kind: Call,
    outcomes: tuple[int | type[httpx.RequestError], ...],
    retries: int,
    error: type[Exception] | None,
) -> None:
    """Every outcome in the script is used: the attempts made are exactly those listed."""
    transport, timeouts = scripted(*outcomes)
    origin = client(transport, retries=retries)
    if error is None:
        await call(origin, kind)
    else:
        with pytest.raises(error):
            await call(origin, kind)
    assert len(timeouts) == len(outcomes)
    await origin.aclose()


async def test_a_retry_waits_a_jittered_pause_within_the_budget() -> None:
    clock = FakeClock()
    sleeps = Sleeps(clock)
    transport, timeouts = scripted(503, 200)
    origin = OriginClient(
        "http://origin",
        timeout_s=1.0,
        transport=transport,
        clock=clock,
        rng=random.Random(1),
        sleep=sleeps,
    )
    await origin.personalize(REQUEST, audience=MINE)
    [delay] = sleeps.delays
    assert 0.0 <= delay <= 0.02
    # The second attempt gets what is left of the one budget, not a new one.
    assert timeouts == [1.0, pytest.approx(1.0 - delay)]
    await origin.aclose()


async def test_feedback_has_a_budget_of_its_own() -> None:
    clock = FakeClock()
    transport, timeouts = scripted(503, 200, 200)
    origin = OriginClient(
        "http://origin",
        timeout_s=1.0,
        feedback_timeout_s=5.0,
        transport=transport,
        clock=clock,
        rng=random.Random(1),
        sleep=Sleeps(clock),
    )
    await origin.feedback(b"{}")
    # the whole feedback budget for the first attempt, what is left of it for the retry
    assert timeouts[0] == 5.0
    assert 4.98 <= timeouts[1] <= 5.0
    await origin.personalize(REQUEST, audience=MINE)
    assert timeouts[2] == 1.0  # the others keep theirs
    await origin.aclose()


@pytest.mark.parametrize(("slow_s", "attempts"), [(0.5, 2), (0.65, 2), (0.72, 1), (0.9, 1)])
async def test_no_retry_once_too_little_of_the_budget_is_left(slow_s: float, attempts: int) -> None:
    clock = FakeClock()
    seen: list[httpx.Request] = []

    def slow(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        clock.tick(slow_s)
        raise httpx.ReadTimeout("slow", request=request)

    # Jitter pinned to its top (20 ms): 0.65 s + 0.02 s leaves more than 30% of the
    # budget, 0.72 s + 0.02 s less.
    origin = OriginClient(
        "http://origin",
        timeout_s=1.0,
        transport=httpx.MockTransport(slow),
        clock=clock,
        rng=Extreme(high=True),
        sleep=Sleeps(clock),
    )
    with pytest.raises(OriginUnavailable):
        await origin.personalize(REQUEST, audience=MINE)
    assert len(seen) == attempts
    await origin.aclose()


async def test_the_breaker_opens_then_refuses_without_calling_the_origin() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=3, open_s=5.0)
    transport, timeouts = scripted(503, 503, 503, 200)
    origin = client(transport, clock=clock, retries=0, breaker=breaker)
    for _ in range(3):
        with pytest.raises(OriginUnavailable, match="origin answered 503"):
            await origin.personalize(REQUEST, audience=MINE)
    assert origin.breaker.state is State.OPEN
    with pytest.raises(OriginUnavailable, match="circuit open"):
        await origin.personalize(REQUEST, audience=MINE)
    assert len(timeouts) == 3
    assert (breaker.opened_total, breaker.rejected_total) == (1, 1)
    # After open_s, one probe goes through; its success closes the circuit.
    clock.tick(5.0)
    await origin.personalize(REQUEST, audience=MINE)
    assert (origin.breaker.state, len(timeouts)) == (State.CLOSED, 4)
    await origin.aclose()


async def test_a_failed_probe_reopens_the_circuit_and_is_not_retried() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=1)
    transport, timeouts = scripted(httpx.ConnectError, httpx.ConnectError, 200)
    origin = client(transport, clock=clock, retries=1, breaker=breaker)
    # The first failure opens it: the retry is not attempted into an open circuit.
    with pytest.raises(OriginUnavailable, match="ConnectError"):
        await origin.feedback(b"{}")
    clock.tick(5.0)
    with pytest.raises(OriginUnavailable, match="ConnectError"):
        await origin.feedback(b"{}")
    assert (breaker.state, breaker.opened_total, len(timeouts)) == (State.OPEN, 2, 2)
    await origin.aclose()


async def test_a_4xx_is_never_retried_and_keeps_the_circuit_closed() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=2)
    transport, timeouts = scripted(*([400] * 5))
    origin = client(transport, clock=clock, breaker=breaker)
    for _ in range(5):
        with pytest.raises(OriginRejected):
            await origin.personalize(REQUEST, audience=MINE)
    assert (breaker.state, len(timeouts)) == (State.CLOSED, 5)
    await origin.aclose()


async def test_one_clients_failing_requests_never_open_the_circuit() -> None:
    """Issue 15: three feedback bodies with a timestamp the origin failed on (a 500 each,
    retried) opened the breaker, and every user's feedback got 503 for the next 5 s."""
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=3)
    transport, timeouts = scripted(*([500] * 10), 200)
    origin = client(transport, clock=clock, breaker=breaker)
    for _ in range(10):
        with pytest.raises(OriginRejected) as info:
            await origin.feedback(b"{}")
        assert info.value.status == 500
    assert (breaker.state, len(timeouts)) == (State.CLOSED, 10)  # no retries either
    await origin.feedback(b"{}")
    await origin.aclose()


async def test_a_cancelled_probe_gives_its_slot_back() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(clock=clock, failure_threshold=1)
    breaker.record_failure()
    clock.tick(5.0)

    async def cancelled(request: httpx.Request) -> httpx.Response:
        raise asyncio.CancelledError

    origin = client(httpx.MockTransport(cancelled), clock=clock, breaker=breaker)
    with pytest.raises(asyncio.CancelledError):
        await origin.personalize(REQUEST, audience=MINE)
    assert breaker.state is State.HALF_OPEN
    assert breaker.allow()
    await origin.aclose()


async def test_the_default_breaker_is_closed() -> None:
    origin = OriginClient("http://origin", timeout_s=1.0)
    assert origin.breaker.state is State.CLOSED
    await origin.aclose()


TOKEN = {
    "token": "v1.x.y",
    "token_type": "Bearer",
    "user_id": "ada",
    "segment": "new",
    "tier": "premium",
    "expires_at": "2030-01-01T00:00:00Z",
}


async def test_a_user_token_is_asked_as_a_shops_backend_asks() -> None:
    """The storefront's demo route: ``POST /v1/auth/token`` with the API key in
    ``X-API-Key`` and the user in the body, the origin's answer returned as it is."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=TOKEN)

    origin = client(httpx.MockTransport(handle))
    issued = await origin.user_token("ada", "demo-secret-0123456789")
    await origin.aclose()
    assert (issued.token, issued.user_id, issued.tier) == ("v1.x.y", "ada", "premium")
    (request,) = seen
    assert (request.method, request.url.path) == ("POST", "/v1/auth/token")
    assert request.headers["x-api-key"] == "demo-secret-0123456789"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {"user_id": "ada"}


@pytest.mark.parametrize(
    ("responses", "error", "calls"),
    [
        # a refused key is the origin answering: never retried
        ([httpx.Response(401, json={"error": "unauthorized"})], OriginRejected, 1),
        ([httpx.Response(400, json={"error": "invalid_request"})], OriginRejected, 1),
        # an outage is tried once more (issuing a token changes nothing)
        ([httpx.Response(503, json={"error": "x"})] * 2, OriginUnavailable, 2),
        ([httpx.Response(200, json={"token": 1})], OriginUnavailable, 1),
        ([httpx.Response(200, text="not json")], OriginUnavailable, 1),
    ],
)
async def test_a_user_token_that_cannot_be_had(
    responses: list[httpx.Response], error: type[Exception], calls: int
) -> None:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return responses[len(sent) - 1]

    origin = client(httpx.MockTransport(handle))
    with pytest.raises(error):
        await origin.user_token("ada", "demo-secret-0123456789")
    await origin.aclose()
    assert len(sent) == calls


async def test_a_token_call_is_retried_on_an_outage_and_then_succeeds() -> None:
    answers = iter([httpx.Response(503, json={"error": "x"}), httpx.Response(200, json=TOKEN)])
    origin = client(httpx.MockTransport(lambda _: next(answers)))
    assert (await origin.user_token("ada", "demo-secret-0123456789")).user_id == "ada"
    await origin.aclose()
