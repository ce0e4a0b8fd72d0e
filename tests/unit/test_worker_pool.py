from __future__ import annotations

import pytest

from perso.worker_pool import MAX_DELAY_S, consumer_names, describe_exit, restart_delay


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, MAX_DELAY_S), (50, MAX_DELAY_S)],
)
def test_restart_delay_doubles_up_to_the_cap(failures: int, delay: float) -> None:
    assert restart_delay(failures) == delay


@pytest.mark.parametrize("failures", [0, -1])
def test_restart_delay_rejects_a_non_failure(failures: int) -> None:
    with pytest.raises(ValueError, match="failures"):
        restart_delay(failures)


@pytest.mark.parametrize(
    ("base", "count", "names"),
    [("w", 1, ["w-0"]), ("host", 3, ["host-0", "host-1", "host-2"])],
)
def test_consumer_names_are_stable_per_slot(base: str, count: int, names: list[str]) -> None:
    assert consumer_names(base, count) == names


def test_consumer_names_need_a_worker() -> None:
    with pytest.raises(ValueError, match="count"):
        consumer_names("w", 0)


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (0, "exited with code 0"),
        (2, "exited with code 2"),
        (-9, "was killed by SIGKILL"),
        (-15, "was killed by SIGTERM"),
        (-200, "was killed by signal 200"),
    ],
)
def test_describe_exit(code: int, text: str) -> None:
    assert describe_exit(code) == text
