from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.learning import main, parse_args
from benchmarks.learning_report import PRODUCT, PRODUCT_NOT_RUN, figures_json, tables
from benchmarks.learning_run import PolicyRun
from benchmarks.regret import Trace, figures
from benchmarks.shop_world import WorldConfig


def run(name: str, regret: list[float], total: int = 20) -> PolicyRun:
    n = len(regret)
    trace = Trace(np.array(regret), np.full(n, 2.0), np.ones(n), seconds=0.5)
    return PolicyRun(name, {"k": 1}, trace, figures(trace, total, 10))


def test_without_the_product_its_slots_are_null() -> None:
    got = figures_json([run("a", [1.0] * 20), run("b", [0.5] * 20)], 20)
    assert got["final_regret_pct"] is None
    assert got["cum_regret_pct"] is None
    assert got["regret_pct_by_window"] is None
    assert got["ratio_vs_best_baseline"] is None
    assert got["product"] == PRODUCT_NOT_RUN
    assert got["best_baseline"] == "b"
    assert got["best_baseline_final_regret_pct"] == 25.0
    assert set(got["baselines"]) == {"a", "b"}
    assert got["baselines"]["a"]["configuration"] == {"k": 1}


def test_the_product_fills_the_top_level_and_its_ratio() -> None:
    got = figures_json([run("b", [0.5] * 20), run(PRODUCT, [0.4] * 20)], 20)
    assert got["final_regret_pct"] == 20.0
    assert got["cum_regret_pct"] == 20.0
    assert got["regret_pct_by_window"] == [20.0] * 10
    assert got["ratio_vs_best_baseline"] == 0.8
    assert set(got["baselines"]) == {"b"}


def test_a_run_cut_short_is_compared_at_its_end_and_not_crowned() -> None:
    got = figures_json([run("a", [1.0] * 20), run("short", [0.0] * 10)], 20)
    # "short" has the lower regret but did not serve the last tenth.
    assert got["best_baseline"] == "a"
    assert got["shortest_run_slates"] == 10
    assert got["cum_regret_pct_at_shortest_run"] == {"a": 50.0, "short": 0.0}
    assert "short served the first 10 slates" in tables(
        [run("a", [1.0] * 20), run("short", [0.0] * 10)], 20
    )


def test_a_missing_baseline_is_null_with_its_reason() -> None:
    missing = PolicyRun("vw_cb_adf", {}, None, None, "vowpalwabbit is not installed")
    got = figures_json([run("a", [1.0] * 20), missing], 20)
    assert got["baselines"]["vw_cb_adf"]["final_regret_pct"] is None
    assert got["baselines"]["vw_cb_adf"]["missing"] == "vowpalwabbit is not installed"
    assert "vowpalwabbit is not installed" in tables([missing], 20)


@pytest.mark.parametrize(
    "argv",
    [
        ["--policies", "random,nope"],
        ["--slates", "5"],
        ["--slates", "100", "--vw-slates", "200"],
        ["--vw-slates", "0"],
    ],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_a_world_too_small_for_its_categories_is_refused() -> None:
    with pytest.raises(ValueError, match="categories"):
        WorldConfig(items=10)


def test_a_small_run_ends_with_its_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(
        ["--slates", "60", "--items", "80", "--users", "10", "--out", str(tmp_path),
         "--policies", "random,epsilon_greedy,lin_ts"]
    )  # fmt: skip
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last["baselines"]) == {"random", "epsilon_greedy", "lin_ts"}
    assert last["final_regret_pct"] is None
    assert len(last["baselines"]["lin_ts"]["regret_pct_by_window"]) == 10
    assert last["world"]["items"] == 80
    assert json.loads((tmp_path / "learning.json").read_text())["slates"] == 60
    assert (last["png"] is None) == (not (tmp_path / "learning.png").exists())
