"""The LLM tier's two caches in Redis (the prompt cache and the response cache).

- The **prompt cache** keeps the model's message for one exact prompt and model size: the
  same context asked twice is paid for once.
- The **response cache** keeps an explanation per (user segment, item category,
  recommendation source, style): not per user, which would rarely hit, but per segment,
  which response caching expects to answer about 40% of explanations.

Both expire after ``llm_cache_ttl_s`` (response caching: an hour; explanations change slowly). A
cache is never worth an error: an unreadable entry or an unreachable Redis is a miss, and a
write that fails is dropped.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from redis.exceptions import RedisError

from origin.llm.model import Explanation, Factor, ModelSize, Prompt, Style
from protocol import keys
from redis_client.client import RedisClient

CODEC_VERSION = 1
_EXPLANATION_FIELDS = {"v", "headline", "detailed", "factors", "llm_generated", "model"}
_FACTOR_FIELDS = {"name", "weight", "description"}


def _digest(*parts: str) -> str:
    # Length-prefixed, so that no two different tuples of parts hash the same bytes.
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(4, "big"))
        h.update(data)
    return h.hexdigest()


def prompt_digest(prompt: Prompt, size: ModelSize) -> str:
    return _digest(size, prompt.system, prompt.user, str(prompt.max_output_tokens))


def response_digest(segment: str, category: str, source: str, style: Style) -> str:
    return _digest(segment, category, source, style)


def encode_explanation(explanation: Explanation) -> bytes:
    return json.dumps(
        {
            "v": CODEC_VERSION,
            "headline": explanation.headline,
            "detailed": explanation.detailed,
            "factors": [
                {"name": f.name, "weight": f.weight, "description": f.description}
                for f in explanation.factors
            ],
            "llm_generated": explanation.llm_generated,
            "model": explanation.model,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode("utf-8")


def _factor(raw: Any) -> Factor | None:
    if not isinstance(raw, dict) or raw.keys() != _FACTOR_FIELDS:
        return None
    name, weight, description = raw["name"], raw["weight"], raw["description"]
    if not (isinstance(name, str) and isinstance(description, str)):
        return None
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        return None
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        return None
    return Factor(name, float(weight), description)


def decode_explanation(raw: bytes) -> Explanation | None:
    """The explanation ``encode_explanation`` wrote; None for anything else (a corrupt or
    foreign entry, another codec version)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.keys() != _EXPLANATION_FIELDS:
        return None
    if data["v"] != CODEC_VERSION or isinstance(data["v"], bool):
        return None
    headline, detailed, model = data["headline"], data["detailed"], data["model"]
    if not (isinstance(headline, str) and isinstance(detailed, str)):
        return None
    if not isinstance(data["llm_generated"], bool) or not isinstance(model, str | None):
        return None
    if not isinstance(data["factors"], list):
        return None
    factors = tuple(_factor(f) for f in data["factors"])
    if any(f is None for f in factors):
        return None
    return Explanation(
        headline=headline,
        detailed=detailed,
        factors=tuple(f for f in factors if f is not None),
        llm_generated=data["llm_generated"],
        model=model,
    )


class _Counted:
    def __init__(self, redis: RedisClient, ttl_s: int) -> None:
        if ttl_s < 1:
            raise ValueError(f"ttl_s must be >= 1, got {ttl_s}")
        self._redis = redis
        self.ttl_s = ttl_s
        self.hits = 0
        self.misses = 0
        self.errors = 0  # Redis calls that failed (each also a miss or a dropped write)

    async def _get(self, key: str) -> bytes | None:
        try:
            raw = await self._redis.get(key)
        except RedisError:
            self.errors += 1
            return None
        # Clients made with decode_responses=True hand back str: use the bytes either way.
        return raw.encode("utf-8") if isinstance(raw, str) else raw

    async def _set(self, key: str, value: bytes | str) -> None:
        try:
            await self._redis.set(key, value, ex=self.ttl_s)
        except RedisError:
            self.errors += 1


class PromptCache(_Counted):
    """The model's message (``Completion.content``) per exact prompt and model size."""

    async def get(self, prompt: Prompt, size: ModelSize) -> str | None:
        raw = await self._get(keys.llm_prompt(prompt_digest(prompt, size)))
        if raw is None:
            self.misses += 1
            return None
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.misses += 1
            return None
        self.hits += 1
        return content

    async def put(self, prompt: Prompt, size: ModelSize, content: str) -> None:
        await self._set(keys.llm_prompt(prompt_digest(prompt, size)), content.encode("utf-8"))


class ResponseCache(_Counted):
    """An explanation per (segment, category, recommendation source, style)."""

    async def get(
        self, segment: str, category: str, source: str, style: Style
    ) -> Explanation | None:
        raw = await self._get(keys.llm_response(response_digest(segment, category, source, style)))
        explanation = decode_explanation(raw) if raw is not None else None
        if explanation is None:
            self.misses += 1
        else:
            self.hits += 1
        return explanation

    async def put(
        self, segment: str, category: str, source: str, style: Style, explanation: Explanation
    ) -> None:
        await self._set(
            keys.llm_response(response_digest(segment, category, source, style)),
            encode_explanation(explanation),
        )
