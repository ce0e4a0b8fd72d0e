from __future__ import annotations

import pytest

from perso.worker_processes import consumer_names


@pytest.mark.parametrize(
    ("base", "count", "names"),
    [("w", 1, ["w-0"]), ("host", 3, ["host-0", "host-1", "host-2"])],
)
def test_consumer_names_are_stable_per_slot(base: str, count: int, names: list[str]) -> None:
    assert consumer_names(base, count) == names


def test_consumer_names_need_a_worker() -> None:
    with pytest.raises(ValueError, match="count"):
        consumer_names("w", 0)
