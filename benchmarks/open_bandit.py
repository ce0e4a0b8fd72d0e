"""Our off-policy estimators on real logged data from a real shop: the Open Bandit Dataset
sample (ZOZOTOWN) that the ``obp`` wheel ships (``benchmarks.open_bandit_data``).

Two logs of the same week, one per policy, 10,000 impressions each: a uniform random
policy and Bernoulli Thompson sampling (BTS). Each direction estimates one policy's click
rate from the other policy's log and compares it with that policy's own on-policy rate:

- **random from the BTS log**: the random policy puts each of the 80 items at a position
  with probability 1/80 (the random log's own propensity column says so on every row);
  the BTS log's propensities are per row.
- **BTS from the random log**: BTS's propensities in its log change from row to row (batch
  updates, several times an hour), so no single table of them holds for the week. What
  does: under rewards that do not change over the week, BTS's weekly click rate is that of
  its *time-averaged* marginals, and the share of BTS's impressions at a position that
  showed an item estimates those without bias. That is the target. obp's own recipe
  (``BernoulliTS(is_zozotown_prior=True)``, a Monte Carlo of top-3 draws from the shipped
  Beta parameters, with no updates) is reported beside it.

Rows are single impressions, not slates (the sample has no slate id, and consecutive rows
rarely share a user), so each row is a one-position decision given its position, and
every value is a click rate per impression. Intervals are 95% percentile bootstraps over
rows; the on-policy truths are a bootstrap of the other log's mean click.

DR's reward model: per (item, position) click rates, shrunk towards the position's rate
by ``SHRINKAGE`` pseudo-impressions, cross-fitted on two random halves of the log being
evaluated (each half predicted by the model of the other).

Run: ``.venv/bin/python -m benchmarks.open_bandit`` (downloads the obp wheel, 1.3 MB,
into ``.perso/cache/obp`` the first time).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.open_bandit_data import (
    ITEMS,
    OBP_VERSION,
    POSITIONS,
    BanditLog,
    read_log,
    read_prior,
    wheel_path,
)
from benchmarks.report import finish
from evaluation.estimators import Estimate, SlateLog, estimate

Array = npt.NDArray[np.float64]

SHRINKAGE = 100.0
OBP_SIMULATIONS = 100_000
OBP_REASON = (
    f"obp not installed: {OBP_VERSION}, the newest release for Python 3.11 (0.5.x requires "
    "Python < 3.11), needs torch and calls np.int, removed in numpy 1.24; the lock pins "
    "numpy 2.x"
)


def position_shares(log: BanditLog, items: int = ITEMS, positions: int = POSITIONS) -> Array:
    """(items, positions): the share of a position's impressions that showed each item."""
    counts = np.zeros((items, positions))
    np.add.at(counts, (log.item, log.position), 1.0)
    totals = counts.sum(axis=0)
    shares: Array = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    return shares


def top_k_marginals(
    alpha: Array, beta: Array, positions: int, simulations: int, rng: np.random.Generator
) -> Array:
    """(items, positions): how often each item lands at each position when every item's
    rate is drawn from Beta(alpha, beta) and the best ``positions`` are shown in order;
    obp's ``BernoulliTS.compute_batch_action_dist`` before any update."""
    draws = rng.beta(alpha, beta, size=(simulations, alpha.shape[0]))
    ranked = np.argsort(-draws, axis=1)[:, :positions]
    out = np.zeros((alpha.shape[0], positions))
    for k in range(positions):
        out[:, k] = np.bincount(ranked[:, k], minlength=alpha.shape[0]) / simulations
    return out


