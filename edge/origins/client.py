"""The edge's client of its origins: one or several (``PERSO_ORIGIN_URLS``), each with
pooled keep-alive connections and its own circuit breaker (``edge.origins.link``); one
timeout budget per call; bounded retries, on another origin when there is one.

What an answer means is decided in one place, ``edge.origins.link.status_outcome``:

- transport failures, timeouts, 429, 502, 503 and 504 say the origin is down, overloaded
  or unreachable: an outage. They become ``OriginUnavailable``, count against that origin's
  breaker and its ejection (``edge.origins.rotation``) and are retried while that is safe and
  in budget;
- every other status of 400 or more (a 4xx, or a 500 from a bug that this request's
  content triggered) is the origin answering this one request: ``OriginRejected`` with its
  status and body, never retried, on this origin or another (the same body fails the same
  way), and counted as a success by the breaker (the origin is up). So one client's bad
  request can neither open a circuit for everyone nor be multiplied by retries.

Each attempt goes to the first origin of ``edge.origins.rotation.order`` whose breaker lets it
through (healthy, non-ejected ones by fewest attempts in flight; else, in panic, the
others). A failed attempt is tried again only on an outage, while safe and in budget
(``edge.origins.retries``). Feedback has a budget of its own (``feedback_timeout_s``),
longer than the others': the origin tries its durable append again through a Redis
failover's promotion window, and a click the edge waits for a little longer is a click it
need not hold on its disk. When no breaker lets a call through it fails at once, without a
network call: edges serve what they have instead of piling onto failing origins. ``watch``
runs the active health checks, off the request path. ``transport`` is the seam for tests
(httpx ``MockTransport``): one for every origin, or one per origin URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NoReturn
from urllib.parse import quote

import httpx
from pydantic import ValidationError

from edge.exceptions import CircuitOpen, OriginRejected, OriginUnavailable
from edge.origins.answers import Explained, Personalized, explained_segment, read_personalized
from edge.origins.link import OriginLink, default_breaker, status_outcome
from edge.origins.retries import (
    BASE_BACKOFF_S,
    Call,
    Failure,
    attempt_timeout_s,
    backoff_s,
    budget_allows_retry,
    should_retry,
)
from edge.origins.rotation import EjectionRules, order
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
    TokenRequest,
    TokenResponse,
)
from protocol.audience import Audience, Shared
from protocol.decisions import DECISION_BY_HEADER
from protocol.exceptions import MalformedMessage
from protocol.item_vectors import (
    ITEM_VECTORS_OF_PATH,
    ITEM_VECTORS_PATH,
    ItemVectors,
    ItemVectorsPage,
    ItemVectorsRequest,
    decode_item_vectors,
)
from protocol.policies import LIVE_POLICY_PATH, Policy, decode_live
from protocol.pools import (
    POOL_ITEMS_PATH,
    POOLS_PATH,
    Pool,
    PoolItemsRequest,
    decode_pool,
    decode_pool_fill,
)
from protocol.segments import Segment
from protocol.user_model_wire import UserModelWire, decode_user_model
from resilience.circuit_breaker import CircuitBreaker, State

log = logging.getLogger(__name__)

# The network to the origins: one transport for all, or one per origin URL (tests).
Transports = httpx.AsyncBaseTransport | Mapping[str, httpx.AsyncBaseTransport]

_JSON = {"content-type": "application/json"}
# The origin's token route and the header its callers name their API key in
# (``origin.http.auth``; an edge never imports the origin).
TOKEN_PATH = "/v1/auth/token"
API_KEY_HEADER = "x-api-key"


class OriginClient:
    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        timeout_s: float,
        max_connections: int = 64,
        token: str | None = None,
        transport: Transports | None = None,
        retries: int = 1,
        base_backoff_s: float = BASE_BACKOFF_S,
        breaker: CircuitBreaker | None = None,
        ejection: EjectionRules | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        verify: ssl.SSLContext | bool = True,
        feedback_timeout_s: float | None = None,
    ) -> None:
        """``base_url``: the origin, or every origin (``PERSO_ORIGIN_URLS``); ``timeout_s``
        is the whole budget of one call, retries included (``feedback_timeout_s`` a
        feedback call's; None: ``timeout_s``); ``max_connections`` per origin.
        Each origin gets its own breaker, ``default_breaker(clock)``; ``breaker`` replaces it
        for a client of one origin. ``ejection``: outlier ejection's rules. ``verify``: what
        an https origin's certificate is verified with (``config.tls.client_verify``)."""
        urls = (base_url,) if isinstance(base_url, str) else tuple(base_url)
        if not urls or len(set(urls)) != len(urls):
            raise ValueError(f"need one origin URL or more, each once: {urls}")
        if breaker is not None and len(urls) > 1:
            raise ValueError("breaker is for a client of one origin: each of several has its own")
        # The origins' service token (PERSO_ORIGIN_TOKEN), sent with every request.
        auth = {"authorization": f"Bearer {token}"} if token else {}
        rules = ejection if ejection is not None else EjectionRules()
        # Public so the app can report each origin's state and counters.
        self.links = tuple(
            OriginLink(
                url,
                timeout_s=timeout_s,
                max_connections=max_connections,
                headers=auth,
                transport=transport[url] if isinstance(transport, Mapping) else transport,
                breaker=breaker if breaker is not None else default_breaker(clock),
                rules=rules,
                clock=clock,
                verify=verify,
            )
            for url in urls
        )
        self._timeout_s = timeout_s
        self._feedback_timeout_s = feedback_timeout_s or timeout_s
        self._retries = retries
        self._base_backoff_s = base_backoff_s
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        # Calls refused without a network call (no origin's circuit let them through), and
        # attempts sent to an origin out of the rotation because none was left in it.
        self.refused = 0
        self.panics = 0

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit of a client of one origin; each of several has its own (``links``)."""
        if len(self.links) != 1:
            raise TypeError("this client has several origins, each with its own breaker")
        return self.links[0].breaker

    def circuit_state(self) -> State:
        """The edge's circuit to its origins as a whole: closed while any origin's is, open
        when every one is, else half open. With one origin, that origin's."""
        states = {link.breaker.state for link in self.links}
        if State.CLOSED in states:
            return State.CLOSED
        return State.OPEN if states == {State.OPEN} else State.HALF_OPEN

    def retry_after_s(self) -> float:
        """Seconds until some origin's circuit lets a call through; 0.0 when one does now."""
        return min(link.breaker.retry_after_s() for link in self.links)

    @property
    def circuits_opened(self) -> int:
        """Times an origin's circuit opened, all origins together."""
        return sum(link.breaker.opened_total for link in self.links)

    async def aclose(self) -> None:
        for link in self.links:
            await link.aclose()

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
        return read_personalized(answer, response.headers, asked=audience, user_id=request.user_id)

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
        personalized = read_personalized(
            answer, response.headers, asked=audience, user_id=request.user_id
        )
        if not isinstance(personalized.audience, Shared):
            raise OriginUnavailable("origin built a pool for one user: refused")
        return personalized, pool

    async def pool_items(self, request: PoolItemsRequest) -> Pool:
        """Some items as rows of a pool this edge holds (``POST /v1/internal/pools/items``):
        a known user's own candidates the pool lacks (``edge.ranking.own_candidates``)."""
        body = request.model_dump_json(exclude_none=True).encode()
        response = await self._post("pool_items", POOL_ITEMS_PATH, body, _JSON)
        try:
            return decode_pool(response.content)
        except MalformedMessage as exc:
            raise OriginUnavailable(f"origin sent invalid pool items: {exc}") from exc

    async def item_vectors(self, request: ItemVectorsRequest) -> ItemVectors:
        """A page of the catalog's item vectors, or some items' (``POST
        /v1/internal/item-vectors`` or ``.../items``, ``edge.ranking.item_vectors``)."""
        body = request.model_dump_json(exclude_none=True).encode()
        path = ITEM_VECTORS_PATH if isinstance(request, ItemVectorsPage) else ITEM_VECTORS_OF_PATH
        response = await self._post("item_vectors", path, body, _JSON)
        try:
            return decode_item_vectors(response.content)
        except MalformedMessage as exc:
            raise OriginUnavailable(f"origin sent invalid item vectors: {exc}") from exc

    async def user_model(self, user_id: str) -> UserModelWire:
        """What the edge needs to rank for ``user_id`` itself: their model and preferences
        (``GET /v1/internal/users/{user_id}/state``)."""
        path = f"/v1/internal/users/{quote(user_id, safe='')}/state"
        response = await self._post("user_model", path, b"", {}, method="GET")
        try:
            state = decode_user_model(response.content)
        except MalformedMessage as exc:
            raise OriginUnavailable(f"origin sent an invalid user model: {exc}") from exc
        if state.user_id != user_id:
            raise OriginUnavailable(f"origin sent the state of {state.user_id!r} for {user_id!r}")
        return state

    async def live_policy(self) -> tuple[int, Policy]:
        """The policy the origin ranks by now and the epoch that made it live (``GET
        /v1/internal/policy``)."""
        response = await self._post("policy", LIVE_POLICY_PATH, b"", {}, method="GET")
        try:
            return decode_live(response.content)
        except MalformedMessage as exc:
            raise OriginUnavailable(f"origin sent an invalid live policy: {exc}") from exc

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

    async def user_token(self, user_id: str, api_key: str) -> TokenResponse:
        """A user token from ``POST /v1/auth/token``, asked with ``api_key`` in
        ``X-API-Key`` as a shop's backend asks (the storefront's demo route,
        ``edge.http.demo_tokens``). The origin reads only the API key on that route; the service
        token every call here carries goes unused. Issuing a token changes nothing, so a
        retry on another origin is safe."""
        body = TokenRequest(user_id=user_id).model_dump_json(exclude_none=True).encode()
        headers = {**_JSON, API_KEY_HEADER: api_key}
        response = await self._post("token", TOKEN_PATH, body, headers)
        try:
            return TokenResponse.model_validate_json(response.content)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid token body: {exc}") from exc

    async def healthy(self) -> bool:
        """Does any origin answer its ``/healthz``? Not through the breakers: a health
        check is how one learns an origin is back."""
        return any(await asyncio.gather(*(link.alive() for link in self.links)))

    async def check(self) -> None:
        """One round of active health checks: every origin's ``/readyz`` at once."""
        await asyncio.gather(*(link.check() for link in self.links))

    async def watch(self, stop: asyncio.Event, interval_s: float) -> None:
        """The active health checks, every ``interval_s`` until ``stop`` (a background task
        of the edge's lifespan: the request path never waits for them). A client of one
        origin has no choice for them to inform: it returns at once, and that origin's
        breaker alone decides, as before there were several."""
        if len(self.links) < 2:
            return
        while not stop.is_set():
            try:
                await self.check()
            except Exception:
                # A bug must not end the checks for good: an origin they took out of the
                # rotation would stay out.
                log.exception("origin health checks failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)

    async def _post(
        self, kind: Call, path: str, body: bytes, headers: dict[str, str], *, method: str = "POST"
    ) -> httpx.Response:
        """The policy: an origin whose breaker gives leave, retries while safe and in
        budget (on another origin when there is one), one deadline."""
        budget_s = self._feedback_timeout_s if kind == "feedback" else self._timeout_s
        deadline = self._clock() + budget_s
        attempt = 0
        failed: OriginLink | None = None
        failure: Failure | None = None
        while True:
            link = self._pick(avoid=failed)
            if link is None:
                if failure is None:
                    self.refused += 1
                    raise CircuitOpen(
                        f"{path}: circuit open after repeated origin failures, next probe in "
                        f"{self.retry_after_s():.2f} s"
                    )
                _give_up(path, failure, failed)
            failover = len(self.links) > 1 and attempt < self._retries
            timeout_s = attempt_timeout_s(deadline - self._clock(), budget_s, failover=failover)
            try:
                response = await link.send(method, path, body, headers, timeout_s)
            except httpx.HTTPError as exc:
                failure = exc
            else:
                outcome = status_outcome(response.status_code)
                if outcome == "ok":
                    return response
                if outcome == "rejected":
                    raise OriginRejected(response.status_code, response.content)
                failure = response.status_code
            failed = link
            delay = self._retry_delay(
                kind, failure, attempt, failed, deadline=deadline, budget_s=budget_s
            )
            if delay is None:
                _give_up(path, failure, failed)
            if delay > 0:
                await self._sleep(delay)
            attempt += 1

    def _pick(self, *, avoid: OriginLink | None) -> OriginLink | None:
        """The origin for the next attempt, with its breaker's leave taken (``order``);
        None when no breaker gives it."""
        now = self._clock()
        avoided = None if avoid is None else self.links.index(avoid)
        candidates = [link.candidate(now) for link in self.links]
        for choice in order(candidates, self._rng, avoid=avoided):
            link = self.links[choice.index]
            if link.breaker.allow():
                self.panics += choice.panic
                return link
        return None

    def _retry_delay(
        self,
        kind: Call,
        failure: Failure,
        attempt: int,
        failed: OriginLink,
        *,
        deadline: float,
        budget_s: float,
    ) -> float | None:
        """The pause before trying again, None when the call must give up."""
        if not should_retry(kind, failure, attempt, retries=self._retries):
            return None
        # Another origin is tried at once: the pause spares the origin that just failed.
        alone = len(self.links) == 1
        delay = backoff_s(attempt, self._rng, base_s=self._base_backoff_s) if alone else 0.0
        if not budget_allows_retry(deadline - self._clock() - delay, budget_s):
            return None
        # The failure that opened a circuit (a failed probe) is not retried into it.
        now = self._clock()
        targets = [link for link in self.links if alone or link is not failed]
        if all(link.candidate(now).cooling for link in targets):
            return None
        return delay


def _give_up(path: str, failure: Failure, origin: OriginLink | None) -> NoReturn:
    where = f" ({origin.url})" if origin is not None else ""
    if isinstance(failure, int):
        raise OriginUnavailable(f"{path}: origin answered {failure}{where}")
    raise OriginUnavailable(f"{path}: {failure!r}{where}") from failure
