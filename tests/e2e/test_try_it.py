"""What ``perso up`` prints to try it, pasted into bash as printed, against the real stack."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from perso.try_it import try_it
from protocol.api import PersonalizeResponse
from tests.e2e.conftest import RunningStack, tier_pki

pytestmark = pytest.mark.e2e

PRINT_TIMEOUT_S = 30.0
# All a newcomer's machine is assumed to have: no jq, no Python.
TOOLS = ("bash", "curl", "sed")


def printed_try_it(stack: RunningStack) -> list[str]:
    """The try-it lines in ``perso up``'s output: its comment and the two lines after it."""
    deadline = time.monotonic() + PRINT_TIMEOUT_S
    while True:
        lines = stack.log().splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("# try it")]
        if starts and len(lines) >= starts[0] + 3:
            return lines[starts[0] : starts[0] + 3]
        if time.monotonic() > deadline:
            pytest.fail(f"perso up printed no try-it lines:\n{stack.log()}")
        time.sleep(0.1)


def only_tools(directory: Path) -> dict[str, str]:
    """An environment whose PATH holds bash, curl and sed and nothing else."""
    directory.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        os.symlink(found, directory / tool)
    return {"PATH": str(directory)}


def test_the_printed_commands_run_as_pasted(stack: RunningStack, tmp_path: Path) -> None:
    printed = printed_try_it(stack)
    pki = tier_pki()
    first_edge = next(iter(stack.edges.values()))
    expected = try_it(
        stack.origin_url, first_edge, str(stack.endpoints["api_key"]), pki.ca if pki else None
    )
    assert printed == expected  # the CLI prints what the function says, nothing else

    env = only_tools(tmp_path / "bin")
    ran = subprocess.run(
        [env["PATH"] + "/bash", "-c", "\n".join(printed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    # Only a 200 answers with this shape (an error is {"error": ...}); -s shows no status.
    answer = PersonalizeResponse.model_validate_json(ran.stdout)
    assert answer.user_id == "u-1"
    assert answer.items
