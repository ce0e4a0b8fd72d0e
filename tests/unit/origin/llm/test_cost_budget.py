"""Pure parts of the LLM gateway: backoff schedule, UTC day, prices."""

from __future__ import annotations

import pytest

from origin.llm.client import ModelEndpoint
from origin.llm.gateway import BACKOFF_CAP_S, backoff_delay_s, utc_day
from origin.llm.model import Completion


@pytest.mark.parametrize(
    ("in_a_row", "u", "expected"),
    [
        (1, 0.0, 1.0),
        (1, 0.999999, 0.75),
        (2, 0.0, 2.0),
        (3, 0.0, 4.0),
        (5, 0.0, 16.0),
        (6, 0.0, 30.0),  # 32 capped
        (6, 1.0, 22.5),
        (50, 0.0, 30.0),
        (10_000, 0.5, 26.25),  # no overflow
    ],
)
def test_backoff_doubles_to_the_cap_with_jitter(in_a_row: int, u: float, expected: float) -> None:
    assert backoff_delay_s(in_a_row, u) == pytest.approx(expected, abs=1e-5)
    assert backoff_delay_s(in_a_row, u) <= BACKOFF_CAP_S


def test_backoff_needs_a_refusal() -> None:
    with pytest.raises(ValueError, match="rate_limited_in_a_row"):
        backoff_delay_s(0, 0.0)


@pytest.mark.parametrize(
    ("unix", "day"),
    [
        (1_767_225_600.0, "2026-01-01"),
        (1_767_225_599.999, "2025-12-31"),
        (1_767_311_999.0, "2026-01-01"),
        (0.0, "1970-01-01"),
    ],
)
def test_utc_day(unix: float, day: str) -> None:
    assert utc_day(unix) == day


@pytest.mark.parametrize(
    ("price", "tokens_in", "tokens_out", "usd"),
    [(0.0002, 500, 500, 0.0002), (0.0009, 2000, 500, 0.00225), (0.0, 10, 10, 0.0)],
)
def test_cost_counts_input_and_output_tokens(
    price: float, tokens_in: int, tokens_out: int, usd: float
) -> None:
    endpoint = ModelEndpoint("small", "http://x/v1", "m", price)
    completion = Completion("{}", "m", tokens_in, tokens_out, 1.0)
    assert endpoint.cost_usd(completion) == pytest.approx(usd)
