"""What ``perso up`` prints to try it, pasted into bash as printed, against the real stack;
and the README's API example, run as written (its two URLs those of the stack here)."""

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
# What the README's example uses besides.
README_TOOLS = ("grep", "cut", "head")
README = Path(__file__).resolve().parents[2] / "README.md"
README_SECTION = "## The API in ten lines"
# The addresses the README's example gives (perso up's defaults).
README_ORIGIN, README_EDGE = "http://127.0.0.1:8100", "http://127.0.0.1:8101"


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


def only_tools(directory: Path, tools: tuple[str, ...] = TOOLS) -> dict[str, str]:
    """An environment whose PATH holds ``tools`` (bash, curl and sed) and nothing else."""
    directory.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        os.symlink(found, directory / tool)
    return {"PATH": str(directory)}


def run_bash(
    script: str, env: dict[str, str], *, cwd: Path, options: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``script`` run by the bash of ``env``'s PATH, in ``cwd``."""
    return subprocess.run(
        [env["PATH"] + "/bash", *options, "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_printed_commands_run_as_pasted(stack: RunningStack, tmp_path: Path) -> None:
    printed = printed_try_it(stack)
    pki = tier_pki()
    first_edge = next(iter(stack.edges.values()))
    expected = try_it(
        stack.origin_url, first_edge, str(stack.endpoints["api_key"]), pki.ca if pki else None
    )
    assert printed == expected  # the CLI prints what the function says, nothing else

    env = only_tools(tmp_path / "bin")
    ran = run_bash("\n".join(printed), env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    # Only a 200 answers with this shape (an error is {"error": ...}); -s shows no status.
    answer = PersonalizeResponse.model_validate_json(ran.stdout)
    assert answer.user_id == "u-1"
    assert answer.items


def readme_example() -> str:
    """The shell block of the README's API section, as written."""
    text = README.read_text()
    section = text[text.index(README_SECTION) :]
    start = section.index("```sh\n") + len("```sh\n")
    return section[start : section.index("```", start)]


def test_the_readme_api_example_runs(stack: RunningStack, tmp_path: Path) -> None:
    example = readme_example()
    assert README_ORIGIN in example
    assert README_EDGE in example
    first_edge = next(iter(stack.edges.values()))
    script = example.replace(README_ORIGIN, stack.origin_url).replace(README_EDGE, first_edge)
    if tier_pki() is not None:
        pytest.skip("the README's example is plain HTTP")
    # It reads the API key from .perso/stack.json: perso up's own file, in a directory of its
    # own as the README's reader has it.
    (tmp_path / ".perso").mkdir()
    shutil.copy(stack.data_dir / "stack.json", tmp_path / ".perso" / "stack.json")
    env = only_tools(tmp_path / "bin", TOOLS + README_TOOLS)
    ran = run_bash(script, env, cwd=tmp_path, options=("-e",))
    assert ran.returncode == 0, ran.stderr
    answer_line, feedback_line = ran.stdout.strip().splitlines()[-2:]
    answer = PersonalizeResponse.model_validate_json(answer_line)
    assert answer.user_id == "u-1"
    assert answer.items
    assert '"status":"accepted"' in feedback_line.replace(" ", ""), feedback_line
