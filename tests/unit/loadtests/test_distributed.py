from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loadtests.distributed import (
    LOCUSTFILE,
    STARTUP_S,
    Plan,
    hard_bound_s,
    main,
    master_argv,
    parser,
    plan_of,
    problems,
    resolve_targets,
    worker_argv,
)
from loadtests.exceptions import LoadTestError, TargetsError
from loadtests.report import Figures
from loadtests.targets import Targets

STACK = {
    "origin_url": "http://127.0.0.1:8100",
    "api_key": "demo",
    "edges": {"us-east": "http://127.0.0.1:8101", "eu-west": "http://127.0.0.1:8102"},
}
REMOTE = [
    "--edges", "us-east=https://use1.example.com,https://use2.example.com",
    "--edges", "eu-west=https://euw.example.com",
    "--origin", "https://origin.example.com",
    "--api-key", "k-1",
]  # fmt: skip


def resolve(tmp_path: Path, *argv: str) -> Targets:
    return resolve_targets(parser(tmp_path).parse_args(argv), tmp_path / "stack.json")


def test_the_stack_file_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text(json.dumps(STACK))
    targets = resolve(tmp_path)
    assert targets.regions == ["us-east", "eu-west"]
    assert targets.api_key == "demo"


def test_a_named_stack_file(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text(json.dumps(STACK))
    assert resolve(tmp_path, "--stack", str(tmp_path / "other.json")).origin_url == (
        "http://127.0.0.1:8100"
    )


def test_a_remote_deployment_from_the_options(tmp_path: Path) -> None:
    targets = resolve(tmp_path, *REMOTE, "--remote")
    assert dict(targets.edges) == {
        "us-east": ("https://use1.example.com", "https://use2.example.com"),
        "eu-west": ("https://euw.example.com",),
    }
    assert (targets.origin_url, targets.api_key) == ("https://origin.example.com", "k-1")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "no stack file at {tmp}/stack.json and no --edges/--origin/--api-key"),
        (("--stack", "{tmp}/x.json"), "no stack file at {tmp}/x.json"),
        (("--origin", "http://127.0.0.1:1"), "also needs --edges, --api-key"),
        (("--edges", "a=http://127.0.0.1:1", "--api-key", "k"), "also needs --origin"),
        (("--stack", "{tmp}/x.json", "--origin", "http://127.0.0.1:1"), "either --stack or"),
        # Far addresses only when asked for.
        (tuple(REMOTE), "https://origin.example.com, https://use1.example.com, "),
        (tuple(REMOTE), "not loopback; pass --remote"),
        (("--edges", "a=http://127.0.0.1:1", "--origin", "http://127.0.0.1:2", "--api-key", "k",
          "--edges", "a=http://127.0.0.1:3"), "region a given twice"),
    ],
)  # fmt: skip
def test_missing_or_far_targets_are_refused_naming_what(
    tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    with pytest.raises(TargetsError) as caught:
        resolve(tmp_path, *(a.format(tmp=tmp_path) for a in argv))
    assert message.format(tmp=tmp_path) in str(caught.value)


TARGETS = Targets(
    {"us-east": ("http://127.0.0.1:8101",), "eu-west": ("http://127.0.0.1:8102",)},
    "http://127.0.0.1:8100",
    "demo",
)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--users", "1"), "--users 1: at least one per region (2)"),
        (("--seconds", "0"), "--seconds must be > 0"),
        (("--spawn-rate", "-1"), "--spawn-rate must be > 0"),
        (("--casual-rps", "0"), "--casual-rps must be > 0"),
        (("--population", "1"), "--population 1: at least one per region"),
    ],
)
def test_options_out_of_range_are_refused(
    tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    with pytest.raises(LoadTestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_of(parser(tmp_path).parse_args(argv), TARGETS)


def test_the_default_plan_is_bounded_and_reports_under_the_data_dir(tmp_path: Path) -> None:
    plan = plan_of(parser(tmp_path).parse_args([]), TARGETS)
    assert (plan.users, plan.seconds, plan.report_dir) == (36, 60, tmp_path / "load")
    assert 0 < plan.master_port < 65536
    assert hard_bound_s(plan.seconds) == 60 + STARTUP_S + 30


def plan(tmp_path: Path) -> Plan:
    return Plan(TARGETS, users=6, spawn_rate=3.0, seconds=7, report_dir=tmp_path, master_port=5557)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_master_listens_on_loopback_for_one_worker_per_region(tmp_path: Path) -> None:
    argv = master_argv(plan(tmp_path))
    assert argv[:5] == [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    assert "--master" in argv
    assert "--headless" in argv
    assert flag(argv, "--master-bind-host") == "127.0.0.1"
    assert flag(argv, "--master-bind-port") == "5557"
    assert flag(argv, "--expect-workers") == "2"
    assert flag(argv, "--users") == "6"
    assert flag(argv, "--run-time") == "7s"
    assert flag(argv, "--html") == str(tmp_path / "report.html")
    assert flag(argv, "--csv") == str(tmp_path / "locust")
    assert flag(argv, "--perso-stack") == str(tmp_path / "targets.json")
    assert "--perso-region" not in argv


def test_each_worker_is_told_its_region(tmp_path: Path) -> None:
    argv = worker_argv(plan(tmp_path), "eu-west")
    assert "--worker" in argv
    assert flag(argv, "--master-host") == "127.0.0.1"
    assert flag(argv, "--master-port") == "5557"
    assert flag(argv, "--perso-region") == "eu-west"
    assert flag(argv, "--perso-stack") == str(tmp_path / "targets.json")


GOOD = [Figures("us-east", 90, 0, 9.0, 10, 30, 40), Figures("eu-west", 80, 0, 8.0, 10, 30, 40)]


@pytest.mark.parametrize(
    ("master", "workers", "figures", "exceptions", "expected"),
    [
        (0, {"us-east": 0, "eu-west": 0}, GOOD, 0, []),
        (None, {"us-east": 0}, GOOD, 0, ["the run took longer than 97 s and was stopped"]),
        (1, {}, GOOD, 0, ["the Locust master exited 1 (master.log says why)"]),
        (0, {"us-east": None, "eu-west": 2}, GOOD, 0,
         ["the worker of us-east did not stop with the master",
          "the worker of eu-west exited 2 (worker-eu-west.log)"]),
        (0, {}, None, 0, ["Locust wrote no CSV stats"]),
        (0, {}, [GOOD[0], Figures("eu-west", 0, 0, 0.0, None, None, None)], 0,
         ["eu-west: no request reached its edges"]),
        (0, {}, [Figures("us-east", 1200, 3, 9.0, 10, 30, 40)], 0,
         ["us-east: 3 of 1,200 requests failed"]),
        (0, {}, GOOD, 4, ["4 exceptions in the simulated browsers (locust_exceptions.csv)"]),
    ],
)  # fmt: skip
def test_problems(
    master: int | None,
    workers: dict[str, int | None],
    figures: list[Figures] | None,
    exceptions: int,
    expected: list[str],
) -> None:
    assert problems(master, workers, figures, 97.0, exceptions) == expected


def test_main_exits_2_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PERSO_DATA_DIR", str(tmp_path))
    assert main([]) == 2
    err = capsys.readouterr().err
    assert f"no stack file at {tmp_path}/stack.json" in err
    assert "--edges/--origin/--api-key" in err
    assert not (tmp_path / "load").exists()  # nothing started, nothing written


def test_main_exits_2_on_a_bad_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PERSO_EMBEDDING_DIM", "2")
    assert main([]) == 2
    assert "PERSO_EMBEDDING_DIM" in capsys.readouterr().err
