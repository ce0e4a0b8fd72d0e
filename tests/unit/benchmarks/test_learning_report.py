from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.learning import main, parse_args
from benchmarks.learning_family import NAMES as WORLDS
from benchmarks.learning_family import shop
from benchmarks.learning_policies import GRIDS, NAMES, product_config
from benchmarks.learning_report import REFERENCES, WorldRuns, family_figures, won, world_figures
from benchmarks.learning_run import PolicyRun
from benchmarks.learning_tables import summary_table, world_table
from benchmarks.perso_policy import parse_setting
from benchmarks.regret import Trace, figures
from benchmarks.shop_world import WorldConfig

SEEDS = (1, 2, 3)


def run(name: str, regret: float | list[float], total: int = 20) -> PolicyRun:
    """A run whose regret per slate is ``regret`` (oracle 2.0 a slate: regret% = 50 x it)."""
    values = np.full(total, regret) if isinstance(regret, float) else np.array(regret)
    n = len(values)
    trace = Trace(values, np.full(n, 2.0), np.ones(n), seconds=0.5)
    return PolicyRun(name, {"k": 1}, trace, figures(trace, total, 10))


def about(name: str) -> dict[str, object]:
    return {
        "summary": f"the {name} shop",
        "slates": 20,
        "pace": 60.0,
        "visible_r2": 0.7,
        "oracle_clicks_per_slate": 2.0,
        "references_regret_pct": {label: 40.0 for label in REFERENCES},
    }


def world(name: str, regrets: dict[str, list[float]]) -> WorldRuns:
    """A world where policy p's regret per slate on seed SEEDS[i] is regrets[p][i]."""
    runs = {seed: [run(p, values[i]) for p, values in regrets.items()] for i, seed in
            enumerate(SEEDS)}  # fmt: skip
    return WorldRuns(shop(name), about(name), runs)


# --- arguments ------------------------------------------------------------------------------


def test_without_set_or_slates_the_run_is_the_headline() -> None:
    args = parse_args([])
    assert args.mode == "headline"
    assert [w.name for w in args.worlds] == list(WORLDS)
    assert args.seeds == [1, 2, 3]
    assert args.policies == list(NAMES)
    assert args.overrides == {}
    assert args.slates is None


def test_a_set_makes_the_run_an_overrides_run_parsed_by_the_fields_type() -> None:
    args = parse_args(
        ["--set", "reward_wait_s=3", "--set", "edge_ranking=true", "--worlds", "clicks,subtle"]
    )
    assert args.mode == "overrides"
    assert args.overrides == {"reward_wait_s": 3.0, "edge_ranking": True}
    assert isinstance(args.overrides["reward_wait_s"], float)
    assert [w.name for w in args.worlds] == ["clicks", "subtle"]


def test_slates_alone_shorten_the_headline() -> None:
    args = parse_args(["--slates", "400"])
    assert args.mode == "shortened"
    assert args.slates == 400


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("text_encoder=hashing", ("text_encoder", "hashing")),
        ("workers=2", ("workers", 2)),
        ("qdrant_url=none", ("qdrant_url", None)),
        ("origin_urls=http://a:1, http://b:2", ("origin_urls", ("http://a:1", "http://b:2"))),
    ],
)
def test_settings_are_parsed_by_their_type(text: str, expected: tuple[str, object]) -> None:
    assert parse_setting(text) == expected


