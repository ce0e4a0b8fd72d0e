"""The edge's client of the origin: pooled keep-alive connections, one timeout budget.

Transport failures, timeouts and 5xx become ``OriginUnavailable``; 4xx become
``OriginRejected``. ``transport`` is the seam for tests (httpx ``MockTransport``).
"""

from __future__ import annotations

import httpx
from pydantic import ValidationError

from edge.exceptions import OriginRejected, OriginUnavailable
from protocol.api import (
    FILL_SCOPE_HEADER,
    SEGMENT_SCOPE,
    FeedbackResponse,
    PersonalizeRequest,
    PersonalizeResponse,
)

_JSON = {"content-type": "application/json"}


class OriginClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        max_connections: int = 64,
        token: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
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

    async def aclose(self) -> None:
        await self._client.aclose()

    async def personalize(
        self, request: PersonalizeRequest, *, segment_scope: bool
    ) -> PersonalizeResponse:
        headers = dict(_JSON)
        if segment_scope:
            headers[FILL_SCOPE_HEADER] = SEGMENT_SCOPE
        body = request.model_dump_json(exclude_none=True)
        raw = await self._post("/v1/personalize", body.encode(), headers)
        try:
            return PersonalizeResponse.model_validate_json(raw)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid personalize body: {exc}") from exc

    async def feedback(self, body: bytes) -> FeedbackResponse:
        raw = await self._post("/v1/feedback", body, _JSON)
        try:
            return FeedbackResponse.model_validate_json(raw)
        except ValidationError as exc:
            raise OriginUnavailable(f"origin sent an invalid feedback body: {exc}") from exc

    async def healthy(self) -> bool:
        try:
            response = await self._client.get("/healthz")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _post(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        try:
            response = await self._client.post(path, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise OriginUnavailable(f"{path}: {exc!r}") from exc
        if response.status_code >= 500:
            raise OriginUnavailable(f"{path}: origin answered {response.status_code}")
        if response.status_code >= 400:
            raise OriginRejected(response.status_code, response.content)
        return response.content
