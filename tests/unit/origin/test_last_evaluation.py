"""What is kept of a ``perso evaluate`` report (``origin.offline.last_evaluation``)."""

from __future__ import annotations

import pytest

from origin.offline.last_evaluation import Estimated, LastEvaluation, decode, encode, summary

REPORT = {
    "window": {"decisions": 10, "joined": 8},
    "live": {"policy": "configured/1", "on_policy": {"value": 0.5, "low": 0.4, "high": 0.6}},
    "candidates": [
        {
            "policy": "random/ref",
            "estimates": {
                "snips": {"value": 0.2, "low": 0.1, "high": 0.3},
                "ips": {"value": 0.25, "low": 0.05, "high": 0.4},
            },
        }
    ],
}


def test_a_report_is_summed_up_and_reads_back() -> None:
    kept = summary(REPORT, 1234)
    assert kept == LastEvaluation(
        1234,
        "configured/1",
        0.5,
        8,
        (
            Estimated("random/ref", "ips", 0.25, 0.05, 0.4),
            Estimated("random/ref", "snips", 0.2, 0.1, 0.3),
        ),
    )
    assert decode(encode(kept)) == kept
    assert decode(encode(kept).encode()) == kept


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "null",
        "[]",
        '{"at_ms": 1}',
        '{"at_ms":1,"live":"x","live_value":0,"joined":1,"estimates":[["p","e",0.1]]}',
    ],
)
def test_what_cannot_be_read_is_none(raw: str) -> None:
    assert decode(raw) is None
