"""``perso evaluate``'s window bounds (``perso.evaluate.moment_ms``)."""

from __future__ import annotations

import pytest

from config.settings import ConfigError
from perso.evaluate import moment_ms

NOW = 1_767_225_600_000


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("30s", NOW - 30_000),
        ("30m", NOW - 1_800_000),
        ("6h", NOW - 6 * 3_600_000),
        ("7d", NOW - 7 * 86_400_000),
        ("1.5h", NOW - 5_400_000),
        ("0s", NOW),
        (" 2m ", NOW - 120_000),
        ("1767000000000", 1_767_000_000_000),
        ("0", 0),
        ("6", 6),  # a bare number is epoch milliseconds, not a span
    ],
)
def test_a_span_back_from_now_or_epoch_milliseconds(value: str, expected: int) -> None:
    assert moment_ms(value, NOW) == expected


@pytest.mark.parametrize("value", ["", "h", "6x", "-5m", "6 h", "1e3", "yesterday", "6H"])
def test_anything_else_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigError, match="neither a span like 6h nor epoch milliseconds"):
        moment_ms(value, NOW)