def shrunk_rates(
    log: BanditLog, strength: float, items: int = ITEMS, positions: int = POSITIONS
) -> Array:
    """(items, positions): each pair's click rate, shrunk towards its position's rate by
    ``strength`` pseudo-impressions (a pair never shown gets the position's rate)."""
    shows = np.zeros((items, positions))
    clicks = np.zeros((items, positions))
    np.add.at(shows, (log.item, log.position), 1.0)
    np.add.at(clicks, (log.item, log.position), log.click)
    per_shows = shows.sum(axis=0)
    prior = np.divide(clicks.sum(axis=0), per_shows, out=np.zeros(positions), where=per_shows > 0)
    base = np.broadcast_to(prior, shows.shape)
    rates: Array = np.divide(
        clicks + strength * prior, shows + strength, out=base.copy(), where=shows + strength > 0
    )
    return rates


def rows(log: BanditLog, chosen: npt.NDArray[np.bool_]) -> BanditLog:
    return BanditLog(
        item=log.item[chosen],
        position=log.position[chosen],
        click=log.click[chosen],
        propensity=log.propensity[chosen],
    )


def cross_fitted(
    log: BanditLog, target: Array, strength: float, rng: np.random.Generator
) -> tuple[Array, Array]:
    """Per row, the reward model's prediction of the shown pair and of the target's
    choice at that position, Σ_a π_k(a) q̂(a, k), each from the model of the other half."""
    half = rng.permutation(len(log)) < len(log) // 2
    predicted = np.empty(len(log))
    predicted_target = np.empty(len(log))
    for fold in (half, ~half):
        model = shrunk_rates(rows(log, ~fold), strength, *target.shape)
        k = log.position[fold]
        predicted[fold] = model[log.item[fold], k]
        predicted_target[fold] = (target * model).sum(axis=0)[k]
    return predicted, predicted_target


def one_position_log(
    log: BanditLog, target: Array, predicted: Array | None = None, pt: Array | None = None
) -> SlateLog:
    """Each impression as a decision of one position: (n, 1) arrays."""
    column = (len(log), 1)
    return SlateLog(
        logged=log.propensity.reshape(column),
        target=target[log.item, log.position].reshape(column),
        reward=log.click.reshape(column),
        shown=np.ones(column, dtype=np.bool_),
        predicted=None if predicted is None else predicted.reshape(column),
        predicted_target=None if pt is None else pt.reshape(column),
    )


@dataclass(frozen=True, slots=True)
class Truth:
    value: float
    low: float
    high: float


def on_policy(log: BanditLog, rng: np.random.Generator, samples: int) -> Truth:
    n = len(log)
    means = np.array([log.click[rng.integers(0, n, n)].mean() for _ in range(samples)])
    low, high = np.quantile(means, [0.025, 0.975])
    return Truth(float(log.click.mean()), float(low), float(high))


def direction(
    log: BanditLog, target: Array, truth: Truth, rng: np.random.Generator, samples: int
) -> dict[str, Any]:
    """IPS, SNIPS and DR of ``target`` on ``log``, each against ``truth``."""
    predicted, predicted_target = cross_fitted(log, target, SHRINKAGE, rng)
    slate = one_position_log(log, target, predicted, predicted_target)
    out: dict[str, Any] = {}
    for name in ("ips", "snips", "dr"):
        e = estimate(slate, name, rng, samples=samples)
        out[name] = figures(e, truth)
    return out


def figures(e: Estimate, truth: Truth) -> dict[str, Any]:
    return {
        "value": e.value,
        "low": e.low,
        "high": e.high,
        "ess": round(e.ess, 1),
        "covers_truth": e.low <= truth.value <= e.high,
        "ratio": e.value / truth.value,
        "relative_error": (e.value - truth.value) / truth.value,
        "warnings": list(e.warnings),
    }


def print_direction(title: str, result: dict[str, Any], truth: Truth) -> None:
    print(f"\n{title}")
    print(f"  on-policy truth {pct(truth.value)} [{pct(truth.low)}, {pct(truth.high)}]")
    for name, f in result.items():
        print(
            f"  {name:<6} {pct(f['value'])} [{pct(f['low'])}, {pct(f['high'])}]  "
            f"ess {f['ess']:>8.0f}  ratio {f['ratio']:.2f}  "
            f"covers {'yes' if f['covers_truth'] else 'NO'}"
        )
        for warning in f["warnings"]:
            print(f"         ! {warning}")


