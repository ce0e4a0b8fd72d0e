"""An evaluation as an operator reads it: a table, its warnings, and the same as JSON."""

from __future__ import annotations

from typing import Any

from evaluation.estimators import Estimate
from evaluation.offline import Evaluation
from origin.offline.window import WindowCounts


def _interval(e: Estimate) -> str:
    return f"{e.value:6.3f} [{e.low:.3f}, {e.high:.3f}]"


def text(evaluation: Evaluation, counts: WindowCounts) -> str:
    on = evaluation.on_policy
    lines = [
        f"decisions in the window: {counts.decisions:,}; with a logged context: "
        f"{counts.with_context:,}; joined to their rewards (evaluated): {counts.joined:,}",
        f"live policy {evaluation.live.label}: {on.value:.3f} engagements per slate "
        f"[{on.low:.3f}, {on.high:.3f}] on-policy ({evaluation.positions} positions)",
        "",
        f"{'candidate':<20} {'IPS':>23} {'SNIPS':>23} {'DR':>23} {'DM':>23} {'ESS':>6} "
        f"{'support':>7}",
    ]
    for c in evaluation.candidates:
        ips, snips, dr, dm = (c.by(name) for name in ("ips", "snips", "dr", "dm"))
        lines.append(
            f"{c.policy.label:<20} {_interval(ips):>23} {_interval(snips):>23} "
            f"{_interval(dr):>23} {_interval(dm):>23} {ips.ess:>6.0f} {100 * c.support:>6.0f}%"
        )
    for c in evaluation.candidates:
        lines += [f"warning: {c.policy.label}: {w}" for w in c.warnings]
    lines += [
        "",
        "Engagements per slate, 95% bootstrap intervals. DR is the one to read first: "
        "it has IPS's lack of bias with less variance; DM (the reward model alone) is the "
        "baseline, biased by the model. ESS: the effective sample size "
        "(smallest over positions); support: the share of the candidate's choices the live "
        "policy also makes.",
    ]
    return "\n".join(lines)


def as_json(evaluation: Evaluation, counts: WindowCounts) -> dict[str, Any]:
    def est(e: Estimate) -> dict[str, Any]:
        return {"value": e.value, "low": e.low, "high": e.high, "level": e.level, "ess": e.ess}

    return {
        "window": {
            "decisions": counts.decisions,
            "with_context": counts.with_context,
            "joined": counts.joined,
            "malformed": counts.malformed,
            "missing_vectors": counts.missing_vectors,
            "policies": counts.policies,
        },
        "live": {"policy": evaluation.live.label, "on_policy": est(evaluation.on_policy)},
        "positions": evaluation.positions,
        "candidates": [
            {
                "policy": c.policy.label,
                "estimates": {e.estimator: est(e) for e in c.estimates},
                "support": c.support,
                "warnings": list(c.warnings),
            }
            for c in evaluation.candidates
        ],
    }
