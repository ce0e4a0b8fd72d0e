from __future__ import annotations

import io

import pytest

from perso.console import progress_line, table
from perso.demo import DemoReport, RegionStats, format_report, percentile
from tests.fakes import FakeClock


def test_table_aligns_columns() -> None:
    out = table(["region", "requests"], [["us-east", "1,200"], ["all", "3"]])
    assert out.splitlines() == [
        "region   requests",
        "-------  --------",
        "us-east     1,200",
        "all             3",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_redraws_one_line() -> None:
    stream, clock = Terminal(), FakeClock(now=0.0)
    report = progress_line("ingest", stream, clock)
    clock.tick(2.0)
    report(500, 1000)
    clock.tick(2.0)
    report(1000, 1000)
    assert stream.getvalue() == (
        "\ringest: 500/1000 ( 50.0%) 250/s eta    2s\ringest: 1000/1000 (100.0%) 250/s eta    0s\n"
    )


def test_progress_in_a_log_writes_a_line_per_tenth() -> None:
    stream, clock = io.StringIO(), FakeClock(now=0.0)
    report = progress_line("ingest", stream, clock)
    for done in range(0, 1001, 50):
        clock.tick(0.1)
        report(done, 1000)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("ingest: 1000/1000 (100.0%)")


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [([], 50, 0.0), ([5.0], 99, 5.0), ([1, 2, 3, 4], 50, 2), ([*range(1, 101)], 99, 99)],
)
def test_percentile_nearest_rank(values: list[float], pct: float, expected: float) -> None:
    assert percentile(values, pct) == expected


def test_the_demo_report_counts_the_workers_model_writes() -> None:
    stats = RegionStats(requests=4, hits=3, personalized=1, client_ms=[1.0, 2.0], edge_ms=[0.2])
    report = DemoReport(
        seconds=2.0,
        concurrency=1,
        users=10,
        regions={"us-east": stats},
        feedback_sent=5,
        feedback_accepted=5,
        events_in_streams=5,
        model_writes=1234,
        users_with_model=3,
    )
    lines = format_report(report).splitlines()
    assert "feedback: 5 sent, 5 accepted, 5 events appended to the events streams" in lines
    assert "user models: 1,234 writes by the workers, 3 of 10 users now have one" in lines
    summary = report.summary()
    assert (summary["model_writes"], summary["users_with_model"]) == (1234, 3)
    assert (summary["requests"], summary["hit_ratio"]) == (4, 0.75)
