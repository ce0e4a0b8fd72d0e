"""The edge's client of the origin: pooled keep-alive connections, one timeout budget per
call, bounded retries, a circuit breaker.

What an answer means is decided in one place, ``status_outcome``:

- transport failures, timeouts, 502, 503 and 504 say the origin is down, overloaded or
  unreachable: an outage. They become ``OriginUnavailable``, count against the breaker and
  are retried while that is safe and in budget;
- every other status of 400 or more (a 4xx, or a 500 from a bug that this request's
  content triggered) is the origin answering this one request: ``OriginRejected`` with its
  status and body, never retried (the same body fails the same way) and counted as a
  success by the breaker (the origin is up). So one client's bad request can neither open
  the circuit for everyone nor be multiplied by retries.

``transport`` is the seam for tests (httpx ``MockTransport``).

A failed call is tried again (``retries`` times, after a fully jittered pause) only on an
outage: a connect error (the request never left), a timeout or 502/503/504. Personalize
and explain requests are reads. A feedback request appends events, but the origin
recognises a repeated interaction (by its ``interaction_id``, sent or derived from the same
body, which a retry sends unchanged) and records it once, so a retry after a lost answer
completes what was missing and repeats nothing. No retry starts once less than 30% of the
call's ``timeout_s`` is left: the caller would rather have its answer (or its error) in
time. While the breaker is open a call fails at once, without a network call, so edges
serve what they have instead of piling onto a failing origin.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from edge.exceptions import CircuitOpen, OriginRejected, OriginUnavailable
from protocol.api import (
    EXPLAIN_SCOPE_HEADER,
    FILL_SCOPE_HEADER,
    SEGMENT_HEADER,
    SEGMENT_SCOPE,
    ExplainRequest,
    ExplainResponse,
    FeedbackResponse,
    PersonalizeRequest,
    PersonalizeResponse,
)
from protocol.audience import AUDIENCE_HEADER, Audience, Shared, declared
from protocol.decisions import (
    CONTEXT_HEADER,
    DECISION_BY_HEADER,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    parse_propensities,
)
from protocol.exceptions import MalformedMessage
from protocol.pools import POOLS_PATH, Pool, decode_pool_fill
from protocol.segments import Segment
from protocol.user_state import UserStateWire, decode_user_state
from resilience.backoff import wait_s
from resilience.circuit_breaker import CircuitBreaker, State

log = logging.getLogger(__name__)

Call = Literal["personalize", "feedback", "explain", "pools", "user_state"]
# What a failed attempt ended with: the transport's error, or the origin's outage status.
Failure = httpx.HTTPError | int
Outcome = Literal["ok", "rejected", "outage"]

# The statuses that say the origin cannot answer anyone now (a gateway's, an overloaded or
# unavailable origin's); any other error status is about the request that got it.
OUTAGE_STATUSES = frozenset({502, 503, 504})

_JSON = {"content-type": "application/json"}

# Full jitter over base * 2**attempt: 0-20 ms before the first retry, enough to let a
# dropped connection be replaced without adding a visible delay.
BASE_BACKOFF_S = 0.02
# A retry needs this share of the call's budget still left to have a fair chance to finish.
MIN_BUDGET_TO_RETRY = 0.3


def backoff_s(attempt: int, rng: random.Random, *, base_s: float = BASE_BACKOFF_S) -> float:
    """The pause before retrying after failed attempt ``attempt`` (0: the first): uniform
    over [0, base * 2**attempt] ("full jitter", ``resilience.backoff``), so the edges that
    saw the same failure do not come back to the origin all at the same instant."""
    return wait_s(attempt, rng.random(), base_s=base_s, jitter="full")


def status_outcome(status: int) -> Outcome:
    """What an answer's status says: a success, the origin refusing this one request
    (``rejected``: its content is the cause, a retry fails alike), or an outage."""
    if status < 400:
        return "ok"
    if status in OUTAGE_STATUSES:
        return "outage"
    return "rejected"


def should_retry(kind: Call, failure: Failure, attempt: int, *, retries: int = 1) -> bool:
    """May the call be tried again after its attempt ``attempt`` (0: the first) failed?"""
    if attempt >= retries:
        return False
    if isinstance(failure, httpx.ConnectError):
        # The connection was never made, so the request was never sent.
        return True
    # Every call is idempotent: personalize and explain read; feedback is deduplicated by
    # the origin.
    if isinstance(failure, int):
        return status_outcome(failure) == "outage"
    return isinstance(failure, httpx.TimeoutException)


def budget_allows_retry(
    remaining_s: float, budget_s: float, *, min_fraction: float = MIN_BUDGET_TO_RETRY
) -> bool:
    """Is enough of the call's budget left for another attempt to be worth starting?"""
    return remaining_s >= min_fraction * budget_s


