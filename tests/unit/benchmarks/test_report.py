"""benchmarks.report: the distributions kept in a benchmark's JSON, and the file itself."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks.edge_replay import TIMELINE_S, Tally
from benchmarks.report import quantiles, save_and_finish


@pytest.mark.parametrize(
    ("samples", "points", "expected"),
    [
        ([], 101, []),
        ([4.0], 3, [4.0, 4.0, 4.0]),
        ([3.0, 1.0, 2.0], 3, [1.0, 2.0, 3.0]),
        ([float(v) for v in range(101)], 5, [0.0, 25.0, 50.0, 75.0, 100.0]),
    ],
)
def test_quantiles(samples: list[float], points: int, expected: list[float]) -> None:
    assert quantiles(samples, points) == expected


def test_save_and_finish_writes_the_json_beside_the_png_and_ends_with_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    json_path, png_path = tmp_path / "bench" / "x.json", tmp_path / "bench" / "x.png"
    save_and_finish({"p99_ms": 3.5}, json_path, png_path, time.perf_counter(), {"cdf": [1, 2]})
    saved = json.loads(json_path.read_text())
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert saved["p99_ms"] == last["p99_ms"] == 3.5
    assert saved["png"] == last["png"] == str(png_path)
    # the distributions are the file's alone: the last line stays short
    assert saved["cdf"] == [1, 2]
    assert "cdf" not in last
    assert [p.name for p in json_path.parent.iterdir()] == ["x.json"]


@pytest.mark.parametrize(
    ("requests", "label", "expected"),
    [
        ([], "all", []),
        ([(0.0, True), (1.0, False)], "all", [(0.0, 0.5)]),
        (
            [(0.0, True), (TIMELINE_S + 1, True), (TIMELINE_S + 2, False)],
            "region:us-east",
            [(0.0, 1.0), (TIMELINE_S / 3600, 0.5)],
        ),
        ([(0.0, True)], "page:home", []),
    ],
)
def test_the_replays_tally_keeps_the_hit_ratio_over_time(
    requests: list[tuple[float, bool]], label: str, expected: list[tuple[float, float]]
) -> None:
    tally = Tally()
    for at_s, hit in requests:
        tally.count(("all", "region:us-east", "page:home", "class:power/segment:x"), hit, at_s)
    assert tally.timeline(label) == expected
    assert all("/" not in name for _, name in tally.timeline_requests)
