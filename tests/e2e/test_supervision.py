"""``perso.supervision.Supervised`` on real processes, with a clock the test moves."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from perso.process import Child, spawn
from perso.supervision import GIVE_UP_AFTER, Supervised
from tests.fakes import FakeClock

pytestmark = pytest.mark.e2e


def exiting(code: int) -> Child:
    return spawn("crasher", [sys.executable, "-c", f"raise SystemExit({code})"], os.environ, None)


def wait_exit(supervised: Supervised) -> None:
    assert supervised.child is not None
    supervised.child.popen.wait(timeout=30)


def test_a_child_that_keeps_failing_is_restarted_with_back_off_then_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="perso.supervision")
    clock = FakeClock(now=0.0)
    crasher = Supervised("crasher", lambda: exiting(3), clock=clock)
    crasher.start()
    for delay in (1.0, 2.0, 4.0, 8.0):
        wait_exit(crasher)
        clock.tick(0.5)
        assert crasher.check()  # the exit is noted: no child until the back-off is over
        assert crasher.child is None
        clock.tick(delay - 0.1)
        assert crasher.check()
        assert crasher.child is None
        clock.tick(0.1)
        assert crasher.check()
        assert crasher.child is not None  # restarted
    wait_exit(crasher)
    clock.tick(0.5)
    assert not crasher.check()  # the fifth quick failure in a row
    assert crasher.restarts == GIVE_UP_AFTER - 1
    lines = [r.getMessage() for r in caplog.records]
    assert "crasher exited with code 3 after 0.5 s; restarting in 1 s" in lines
    assert "crasher exited with code 3 after 0.5 s; restarting in 8 s" in lines
    assert (
        lines[-1] == "crasher exited with code 3 after 0.5 s, 5 quick failures in a row; giving up"
    )
    assert any(line.startswith("crasher restarted (pid ") for line in lines)


def test_a_healthy_minute_starts_the_count_over() -> None:
    clock = FakeClock(now=0.0)
    child = Supervised("flaky", lambda: exiting(3), clock=clock)
    child.start()
    # four quick failures, a run of a minute, four quick failures: never given up
    for ran_s in [0.5] * 4 + [61.0] + [0.5] * 4:
        wait_exit(child)
        clock.tick(ran_s)
        assert child.check()
        clock.tick(60.0)  # past any back-off
        assert child.check()
    assert child.restarts == 9
    wait_exit(child)  # the last restart's
