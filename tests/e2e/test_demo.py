"""``perso demo``: the main job, shortened."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import perso_env

pytestmark = pytest.mark.e2e


def test_the_demo_runs_the_stack_drives_traffic_and_reports(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "perso", "demo",
            "--seconds", "4", "--users", "300", "--concurrency", "4",
            "--report", str(tmp_path / "report"),
        ],
        env=perso_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["requests"] > 0
    assert summary["errors"] == 0
    assert 0 < summary["hit_ratio"] < 1
    assert summary["p50_ms"] > 0
    # every accepted interaction is in the streams, and the worker caught up with them
    assert summary["feedback_accepted"] == summary["events_in_streams"] > 0
    assert summary["model_writes"] > 0
    for region in ("us-east", "eu-west", "ap-south", "all"):
        assert any(line.startswith(region) for line in result.stdout.splitlines())
    # the report folder: its page, and each picture it shows beside it
    index = tmp_path / "report" / "index.html"
    assert f"report: {index}" in result.stdout
    page = index.read_text(encoding="utf-8")
    for name in ("hit_ratio", "latency", "personalised", "freshness", "learning"):
        assert f'src="{name}.png" alt="' in page
        assert (tmp_path / "report" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the demo's Redis was its own and is gone; no stack file is left behind
    assert not (tmp_path / "stack.json").exists()
