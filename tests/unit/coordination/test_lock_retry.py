"""Backoff policies and the retry loop of ``coordination``: pure functions, tables."""

from __future__ import annotations

import pytest

from coordination.exceptions import LockNotAcquired
from coordination.lock import Lease, acquire_with_retry
from coordination.retry import (
    AGGRESSIVE,
    DEFAULT,
    NO_RETRY,
    RetryPolicy,
    delay_caps,
    delays,
)


@pytest.mark.parametrize(
    ("policy", "caps"),
    [
        (NO_RETRY, []),
        (RetryPolicy(2, 0.1, 1.0), [0.1]),
        (RetryPolicy(5, 0.1, 1.0), [0.1, 0.2, 0.4, 0.8]),
        (RetryPolicy(6, 0.1, 0.5), [0.1, 0.2, 0.4, 0.5, 0.5]),
        (RetryPolicy(4, 0.1, 1.0, multiplier=1.0), [0.1, 0.1, 0.1]),
        (RetryPolicy(3, 0.0, 0.0), [0.0, 0.0]),
    ],
)
def test_caps_grow_exponentially_up_to_the_max(policy: RetryPolicy, caps: list[float]) -> None:
    assert delay_caps(policy) == pytest.approx(caps)


@pytest.mark.parametrize(
    ("draw", "expected"),
    [
        (0.0, [0.0, 0.0, 0.0]),
        (0.5, [0.05, 0.1, 0.2]),
        (0.999, [0.0999, 0.1998, 0.3996]),
    ],
)
def test_full_jitter_scales_each_cap_by_one_draw(draw: float, expected: list[float]) -> None:
    assert delays(RetryPolicy(4, 0.1, 1.0), lambda: draw) == pytest.approx(expected)


def test_each_wait_draws_anew() -> None:
    draws = iter([0.1, 0.9, 0.5])
    assert delays(RetryPolicy(4, 1.0, 10.0), lambda: next(draws)) == pytest.approx([0.1, 1.8, 2.0])


@pytest.mark.parametrize(
    ("preset", "attempts", "first_cap", "longest_cap"),
    [
        (NO_RETRY, 1, None, None),
        (DEFAULT, 10, 0.1, 1.0),
        (AGGRESSIVE, 50, 0.01, 0.25),
    ],
)
def test_presets_of_seed_003(
    preset: RetryPolicy, attempts: int, first_cap: float | None, longest_cap: float | None
) -> None:
    caps = delay_caps(preset)
    assert preset.attempts == attempts
    assert len(caps) == attempts - 1
    if caps:
        assert caps[0] == pytest.approx(first_cap)
        assert max(caps) == pytest.approx(longest_cap)
        assert caps == sorted(caps)


@pytest.mark.parametrize(
    ("attempts", "base", "top", "multiplier"),
    [(0, 0.1, 1.0, 2.0), (3, -0.1, 1.0, 2.0), (3, 0.5, 0.1, 2.0), (3, 0.1, 1.0, 0.5)],
)
def test_invalid_policies_are_refused(
    attempts: int, base: float, top: float, multiplier: float
) -> None:
    with pytest.raises(ValueError, match=r"."):
        RetryPolicy(attempts, base, top, multiplier)


class _Contended:
    """``try_acquire`` that finds the resource held ``busy`` times, then grants it."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.tries = 0

    async def __call__(self, resource: str, ttl_ms: int) -> Lease | None:
        self.tries += 1
        if self.tries <= self.busy:
            return None
        return Lease(resource, "token", self.tries, 0.0, ttl_ms)


@pytest.mark.parametrize(
    ("busy", "policy", "tries", "waits"),
    [
        (0, NO_RETRY, 1, []),
        (0, RetryPolicy(3, 0.1, 1.0), 1, []),
        (2, RetryPolicy(3, 0.1, 1.0), 3, [0.05, 0.1]),
        (4, RetryPolicy(5, 0.1, 0.2), 5, [0.05, 0.1, 0.1, 0.1]),
    ],
)
async def test_retry_loop_waits_between_attempts(
    busy: int, policy: RetryPolicy, tries: int, waits: list[float]
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    try_acquire = _Contended(busy)
    lease = await acquire_with_retry(try_acquire, "r", 1000, policy, rng=lambda: 0.5, sleep=sleep)
    assert lease.fencing == tries
    assert try_acquire.tries == tries
    assert slept == pytest.approx(waits)


@pytest.mark.parametrize("policy", [NO_RETRY, RetryPolicy(4, 0.1, 1.0)])
async def test_retry_loop_gives_up_after_its_attempts(policy: RetryPolicy) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    try_acquire = _Contended(busy=100)
    with pytest.raises(LockNotAcquired) as raised:
        await acquire_with_retry(try_acquire, "r", 1000, policy, rng=lambda: 0.5, sleep=sleep)
    assert raised.value.attempts == policy.attempts
    assert try_acquire.tries == policy.attempts
    assert len(slept) == policy.attempts - 1


def test_long_policies_do_not_overflow() -> None:
    caps = delay_caps(RetryPolicy(5000, 0.001, 0.005))
    assert len(caps) == 4999
    assert max(caps) == pytest.approx(0.005)