@dataclass(frozen=True, slots=True)
class Personalized:
    """The origin's personalize answer, the audience it was built for, and what the edge's
    decision log needs of it: the context cell, the policy and each item's propensity."""

    answer: PersonalizeResponse
    audience: Audience
    context: str = ""
    policy: str = ""
    propensities: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class Explained:
    """The origin's explanation, and the segment it was made for when it used nothing of the
    user's but that segment (``EXPLAIN_SCOPE_HEADER``); None: the user's own."""

    answer: ExplainResponse
    segment: Segment | None


def _personalized(
    answer: PersonalizeResponse, headers: httpx.Headers, *, asked: Audience, user_id: str
) -> Personalized:
    """An answer with what its headers say: the audience the origin built it for
    (``protocol.audience.declared``), its context cell, policy and propensities."""
    return Personalized(
        answer,
        declared(headers.get(AUDIENCE_HEADER), asked=asked, user_id=user_id),
        context=headers.get(CONTEXT_HEADER, ""),
        policy=headers.get(POLICY_HEADER, ""),
        propensities=parse_propensities(headers.get(PROPENSITIES_HEADER), len(answer.items)),
    )


def explained_segment(scope: str | None) -> Segment | None:
    """The segment of an ``EXPLAIN_SCOPE_HEADER`` value (``segment:<segment>``), else None."""
    if scope is None:
        return None
    kind, _, name = scope.partition(":")
    if kind != SEGMENT_SCOPE:
        return None
    try:
        return Segment(name)
    except ValueError:
        return None


def default_breaker(clock: Callable[[], float]) -> CircuitBreaker:
    """The origin's circuit: open after 5 failures in a row (or half of the last 20), for
    1 s, then each failed probe doubles the wait up to 30 s. An origin restarted by its
    supervisor answers again within a few seconds; a fixed 5 s would refuse feedback and
    fills for longer than the outage itself (measured by benchmarks.faults)."""
    return CircuitBreaker(clock=clock, open_s=1.0, max_open_s=30.0)


class OriginClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        max_connections: int = 64,
        token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retries: int = 1,
        base_backoff_s: float = BASE_BACKOFF_S,
        breaker: CircuitBreaker | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """``timeout_s`` is the whole budget of one call, retries included. ``breaker``
        defaults to a ``CircuitBreaker`` on ``clock`` with its default settings."""
        # The origin's service token (PERSO_ORIGIN_TOKEN), sent with every request.
        auth = {"authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=auth,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )
        self._timeout_s = timeout_s
        self._retries = retries
        self._base_backoff_s = base_backoff_s
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        # Public so the app can report its state and counters.
        self.breaker = breaker if breaker is not None else default_breaker(clock)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def personalize(
        self, request: PersonalizeRequest, *, audience: Audience, logged_by: str | None = None
    ) -> Personalized:
        """The origin's answer to ``request``, asked for ``audience`` (a shared one: ranked
        for the segment, nothing of the user's used), and the audience the origin says it
        built it for (``protocol.audience.declared``). ``logged_by``: the edge logs the
        decisions it serves from the answer, so the origin does not."""
        headers = dict(_JSON)
        if isinstance(audience, Shared):
            headers[FILL_SCOPE_HEADER] = SEGMENT_SCOPE
        if logged_by is not None:
            headers[DECISION_BY_HEADER] = logged_by
        body = request.model_dump_json(exclude_none=True)
        response = await self._post("personalize", "/v1/personalize", body.encode(), headers)
        try:
            answer = PersonalizeResponse.model_validate_json(response.content)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid personalize body: {exc}") from exc
        return _personalized(answer, response.headers, asked=audience, user_id=request.user_id)

    async def pools(
        self, request: PersonalizeRequest, *, audience: Shared, logged_by: str | None = None
    ) -> tuple[Personalized, Pool]:
        """A shared fill with its candidate pool (``POST /v1/internal/pools``): the
        segment's answer, as ``personalize`` gives it for a shared audience, and the pool
        an edge ranks the segment's users from."""
        headers = {**_JSON, FILL_SCOPE_HEADER: SEGMENT_SCOPE}
        if logged_by is not None:
            headers[DECISION_BY_HEADER] = logged_by
        body = request.model_dump_json(exclude_none=True).encode()
        response = await self._post("pools", POOLS_PATH, body, headers)
        try:
            raw_answer, pool = decode_pool_fill(response.content)
            answer = PersonalizeResponse.model_validate_json(raw_answer)
        except (MalformedMessage, ValidationError) as exc:
            raise OriginUnavailable(f"origin sent an invalid pool fill: {exc}") from exc
        personalized = _personalized(
            answer, response.headers, asked=audience, user_id=request.user_id
        )
        if not isinstance(personalized.audience, Shared):
            raise OriginUnavailable("origin built a pool for one user: refused")
        return personalized, pool

    async def user_state(self, user_id: str) -> UserStateWire:
        """What the edge needs to rank for ``user_id`` itself: their model and preferences
        (``GET /v1/internal/users/{user_id}/state``)."""
        path = f"/v1/internal/users/{quote(user_id, safe='')}/state"
        response = await self._post("user_state", path, b"", {}, method="GET")
        try:
            state = decode_user_state(response.content)
        except MalformedMessage as exc:
            raise OriginUnavailable(f"origin sent an invalid user state: {exc}") from exc
        if state.user_id != user_id:
            raise OriginUnavailable(f"origin sent the state of {state.user_id!r} for {user_id!r}")
        return state

    async def feedback(self, body: bytes) -> FeedbackResponse:
        response = await self._post("feedback", "/v1/feedback", body, _JSON)
        try:
            return FeedbackResponse.model_validate_json(response.content)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid feedback body: {exc}") from exc

    async def explain(self, request: ExplainRequest, *, fill_for: Segment | None) -> Explained:
        """The origin's explanation; ``fill_for``: ask for ``fill_for``'s segment-wide one (an
        edge fill, ``FILL_SCOPE_HEADER`` and ``SEGMENT_HEADER``), to be shared by the segment."""
        headers = dict(_JSON)
        if fill_for is not None:
            headers[FILL_SCOPE_HEADER] = SEGMENT_SCOPE
            headers[SEGMENT_HEADER] = fill_for.value
        body = request.model_dump_json(exclude_none=True).encode()
        response = await self._post("explain", "/v1/explain", body, headers)
        try:
            answer = ExplainResponse.model_validate_json(response.content)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid explain body: {exc}") from exc
        return Explained(answer, explained_segment(response.headers.get(EXPLAIN_SCOPE_HEADER)))

    async def healthy(self) -> bool:
        # Not through the breaker: a health check is how one learns the origin is back.
        try:
            response = await self._client.get("/healthz")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _post(
        self, kind: Call, path: str, body: bytes, headers: dict[str, str], *, method: str = "POST"
    ) -> httpx.Response:
        """The policy: the breaker's leave, retries while safe and in budget, one deadline."""
        deadline = self._clock() + self._timeout_s
        attempt = 0
        while True:
            if not self.breaker.allow():
                raise CircuitOpen(
                    f"{path}: circuit open after repeated origin failures, next probe in "
                    f"{self.breaker.retry_after_s():.2f} s"
                )
            try:
                response = await self._send(method, path, body, headers, deadline - self._clock())
            except httpx.HTTPError as exc:
                failure: Failure = exc
            else:
                outcome = status_outcome(response.status_code)
                if outcome == "ok":
                    return response
                if outcome == "rejected":
                    raise OriginRejected(response.status_code, response.content)
                failure = response.status_code
            delay = self._retry_delay(kind, failure, attempt, deadline)
            if delay is None:
                if isinstance(failure, int):
                    raise OriginUnavailable(f"{path}: origin answered {failure}")
                raise OriginUnavailable(f"{path}: {failure!r}") from failure
            await self._sleep(delay)
            attempt += 1

    def _retry_delay(
        self, kind: Call, failure: Failure, attempt: int, deadline: float
    ) -> float | None:
        """The pause before trying again, None when the call must give up."""
        # The failure that opened the circuit (a failed probe) is not retried into it.
        if self.breaker.state is State.OPEN:
            return None
        if not should_retry(kind, failure, attempt, retries=self._retries):
            return None
        delay = backoff_s(attempt, self._rng, base_s=self._base_backoff_s)
        if not budget_allows_retry(deadline - self._clock() - delay, self._timeout_s):
            return None
        return delay

    async def _send(
        self, method: str, path: str, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> httpx.Response:
        """One round trip that the breaker allowed, its outcome told to the breaker. A
        rejection (4xx, 500) counts as a success there: the origin is up and answering."""
        try:
            response = await self._client.request(
                method, path, content=body or None, headers=headers, timeout=timeout_s
            )
        except httpx.HTTPError as exc:
            self._failed(f"{path}: {exc!r}")
            raise
        except BaseException:
            # Cancelled (or a bug): nothing learnt about the origin, but a half-open probe
            # must give its slot back or the breaker refuses every call from now on.
            self.breaker.abandon()
            raise
        if status_outcome(response.status_code) == "outage":
            self._failed(f"{path}: origin answered {response.status_code}")
        else:
            self.breaker.record_success()
        return response

    def _failed(self, what: str) -> None:
        """Tell the breaker; say so once when that opens the circuit (the calls it then
        refuses are logged quietly by their callers)."""
        was = self.breaker.state
        self.breaker.record_failure()
        if self.breaker.state is State.OPEN and was is not State.OPEN:
            log.warning(
                "origin circuit open for %.1f s after %s", self.breaker.retry_after_s(), what
            )
