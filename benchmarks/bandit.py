"""Thompson sampling for the 100 candidates of one request, against MABWiser.

Both sides get the same 100 arms with the same history (a few thousand binary rewards,
so each arm has its own Beta posterior). Per request:

- ours, segment-wide (``relevance.slate.decide`` with no user model and no propensity
  runs): one draw per candidate of its engagement rate, the best 10 by draw; the same
  work as MABWiser's figure;
- ours, full: what the origin does for a known user between reading the posteriors and
  answering: decay and cold priors (``origin.learned.posteriors``), the user's Thompson
  draw of θ (dimension 128) added to each candidate's drawn rate, the best 10, and the 63
  further runs that estimate each shown item's propensity;
- MABWiser: ``MAB.predict_expectations()`` with ``LearningPolicy.ThompsonSampling``,
  which draws one sample per arm.

Run: ``.venv/bin/python -m benchmarks.bandit`` (MABWiser comes with ``make bench-deps``;
without it its figures are null).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from benchmarks.report import finish, machine
from origin.learned.posteriors import PosteriorConfig, Posteriors, decayed, with_cold_priors
from relevance.slate import Candidates, decide
from relevance.user_model import UserModel

ARMS = 100
COUNT = 10
DIM = 128
HISTORY = 5_000
SEED = 1


def per_call_us(call: Callable[[], object], seconds: float = 3.0) -> float:
    """Median over 15 rounds of the mean time per call, after a warm-up."""
    for _ in range(200):
        call()
    rounds: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(rounds) < 15 or time.perf_counter() < deadline:
        started = time.perf_counter()
        for _ in range(200):
            call()
        rounds.append((time.perf_counter() - started) / 200 * 1e6)
        if len(rounds) >= 60:
            break
    return float(np.median(rounds))


def main() -> None:
    threadpool_limits(limits=1, user_api="blas")
    rng = np.random.default_rng(SEED)
    arms = [f"it-{i:06d}" for i in range(ARMS)]
    decisions = rng.integers(0, ARMS, HISTORY)
    true_rates = rng.beta(2, 8, ARMS)
    rewards = (rng.random(HISTORY) < true_rates[decisions]).astype(int)
    successes = np.bincount(decisions, weights=rewards, minlength=ARMS)
    trials = np.bincount(decisions, minlength=ARMS)

    config = PosteriorConfig()
    posteriors = Posteriors(
        alpha=(1.0 + successes).astype(np.float64),
        beta=(1.0 + trials - successes).astype(np.float64),
        updated_ms=np.full(ARMS, 1.7e12),
        observed=trials > 0,
    )
    vectors = rng.standard_normal((ARMS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    user = UserModel(
        (rng.standard_normal(DIM) * 0.1).astype(np.float32), np.full(DIM, 0.5 / DIM, np.float32)
    )
    category = rng.integers(0, 8, ARMS)
    no_shift = np.zeros(ARMS)

    def ours() -> object:
        c = Candidates(vectors, posteriors.alpha, posteriors.beta, no_shift)
        return decide(c, None, COUNT, rng, draws=0)

    def ours_full() -> object:
        prepared = with_cold_priors(decayed(posteriors, 1.7e12 + 3.6e6, config), category, config)
        c = Candidates(vectors, prepared.alpha, prepared.beta, no_shift)
        return decide(c, user, COUNT, rng)

    ours_us = per_call_us(ours)
    full_us = per_call_us(ours_full)
    print(f"machine: {machine()}")
    print(f"ours, segment-wide, {ARMS} candidates:         {ours_us:8.1f} us per request")
    print(f"ours, full (user draw, 64 propensity runs): {full_us:8.1f} us per request")

    mabwiser_us: float | None = None
    try:
        # Optional (the bench extra): imported here so the benchmark runs without it.
        from mabwiser.mab import (  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: PLC0415
            MAB,
            LearningPolicy,
        )
    except ImportError:
        print("MABWiser: not installed (make bench-deps); its figures are null")
    else:
        mab = MAB(arms, LearningPolicy.ThompsonSampling(), seed=SEED)
        mab.fit([arms[d] for d in decisions], rewards.tolist())
        expectations = mab.predict_expectations()
        assert len(expectations) == ARMS
        mabwiser_us = per_call_us(mab.predict_expectations)
        print(f"MABWiser ThompsonSampling, {ARMS} arms:      {mabwiser_us:8.1f} us per request")

    speedup = round(mabwiser_us / ours_us, 1) if mabwiser_us else None
    if speedup is not None:
        print(f"speed-up over MABWiser: {speedup}x")
    finish(
        {
            "us_per_request": round(ours_us, 2),
            "us_per_request_full": round(full_us, 2),
            "mabwiser_us_per_request": round(mabwiser_us, 2) if mabwiser_us else None,
            "speedup_vs_mabwiser": speedup,
            "candidates": ARMS,
        }
    )


if __name__ == "__main__":
    main()
