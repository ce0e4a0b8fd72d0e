"""The house's size limits, so that a reader finds each concept in one place and each
function reads as a list of steps: no module of the product over ``MODULE_LINES`` lines, no
function over ``FUNCTION_LINES``. A module that outgrows the limit is cut at its seams into
modules named by what they do, not granted an exception.

Checked over every module of the product's packages (``ast`` for the functions: a nested
function counts on its own and inside its parent).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "config",
    "coordination",
    "decision_log",
    "edge",
    "evaluation",
    "invalidation",
    "loadtests",
    "origin",
    "perso",
    "protocol",
    "redis_client",
    "relevance",
    "resilience",
    "sync",
    "web",
)
MODULE_LINES = 450
FUNCTION_LINES = 80


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def long_modules() -> list[str]:
    found = []
    for path in modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MODULE_LINES:
            found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return found


def long_functions() -> list[str]:
    found = []
    for path in modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > FUNCTION_LINES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_every_package_exists() -> None:
    assert all((ROOT / package / "__init__.py").is_file() for package in PACKAGES)


def test_no_module_over_the_limit() -> None:
    found = long_modules()
    assert not found, f"cut at the seams (at most {MODULE_LINES} lines):\n" + "\n".join(found)


def test_no_function_over_the_limit() -> None:
    found = long_functions()
    assert not found, f"cut into steps (at most {FUNCTION_LINES} lines):\n" + "\n".join(found)
