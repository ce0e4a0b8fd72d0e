"""``perso up``'s counts: flags that become the settings of the same name, checked alike."""

from __future__ import annotations

import pytest

from perso import cli


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
