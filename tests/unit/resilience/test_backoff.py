from __future__ import annotations

import math
import random

import pytest

from resilience.backoff import Backoff, Jitter, decorrelated, jittered, step, wait_s


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "multiplier", "expected"),
    [
        (0, 0.1, 1.0, 2.0, 0.1),
        (1, 0.1, 1.0, 2.0, 0.2),
        (3, 0.1, 1.0, 2.0, 0.8),
        (4, 0.1, 1.0, 2.0, 1.0),  # capped
        (2, 0.01, 0.25, 1.5, 0.0225),
        (10_000, 1.0, 30.0, 2.0, 30.0),  # no overflow
        (10_000, 1.0, math.inf, 2.0, 2.0**64),
        (5, 0.5, 60.0, 1.0, 0.5),  # a multiplier of 1: constant
    ],
)
def test_step(attempt: int, base: float, cap: float, multiplier: float, expected: float) -> None:
    assert step(attempt, base, cap, multiplier) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("args", "message"),
    [((-1, 0.1), "attempt"), ((0, -0.1), "base_s"), ((0, 0.1, 1.0, 0.5), "multiplier")],
)
def test_nonsense_is_refused(args: tuple[float, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        step(*args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("jitter", "u", "expected"),
    [
        ("none", 0.7, 2.0),
        ("full", 0.0, 0.0),
        ("full", 0.5, 1.0),
        ("full", 0.999, 1.998),
        ("equal", 0.0, 1.0),
        ("equal", 0.5, 1.5),
        ("shaved", 0.0, 2.0),
        ("shaved", 0.5, 1.8),  # fraction 0.2: at most 20% off
    ],
)
def test_jitter(jitter: Jitter, u: float, expected: float) -> None:
    assert jittered(2.0, u, jitter) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("previous", "u", "expected"),
    [(0.0, 0.0, 0.01), (0.0, 1.0, 0.03), (0.1, 1.0, 0.3), (0.1, 0.5, 0.155), (1.0, 1.0, 0.5)],
)
def test_decorrelated(previous: float, u: float, expected: float) -> None:
    assert decorrelated(previous, u, base_s=0.01, cap_s=0.5) == pytest.approx(expected)


def test_full_jitter_spreads_within_the_step() -> None:
    rng = random.Random(7)
    waits = [wait_s(3, rng.random(), base_s=0.1, cap_s=1.0) for _ in range(1000)]
    assert all(0.0 <= w <= 0.8 for w in waits)
    assert len(set(waits)) == 1000


def test_a_loop_backs_off_and_starts_over_after_a_success() -> None:
    backoff = Backoff(base_s=0.5, cap_s=3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_a_loop_with_full_jitter_draws_from_its_source() -> None:
    backoff = Backoff(base_s=1.0, cap_s=8.0, jitter="full", draw=lambda: 0.25)
    assert [backoff.next() for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
