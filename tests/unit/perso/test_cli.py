"""The ``perso`` command's arguments: ``perso up``'s counts (flags that become the settings
of the same name, checked alike), the advertised URL, and ``perso recompute``'s former
name."""

from __future__ import annotations

import pytest

from perso import cli
from perso.cli_parser import RECOMPUTE_ALIAS, parser


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["up", "--workers", "-1"], "PERSO_WORKERS"),
        (["up", "--regions", "us east"], "PERSO_REGIONS"),
        (["up", "--regions", "a,a"], "PERSO_REGIONS"),
    ],
)
def test_a_bad_count_exits_2_naming_its_variable(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["up", "--origins", "0"], ["up", "--origins", "two"]])
def test_a_stack_needs_an_origin(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2


@pytest.mark.parametrize(
    ("fields", "port", "expected"),
    [
        ({}, 8101, "http://127.0.0.1:8101"),  # its own host and port
        ({"host": "10.0.0.7"}, 9000, "http://10.0.0.7:9000"),
        ({"advertise_url": "https://edge-1.example:8443/"}, 9000, "https://edge-1.example:8443"),
    ],
)
def test_the_advertised_url(fields: dict[str, object], port: int, expected: str) -> None:
    """Where ``perso edge`` / ``perso origin`` register for the operations page."""
    settings = cli.Settings(**fields)  # type: ignore[arg-type]
    assert cli.advertised(settings, port).advertise_url == expected


@pytest.mark.parametrize("url", ["edge-1:8101", "ftp://edge-1", "http://"])
def test_an_advertised_url_must_be_one(url: str) -> None:
    with pytest.raises(ValueError, match="advertise_url"):
        cli.Settings(advertise_url=url)


@pytest.mark.parametrize("name", ["recompute", RECOMPUTE_ALIAS])
def test_recompute_answers_to_its_former_name_for_a_release(name: str) -> None:
    args = parser().parse_args([name, "--since", "6h", "--json"])
    assert (args.command, args.since, args.json) == (name, "6h", True)
