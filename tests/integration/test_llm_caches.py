"""The LLM tier's prompt and response caches on the real Redis."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from origin.llm.caches import PromptCache, ResponseCache, prompt_digest, response_digest
from origin.llm.model import Explanation, Factor, Prompt
from protocol import keys

PROMPT = Prompt(
    system="sys", user='Explain "Aurora Headphones".', max_output_tokens=200, input_tokens=9
)
EXPLANATION = Explanation(
    headline="Aurora Headphones match your taste.",
    detailed="Close to what you viewed. Popular with shoppers like you.",
    factors=(Factor("category_match", 0.8, "Matches your interests"),),
    llm_generated=True,
    model="small-model",
)


async def test_prompt_cache_round_trip_per_size(redis: Redis) -> None:
    cache = PromptCache(redis, ttl_s=3600)
    assert await cache.get(PROMPT, "small") is None
    await cache.put(PROMPT, "small", '{"headline": "é"}')
    assert await cache.get(PROMPT, "small") == '{"headline": "é"}'
    # The other model's answer to the same prompt is another entry.
    assert await cache.get(PROMPT, "large") is None
    assert (cache.hits, cache.misses) == (1, 2)
    ttl = await redis.ttl(keys.llm_prompt(prompt_digest(PROMPT, "small")))
    assert 3590 < ttl <= 3600


async def test_response_cache_round_trip_per_segment_category_source_style(redis: Redis) -> None:
    cache = ResponseCache(redis, ttl_s=60)
    await cache.put("active:mobile", "electronics", "collaborative", "concise", EXPLANATION)
    assert (
        await cache.get("active:mobile", "electronics", "collaborative", "concise") == EXPLANATION
    )
    for other in (
        ("casual:mobile", "electronics", "collaborative", "concise"),
        ("active:mobile", "books", "collaborative", "concise"),
        ("active:mobile", "electronics", "trending", "concise"),
        ("active:mobile", "electronics", "collaborative", "detailed"),
    ):
        assert await cache.get(*other) is None
    assert (cache.hits, cache.misses) == (1, 4)
    key = keys.llm_response(
        response_digest("active:mobile", "electronics", "collaborative", "concise")
    )
    assert 50 < await redis.ttl(key) <= 60


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b'{"v": 1}', b"\xff\xfe", b'["a"]'],
    ids=["empty", "text", "partial", "binary", "list"],
)
async def test_corrupt_response_entry_is_a_miss(redis: Redis, raw: bytes) -> None:
    cache = ResponseCache(redis, ttl_s=60)
    await redis.set(keys.llm_response(response_digest("s", "c", "content", "concise")), raw)
    assert await cache.get("s", "c", "content", "concise") is None
    assert (cache.hits, cache.misses) == (0, 1)


async def test_expired_entries_are_misses(redis: Redis) -> None:
    prompts, responses = PromptCache(redis, ttl_s=1), ResponseCache(redis, ttl_s=1)
    await prompts.put(PROMPT, "large", "{}")
    await responses.put("s", "c", "fresh", "detailed", EXPLANATION)
    for key in (
        keys.llm_prompt(prompt_digest(PROMPT, "large")),
        keys.llm_response(response_digest("s", "c", "fresh", "detailed")),
    ):
        assert await redis.pttl(key) > 0
        await redis.pexpire(key, 1)
    await asyncio.sleep(0.01)
    assert await prompts.get(PROMPT, "large") is None
    assert await responses.get("s", "c", "fresh", "detailed") is None


async def test_unreachable_redis_is_a_miss() -> None:
    dead = Redis.from_url("redis://127.0.0.1:1", socket_connect_timeout=0.2)
    try:
        prompts, responses = PromptCache(dead, ttl_s=60), ResponseCache(dead, ttl_s=60)
        await prompts.put(PROMPT, "small", "{}")
        assert await prompts.get(PROMPT, "small") is None
        assert await responses.get("s", "c", "content", "concise") is None
        assert (prompts.errors, prompts.misses, responses.errors) == (2, 1, 1)
    finally:
        await dead.aclose()
