"""One of an edge's origins: its pooled keep-alive connections, its circuit breaker, its
standing in the rotation (``edge.origins.rotation``) and its counters.

``send`` is one round trip (the primitive); ``edge.origins.client`` owns the policy that
picks a link, retries elsewhere and holds the deadline. What a status means is decided
here, once, for the breaker, the ejection rules and the retry rules alike
(``status_outcome``): 429, 502, 503, 504 (and a transport failure or a timeout) are the
origin's outage; any other error status is the origin answering this one request.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Literal

import httpx

from edge.origins.rotation import (
    Candidate,
    EjectionRules,
    Standing,
    after_check,
    after_outage,
    after_success,
    candidate,
    is_ejected,
)
from resilience.circuit_breaker import CircuitBreaker, State

log = logging.getLogger(__name__)

Outcome = Literal["ok", "rejected", "outage"]

# The statuses that say the origin cannot answer anyone now (a gateway's, an overloaded or
# unavailable origin's); any other error status is about the request that got it. An
# origin's 429 is its own overload (``PERSO_ORIGIN_MAX_INFLIGHT``: it limits no client),
# so feedback it gives is held at the edge, and a held request it gives is sent again
# later, never dropped as refused.
OUTAGE_STATUSES = frozenset({429, 502, 503, 504})

READY_PATH = "/readyz"
ALIVE_PATH = "/healthz"


def status_outcome(status: int) -> Outcome:
    """What an answer's status says: a success, the origin refusing this one request
    (``rejected``: its content is the cause, a retry fails alike), or an outage."""
    if status < 400:
        return "ok"
    if status in OUTAGE_STATUSES:
        return "outage"
    return "rejected"


def default_breaker(clock: Callable[[], float]) -> CircuitBreaker:
    """The origin's circuit: open after 5 failures in a row (or half of the last 20), for
    1 s, then each failed probe doubles the wait up to 30 s. An origin restarted by its
    supervisor answers again within a few seconds; a fixed 5 s would refuse feedback and
    fills for longer than the outage itself (measured by benchmarks.faults)."""
    return CircuitBreaker(clock=clock, open_s=1.0, max_open_s=30.0)


class OriginLink:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        max_connections: int,
        headers: dict[str, str],
        transport: httpx.AsyncBaseTransport | None,
        breaker: CircuitBreaker,
        rules: EjectionRules,
        clock: Callable[[], float],
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.url = url
        self._client = httpx.AsyncClient(
            base_url=url,
            headers=headers,
            verify=verify,
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )
        self._timeout_s = timeout_s
        self._rules = rules
        self._clock = clock
        self.breaker = breaker
        self.standing = Standing()
        self.inflight = 0
        # Counters for /metrics: attempts sent, the outages among them, ejections.
        self.requests = 0
        self.outages = 0
        self.ejections = 0

    async def aclose(self) -> None:
        await self._client.aclose()

    def candidate(self, now: float) -> Candidate:
        cooling = self.breaker.state is State.OPEN and self.breaker.retry_after_s() > 0
        return candidate(self.standing, inflight=self.inflight, cooling=cooling, now=now)

    def ejected(self) -> bool:
        return is_ejected(self.standing, self._clock())

    async def send(
        self, method: str, path: str, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> httpx.Response:
        """One round trip that the breaker allowed, its outcome told to the breaker and to
        the standing. A rejection (4xx, 500) is a success there: the origin is answering."""
        self.inflight += 1
        self.requests += 1
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
        finally:
            self.inflight -= 1
        if status_outcome(response.status_code) == "outage":
            self._failed(f"{path}: origin answered {response.status_code}")
        else:
            self.breaker.record_success()
            self.standing = after_success(self.standing)
        return response

    async def alive(self) -> bool:
        """Does the origin answer its ``/healthz``? Not through the breaker, nothing
        recorded: what an operator asks (``/readyz``, ``/dependencies`` of the edge)."""
        try:
            response = await self._client.get(ALIVE_PATH)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def check(self) -> bool:
        """The active health check: ``GET /readyz`` within the call budget, its verdict
        applied to the standing. A pass after a failed check also ends the circuit's
        cooldown (the next call is its probe): an origin back from a long outage would
        otherwise wait up to the breaker's longest cooldown for traffic. A pass alone does
        not (an origin whose calls fail while its ``/readyz`` answers would be probed at
        every check instead of backing off)."""
        try:
            response = await self._client.get(READY_PATH, timeout=self._timeout_s)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        was_ready = self.standing.ready
        self._apply(after_check(self.standing, ok, self._clock(), self._rules))
        if ok and was_ready is False:
            self.breaker.end_cooldown()
            log.info("origin %s passed its health check: back in the rotation", self.url)
        elif was_ready is not False:
            log.warning("origin %s failed its health check: out of the rotation", self.url)
        return ok

    def _failed(self, what: str) -> None:
        """Tell the breaker and the standing; say so once when that opens the circuit or
        ejects the origin (the calls that then skip it are not news)."""
        was = self.breaker.state
        self.breaker.record_failure()
        if self.breaker.state is State.OPEN and was is not State.OPEN:
            log.warning(
                "origin %s circuit open for %.1f s after %s",
                self.url,
                self.breaker.retry_after_s(),
                what,
            )
        self.outages += 1
        ejections = self.ejections
        self._apply(after_outage(self.standing, self._clock(), self._rules))
        if self.ejections > ejections:
            log.warning(
                "origin %s ejected for %.1f s after %d outages in a row (%s)",
                self.url,
                self.standing.ejected_until - self._clock(),
                self._rules.after,
                what,
            )

    def _apply(self, standing: Standing) -> None:
        if standing.ejections > self.standing.ejections:
            self.ejections += 1
        self.standing = standing
