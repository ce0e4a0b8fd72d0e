from __future__ import annotations

import pytest

from origin.llm.model import ModelSize, Style
from origin.llm.pricing import cost_usd, route


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens", "usd_per_1k", "expected"),
    [
        (0, 0, 0.0009, 0.0),
        (1000, 0, 0.0002, 0.0002),
        (0, 1000, 0.0002, 0.0002),
        (2000, 500, 0.0009, 0.00225),  # the full budget on the large model
        (2000, 500, 0.0002, 0.0005),
        (1500, 300, 0.0, 0.0),  # a self-hosted model priced at nothing
    ],
)
def test_cost_usd(
    input_tokens: int, output_tokens: int, usd_per_1k: float, expected: float
) -> None:
    assert cost_usd(input_tokens, output_tokens, usd_per_1k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("reason", "style", "shared", "expected"),
    [
        ("requested", "concise", False, "small"),
        ("requested", "detailed", False, "small"),
        ("requested", "conversational", False, "large"),
        ("cold_start", "concise", False, "large"),
        ("cold_start", "detailed", False, "large"),
        ("cross_domain", "concise", False, "large"),
        ("uncertain", "concise", False, "small"),
        ("uncertain", "detailed", False, "small"),
        ("consideration", "detailed", False, "small"),
        ("consideration", "conversational", False, "large"),
        # segment-wide answers: always the small model
        ("requested", "concise", True, "small"),
        ("cold_start", "detailed", True, "small"),
        ("cross_domain", "conversational", True, "small"),
    ],
)
def test_route(reason: str, style: Style, shared: bool, expected: ModelSize) -> None:
    assert route(reason, style, shared=shared) == expected
