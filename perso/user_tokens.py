"""User tokens for simulated browsers (the demo, load tests, end-to-end tests).

What a customer's backend does for its signed-in users: ask the origin once per user
(``POST /v1/auth/token`` with an API key) and hand the token to the browser, which sends
it to the edge as ``Authorization: Bearer``. Tokens are kept and re-used until shortly
before they expire.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import httpx

RENEW_BEFORE_S = 60.0


class UserTokens:
    def __init__(
        self, origin_url: str, api_key: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._url = origin_url.rstrip("/") + "/v1/auth/token"
        self._api_key = api_key
        self._clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}

    async def headers(self, client: httpx.AsyncClient, user_id: str) -> dict[str, str]:
        """``Authorization`` for ``user_id``, fetching a token the first time."""
        return {"authorization": f"Bearer {await self.token(client, user_id)}"}

    async def token(self, client: httpx.AsyncClient, user_id: str) -> str:
        held = self._tokens.get(user_id)
        if held is not None and held[1] - RENEW_BEFORE_S > self._clock():
            return held[0]
        response = await client.post(
            self._url, json={"user_id": user_id}, headers={"x-api-key": self._api_key}
        )
        response.raise_for_status()
        body = response.json()
        expires = datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))
        self._tokens[user_id] = (str(body["token"]), expires.timestamp())
        return str(body["token"])