def pct(x: float) -> str:
    return f"{100 * x:.3f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=int, default=1_000, help="bootstrap resamples")
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)

    wheel = wheel_path()
    random_log, bts_log = read_log(wheel, "random"), read_log(wheel, "bts")
    alpha, beta = read_prior(wheel)
    if not np.allclose(random_log.propensity, 1 / ITEMS):
        raise RuntimeError("the random log's propensities are not all 1/80")

    uniform = np.full((ITEMS, POSITIONS), 1 / ITEMS)
    bts_shares = position_shares(bts_log)
    bts_prior = top_k_marginals(alpha, beta, POSITIONS, OBP_SIMULATIONS, rng)
    truth_random = on_policy(random_log, rng, args.samples)
    truth_bts = on_policy(bts_log, rng, args.samples)

    random_from_bts = direction(bts_log, uniform, truth_random, rng, args.samples)
    bts_from_random = direction(random_log, bts_shares, truth_bts, rng, args.samples)
    prior_from_random = direction(random_log, bts_prior, truth_bts, rng, args.samples)

    # How far BTS's logged propensities are from one table: distinct values per pair, and
    # their agreement with the two tables used above.
    pairs = bts_log.item * POSITIONS + bts_log.position
    distinct = [len(np.unique(bts_log.propensity[pairs == p])) for p in np.unique(pairs)]
    corr_shares = float(
        np.corrcoef(bts_log.propensity, bts_shares[bts_log.item, bts_log.position])[0, 1]
    )
    corr_prior = float(
        np.corrcoef(bts_log.propensity, bts_prior[bts_log.item, bts_log.position])[0, 1]
    )

    print(f"Open Bandit Dataset sample (obp {OBP_VERSION} wheel), campaign all")
    print(
        f"random log: {len(random_log)} impressions, {int(random_log.click.sum())} clicks, "
        f"every propensity 1/{ITEMS}; BTS log: {len(bts_log)} impressions, "
        f"{int(bts_log.click.sum())} clicks"
    )
    print(
        f"BTS propensities per (item, position): median {np.median(distinct):.0f} distinct "
        f"values (max {max(distinct)}); correlation with its position shares "
        f"{corr_shares:.2f}, with obp's ZOZOTOWN prior Monte Carlo {corr_prior:.2f}"
    )
    print("rows are single impressions (no slate id): click rate per impression")
    print_direction("random policy, estimated from the BTS log", random_from_bts, truth_random)
    print_direction(
        "BTS, from the random log, target = BTS's shares per position", bts_from_random, truth_bts
    )
    print_direction(
        "BTS, from the random log, target = obp's ZOZOTOWN prior (is_zozotown_prior=True)",
        prior_from_random,
        truth_bts,
    )
    print(f"\nobp's own estimators: none ({OBP_REASON})")
    finish(
        {
            "benchmark": "open_bandit",
            "data": f"obp {OBP_VERSION} wheel, obd/{{random,bts}}/all/all.csv",
            "unit": "clicks per impression",
            "baseline": {
                "random_on_policy": vars_of(truth_random),
                "bts_on_policy": vars_of(truth_bts),
            },
            "random_from_bts_log": random_from_bts,
            "bts_from_random_log": bts_from_random,
            "bts_prior_from_random_log": prior_from_random,
            "bts_propensity_distinct_per_pair_median": float(np.median(distinct)),
            "bts_propensity_corr_shares": round(corr_shares, 3),
            "bts_propensity_corr_prior": round(corr_prior, 3),
            "dr_reward_model": f"per (item, position) rates shrunk by {SHRINKAGE:.0f}, 2-fold",
            "obp": None,
            "obp_reason": OBP_REASON,
            "seconds": round(time.perf_counter() - started, 1),
        }
    )


def vars_of(truth: Truth) -> dict[str, float]:
    return {"value": truth.value, "low": truth.low, "high": truth.high}


if __name__ == "__main__":
    main()