def test_tuning_worlds_measure_on_seeds_from_100_and_are_no_headline() -> None:
    args = parse_args(["--tuning-worlds", "--seeds", "101,102", "--worlds", "clicks"])
    assert args.mode == "tuning"
    assert args.seeds == [101, 102]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--set", "no_such_setting=1"], "no_such_setting"),
        (["--set", "reward_wait_s"], "NAME=VALUE"),
        (["--set", "reward_wait_s=soon"], "reward_wait_s"),
        (["--set", "reward_wait_s=-1"], "reward_wait_s"),
        (["--set", "data_dir=/tmp"], "data_dir"),
        (["--seeds", "1,100"], "tuning"),
        (["--seeds", "101"], "tuning"),
        (["--tuning-worlds", "--seeds", "101,3"], "tuning seeds are 100 and up"),
        (["--seeds", "1,1"], "twice"),
        (["--worlds", "clicks,mars"], "mars"),
        (["--policies", "random,nope"], "nope"),
        (["--slates", "5"], "--slates"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert named in capsys.readouterr().err


def test_the_products_two_paths_share_their_settings() -> None:
    edge, origin = (product_config(n, {"reward_wait_s": 3.0}) for n in ("perso", "perso_origin"))
    assert (edge.path, origin.path) == ("edge", "origin")
    assert edge.overrides == origin.overrides == {"reward_wait_s": 3.0}
    with pytest.raises(ValueError, match="no such settings"):
        product_config("perso", {"nope": 1})


# --- figures --------------------------------------------------------------------------------


def test_a_worlds_figures_are_medians_over_the_seeds_with_their_range() -> None:
    got = world_figures(world("clicks", {"lin_ts": [0.5, 0.4, 1.0]}))
    lin = got["policies"]["lin_ts"]
    assert lin["final_regret_pct"] == 25.0  # the median of 25, 20, 50
    assert lin["final_regret_pct_range"] == [20.0, 50.0]
    assert lin["cum_regret_pct"] == 25.0
    assert lin["regret_pct_by_window"] == [25.0] * 10
    assert lin["clicks_per_slate"] == 1.0
    assert set(lin["by_seed"]) == set(SEEDS)
    assert lin["by_seed"][2] == {"final": 20.0, "cum": 20.0, "windows": [20.0] * 10, "seconds": 0.5}
    assert lin["configuration"] == {"k": 1}


@pytest.mark.parametrize(
    ("perso", "expected"),
    [
        ([0.3] * 20, True),  # below both on both
        ([0.5] * 20, False),  # level with VW is not below it
        ([0.9] * 10 + [0.1] * 10, False),  # the best final tenth, a worse cumulative
        ([0.2] * 18 + [0.9] * 2, False),  # the best cumulative, a worse final tenth
    ],
)
def test_the_product_wins_a_world_below_both_rivals_on_both_figures(
    perso: list[float], expected: bool
) -> None:
    regrets = {"lin_ts": [0.8] * 3, "vw_cb_adf": [0.5] * 3, "perso": [perso] * 3}
    got = world_figures(world("clicks", regrets))  # type: ignore[arg-type]
    assert got["won"] is expected


def test_a_world_without_vw_is_not_won() -> None:
    figures_by = world_figures(world("clicks", {"lin_ts": [0.8] * 3, "perso": [0.1] * 3}))
    assert figures_by["won"] is False
    missing = PolicyRun("vw_cb_adf", {}, None, None, "vowpalwabbit is not installed")
    policies = {**figures_by["policies"]}
    assert won(policies) is False
    runs = {seed: [run("lin_ts", 0.8), run("perso", 0.1), missing] for seed in SEEDS}
    got = world_figures(WorldRuns(shop("clicks"), about("clicks"), runs))
    assert got["won"] is False
    assert got["policies"]["vw_cb_adf"]["final_regret_pct"] is None
    assert got["policies"]["vw_cb_adf"]["missing"] == "vowpalwabbit is not installed"
    assert "vowpalwabbit is not installed" in world_table("clicks", got)


def test_the_gaps_between_paths_and_against_the_best_cold_start() -> None:
    regrets = {
        "random": [1.8] * 3,
        "lin_ts": [1.0] * 3,
        "perso": [[1.2] * 2 + [0.6] * 18] * 3,
        "perso_origin": [0.7] * 3,
    }
    got = world_figures(world("clicks", regrets))  # type: ignore[arg-type]
    assert got["edge_origin_gap_final_pts"] == 5.0  # |30 - 35|
    assert got["first_tenth_gap_pts"] == 10.0  # 60 against lin_ts's 50
    assert got["first_tenth_best_baseline"] == "lin_ts"
    assert got["best_rival_final"] == ["lin_ts", 50.0]


def test_the_familys_summary_and_json_shape() -> None:
    worlds = [
        world("clicks", {"lin_ts": [0.8] * 3, "vw_cb_adf": [0.6] * 3, "perso": [0.4] * 3}),
        world("graded", {"lin_ts": [0.8] * 3, "vw_cb_adf": [0.6] * 3, "perso": [0.7] * 3}),
        world("subtle", {"lin_ts": [0.8] * 3, "vw_cb_adf": [0.6] * 3, "perso": [0.5] * 3}),
    ]
    got = family_figures(worlds, mode="overrides", overrides={"reward_wait_s": 3.0}, seeds=SEEDS)
    assert got["mode"] == "overrides"
    assert got["overrides"] == {"reward_wait_s": 3.0}
    assert got["seeds"] == [1, 2, 3]
    assert got["worlds"] == 3
    assert got["worlds_won"] == 2
    assert got["median_final_regret_pct"] == 25.0
    assert got["worst_final_regret_pct"] == 35.0
    assert got["median_cum_regret_pct"] == 25.0
    assert got["worst_cum_regret_pct"] == 35.0
    assert list(got["by_world"]) == ["clicks", "graded", "subtle"]
    entry = got["by_world"]["clicks"]
    assert {"about", "won", "edge_origin_gap_final_pts", "first_tenth_gap_pts", "policies"} <= set(
        entry
    )
    assert {"final_regret_pct", "cum_regret_pct", "regret_pct_by_window", "by_seed",
            "configuration"} <= set(entry["policies"]["perso"])  # fmt: skip
    json.dumps(got)  # one JSON object
    printed = summary_table(got)
    assert "2 of 3 won" in printed
    assert "25.0% / 35.0%" in printed


def test_a_small_run_of_baselines_ends_with_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--worlds", "subtle", "--seeds", "1", "--slates", "60", "--out", str(tmp_path),
          "--policies", "random,lin_ts"])  # fmt: skip
    out = capsys.readouterr().out
    assert "subtle seed 1 lin_ts: 60 slates" in out
    last = json.loads(out.strip().splitlines()[-1])
    assert last["mode"] == "shortened"
    assert last["worlds"] == 1
    assert set(last["by_world"]["subtle"]["policies"]) == {"random", "lin_ts"}
    assert last["by_world"]["subtle"]["about"]["slates"] == 60
    assert 0.4 < last["by_world"]["subtle"]["about"]["visible_r2"] < 0.6
    saved = json.loads((tmp_path / "learning.json").read_text())
    assert saved["by_world"]["subtle"]["policies"]["lin_ts"]["final_regret_pct"] is not None
    assert (tmp_path / "learning-subtle.png").exists()


def test_a_world_too_small_for_its_categories_is_refused() -> None:
    with pytest.raises(ValueError, match="categories"):
        WorldConfig(items=10)


def test_tuning_runs_the_grids_on_the_tuning_seeds_and_prints_what_to_paste(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["--tune", "--worlds", "subtle", "--seeds", "1", "--tune-slates", "20",
          "--policies", "epsilon_greedy", "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert "CHOSEN entries to paste" in out
    assert '    "subtle": {' in out
    assert "EPSILON_GREEDY: BetaPrior(alpha=1.0, beta=" in out
    last = json.loads(out.strip().splitlines()[-1])
    assert last["mode"] == "tune"
    assert last["seeds"] == [101]
    trials = last["tuning"]["subtle"]["epsilon_greedy"]["trials"]
    assert len(trials) == len(GRIDS["epsilon_greedy"])
    assert isinstance(last["tuning"]["subtle"]["epsilon_greedy"]["on_edge"], list)
