"""perso.plots: the house's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from perso import plots


@pytest.mark.parametrize(
    ("samples", "xs", "ys"),
    [
        ([], [], []),
        ([5.0], [5.0], [1.0]),
        ([3.0, 1.0, 2.0, 2.0], [1.0, 2.0, 2.0, 3.0], [0.25, 0.5, 0.75, 1.0]),
    ],
)
def test_cdf_points(samples: list[float], xs: list[float], ys: list[float]) -> None:
    assert plots.cdf_points(samples) == (xs, ys)


def test_a_figure_is_written_whole_and_replaces_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "deeper" / "figure.png"
    for n in (1, 2):
        with plots.figure(path, f"Run {n}: latency (ms)", panels=2) as (left, right):
            plots.cdf(left, [float(v) for v in range(1, 50 * n)], "ours", log_x=True)
            plots.labelled(left, "CDF", "ms", "share")
            plots.no_data(right, "nothing measured")
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert [p.name for p in path.parent.iterdir()] == ["figure.png"]


def test_a_failure_while_drawing_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "figure.png"
    with pytest.raises(RuntimeError), plots.figure(path, "t"):
        raise RuntimeError("drawing failed")
    assert list(tmp_path.iterdir()) == []
