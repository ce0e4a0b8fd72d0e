"""The pure rules of ``coordination.leader``: the loop's next step, lease timing."""

from __future__ import annotations

import math

import pytest

from coordination.leader import Due, Step, lease_ttl_ms, next_step, validity_s

INF = math.inf


@pytest.mark.parametrize(
    ("leading", "job_running", "due", "expected"),
    [
        # a follower only campaigns, whatever else is scheduled
        (False, False, Due(campaign=5, renew=INF, job=INF), (Step.CAMPAIGN, 5)),
        (False, False, Due(campaign=5, renew=1, job=0), (Step.CAMPAIGN, 5)),
        # a leader: whichever of renewal and job comes first
        (True, False, Due(campaign=9, renew=3, job=1), (Step.JOB, 1)),
        (True, False, Due(campaign=9, renew=1, job=3), (Step.RENEW, 1)),
        # a tie: renew first, so the job starts on a fresh lease
        (True, False, Due(campaign=9, renew=2, job=2), (Step.RENEW, 2)),
        # a job still running is not started again; renewals go on
        (True, True, Due(campaign=9, renew=4, job=1), (Step.RENEW, 4)),
        # nothing scheduled yet
        (True, False, Due(campaign=9, renew=INF, job=INF), (Step.RENEW, INF)),
    ],
)
def test_next_step(
    leading: bool, job_running: bool, due: Due, expected: tuple[Step, float]
) -> None:
    assert next_step(leading, job_running, due) == expected


@pytest.mark.parametrize(
    ("ttl_ms", "drift", "expected"),
    [(10_000, 0.01, 9.9), (1000, 0.0, 1.0), (300, 0.01, 0.297)],
)
def test_validity_is_the_ttl_less_the_drift_allowance(
    ttl_ms: int, drift: float, expected: float
) -> None:
    assert validity_s(ttl_ms, drift_factor=drift) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("renew_every_s", "missed", "slack_s", "expected"),
    [
        (5.0, 2, 0.0, 15_000),  # two renewals may fail, the third must not
        (5.0, 2, 1.1, 16_100),  # the stream worker: a blocking read between upkeeps
        (0.05, 2, 0.15, 300),
        (1.0, 1, 0.0, 2000),
        (0.0001, 2, 0.0, 1),  # rounded up, never to 0
    ],
)
def test_lease_ttl(renew_every_s: float, missed: int, slack_s: float, expected: int) -> None:
    assert lease_ttl_ms(renew_every_s, missed=missed, slack_s=slack_s) == expected


@pytest.mark.parametrize(
    ("renew_every_s", "missed", "slack_s"), [(0.0, 2, 0.0), (1.0, 0, 0.0), (1.0, 2, -1.0)]
)
def test_lease_ttl_refuses_nonsense(renew_every_s: float, missed: int, slack_s: float) -> None:
    with pytest.raises(ValueError, match="required"):
        lease_ttl_ms(renew_every_s, missed=missed, slack_s=slack_s)
