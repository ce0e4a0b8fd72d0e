from __future__ import annotations

import pytest

from perso.supervision import (
    GIVE_UP_AFTER,
    MAX_DELAY_S,
    Verdict,
    describe_exit,
    exit_report,
    judge_exit,
    restart_delay,
)


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
    ("failures", "ran_s", "verdict"),
    [
        (0, 0.2, Verdict(1, 1.0)),  # the first quick failure
        (1, 5.0, Verdict(2, 2.0)),
        (3, 59.9, Verdict(4, 8.0)),
        (4, 0.1, Verdict(5, None)),  # the fifth in a row: give up
        (4, 60.0, Verdict(0, 1.0)),  # a healthy minute: the count starts over
        (0, 7200.0, Verdict(0, 1.0)),
    ],
)
def test_judge_exit(failures: int, ran_s: float, verdict: Verdict) -> None:
    assert judge_exit(failures, ran_s) == verdict


def gives_up_after(runs_s: list[float]) -> int | None:
    """The exit (1-based) at which a child with these run times is given up on."""
    failures = 0
    for n, ran_s in enumerate(runs_s, start=1):
        verdict = judge_exit(failures, ran_s)
        if verdict.gives_up:
            return n
        failures = verdict.failures
    return None


@pytest.mark.parametrize(
    ("runs_s", "given_up_at"),
    [
        ([0.1] * 5, 5),
        ([0.1] * 4, None),
        ([30.0] * 5, 5),  # half a minute is not healthy
        ([0.1] * 4 + [61.0] + [0.1] * 4, None),  # a healthy run between two bad streaks
        ([0.1] * 4 + [61.0] + [0.1] * 5, 10),
        ([61.0] * 20, None),  # exits now and then, each after a good run
    ],
)
def test_the_give_up_rule_counts_quick_failures_in_a_row(
    runs_s: list[float], given_up_at: int | None
) -> None:
    assert GIVE_UP_AFTER == 5
    assert gives_up_after(runs_s) == given_up_at


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


@pytest.mark.parametrize(
    ("code", "ran_s", "verdict", "line"),
    [
        (
            -9,
            12.34,
            Verdict(1, 1.0),
            "origin was killed by SIGKILL after 12.3 s; restarting in 1 s",
        ),
        (1, 0.5, Verdict(3, 4.0), "origin exited with code 1 after 0.5 s; restarting in 4 s"),
        (
            1,
            0.5,
            Verdict(5, None),
            "origin exited with code 1 after 0.5 s, 5 quick failures in a row; giving up",
        ),
    ],
)
def test_exit_report_says_which_child_how_and_what_next(
    code: int, ran_s: float, verdict: Verdict, line: str
) -> None:
    assert exit_report("origin", code, ran_s, verdict) == line
