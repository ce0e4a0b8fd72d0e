"""Locust against a real ``perso up``: one process for every region, and ``make load``'s
runner (a master and one worker per region)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from loadtests.report import read_rows
from tests.e2e.conftest import RunningStack

pytestmark = pytest.mark.e2e

ANSWERS = re.compile(r"^perso_edge_answers_total\{.*\} (\S+)$", re.MULTILINE)


def test_locust_drives_every_region_headless(stack: RunningStack) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "locust",
            "-f", "loadtests/locustfile.py",
            "--headless", "-u", "12", "-r", "12", "--run-time", "4s",
            "--perso-stack", str(stack.data_dir / "stack.json"),
            "--only-summary",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for region in stack.edges:
        assert f"{region} personalize" in output
        assert re.search(rf"^region\s+{region}\s", output, re.MULTILINE), output
    assert "Aggregated" in output


def answers(edge: str) -> int:
    """Personalize answers ``edge`` has served, by its own metrics."""
    metrics = httpx.get(f"{edge}/metrics", timeout=10).text
    return sum(int(float(value)) for value in ANSWERS.findall(metrics))


def test_the_distributed_runner_loads_each_region_from_its_own_worker(
    stack: RunningStack, tmp_path: Path
) -> None:
    users = 9
    before = {region: answers(url) for region, url in stack.edges.items()}
    report_dir = tmp_path / "load"
    result = subprocess.run(
        [
            sys.executable, "-m", "loadtests.distributed",
            "--stack", str(stack.data_dir / "stack.json"),
            "--users", str(users), "--spawn-rate", str(users), "--seconds", "5",
            "--report-dir", str(report_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    logs = "".join(path.read_text() for path in sorted(report_dir.glob("*.log")))
    assert result.returncode == 0, output + logs
    assert "passed: every region got traffic" in output
    assert {path.name for path in report_dir.glob("worker-*.log")} == {
        f"worker-{region}.log" for region in stack.edges
    }
    assert "<html" in (report_dir / "report.html").read_text()[:2000].lower()
    rows = {(row["Type"], row["Name"]): row for row in read_rows(report_dir / "locust_stats.csv")}
    summary = json.loads((report_dir / "summary.json").read_text())
    assert summary["passed"]
    assert [figures["name"] for figures in summary["regions"]] == list(stack.edges)
    for figures in summary["regions"]:
        region = figures["name"]
        assert figures["requests"] > 0
        assert figures["failures"] == 0
        assert figures["rps"] > 0
        assert 0 <= figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"]
        assert figures["requests"] == int(rows[("region", region)]["Request Count"])
        # Each region's requests reached that region's edge: its answers grew by them
        # (and by at most one more per user: a request in flight when the run stopped).
        personalized = int(rows[("POST", f"{region} personalize")]["Request Count"])
        grew = answers(stack.edges[region]) - before[region]
        assert personalized <= grew <= personalized + users, (region, personalized, grew)
