"""The token bucket (``resilience.token_bucket``) as tables: what its two kinds of user ask
of it, the edge's rate limits (``take`` answers how long to wait) and the LLM gateway
(``tokens`` counts fractions, ``wait_s`` looks without taking)."""

from __future__ import annotations

import pytest

from resilience.token_bucket import TokenBucket


@pytest.mark.parametrize(
    ("rate", "capacity", "steps"),
    [
        # (seconds passed before the take, what take returns)
        (10.0, None, [(0, 0.0)] * 10 + [(0, 0.1)]),
        (10.0, None, [(0, 0.0)] * 10 + [(0.05, 0.05), (0.05, 0.0), (0, 0.1)]),
        # Capacity is at least one token, so a slow rate still allows one request.
        (0.5, None, [(0, 0.0), (0, 2.0), (1.0, 1.0), (1.0, 0.0)]),
        # Refill stops at the capacity: a long idle time does not bank more than a burst.
        (2.0, None, [(0, 0.0), (0, 0.0), (100, 0.0), (0, 0.0), (0, 0.5)]),
        (2.0, 1.0, [(0, 0.0), (0, 0.5), (0.5, 0.0)]),
        (0.5, 10.0, [(0, 0.0)] * 10 + [(0, 2.0), (1.0, 1.0), (1.0, 0.0)]),
        # A clock stepping back changes nothing, neither then nor when it comes forward again.
        (1.0, None, [(0, 0.0), (-5, 1.0), (5, 1.0), (1, 0.0)]),
        (4.0, None, [(0, 0.0)] * 4 + [(0, 0.25), (0.1, 0.15), (-5.0, 0.15), (5.0, 0.15)]),
    ],
)
def test_take(rate: float, capacity: float | None, steps: list[tuple[float, float]]) -> None:
    now = 100.0
    bucket = TokenBucket(rate, now, capacity)
    for n, (passed, wait) in enumerate(steps):
        now += passed
        assert bucket.take(now) == pytest.approx(wait), f"step {n}"


@pytest.mark.parametrize(
    ("rate", "takes", "tick", "tokens_after"),
    [
        (10.0, 0, 0.0, 10.0),  # starts full: one second of burst
        (10.0, 10, 0.0, 0.0),
        (10.0, 10, 0.05, 0.5),  # fractions count
        (10.0, 10, 0.1, 1.0),
        (10.0, 3, 10.0, 10.0),  # refills up to the capacity, no further
        (0.5, 1, 1.0, 0.5),  # under one call a second: a capacity of one
        (0.5, 1, 2.0, 1.0),
    ],
)
def test_tokens_and_a_look_that_takes_none(
    rate: float, takes: int, tick: float, tokens_after: float
) -> None:
    bucket = TokenBucket(rate, 0.0)
    for _ in range(takes):
        assert bucket.take(0.0) == 0.0
    assert bucket.tokens(tick) == pytest.approx(tokens_after)
    assert (bucket.wait_s(tick) > 0.0) == (tokens_after < 1.0)
    assert bucket.tokens(tick) == pytest.approx(tokens_after)


def test_a_wait_of_exactly_the_answer_gets_in() -> None:
    bucket = TokenBucket(3.0, 1_767_225_600.0)
    now = 1_767_225_600.0
    while (wait := bucket.take(now)) == 0.0:
        pass
    assert bucket.take(now + wait) == 0.0


def test_a_refused_take_takes_nothing() -> None:
    bucket = TokenBucket(1.0, 0.0, capacity=3)
    assert bucket.take(0.0, n=2) == 0.0
    assert bucket.take(0.0, n=2) == pytest.approx(1.0)
    assert bucket.take(0.0, n=1) == 0.0


@pytest.mark.parametrize(
    ("rate", "capacity", "n", "match"),
    [
        (0.0, None, 1, "rate must be > 0"),
        (-1.0, None, 1, "rate must be > 0"),
        (5.0, 0.5, 1, "capacity must be >= 1"),
        (1.0, 3.0, 4, "can never fit"),
    ],
)
def test_impossible_buckets_are_refused(
    rate: float, capacity: float | None, n: int, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        TokenBucket(rate, 0.0, capacity).wait_s(0.0, n)
