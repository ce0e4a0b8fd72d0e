"""Product code and documentation name the rule, not the document it came from: "the
segment cache key", "tiered freshness", "the preference lock", "the feedback spool", never
"Algorithm 5", "seed 001" or "issue 18", which only a reader holding that paper can open.
``docs/glossary.md`` says once where each name comes from, and is the one page left out.

Checked as text over every module of the product's packages (comments, docstrings and
strings alike) and over every Markdown page of the documentation (``README.md`` and
``docs/``), in any case, so that "Seed 001" opening a sentence is caught too, and across a
line break (a number wrapped onto the next line, a comment's ``#`` between them), so that
"issue\\n18" and "issue #18" are caught as well.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "edge",
    "origin",
    "protocol",
    "relevance",
    "sync",
    "redis_client",
    "config",
    "coordination",
    "invalidation",
    "resilience",
    "evaluation",
    "perso",
    "web",
    "decision_log",
)
# The one page that cites by number, on purpose: its "Where the rules come from".
GLOSSARY = ROOT / "docs" / "glossary.md"
CITATION = re.compile(
    r"Algorithm[\s#]+[0-9]|seed[\s#]+00[0-9]|\bissues?[\s#]+[0-9]+", re.IGNORECASE
)
# How much of a line to show either side of a citation (a table row of docs/measured.md is
# thousands of characters long).
CONTEXT = 60


def product_modules() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def documentation_pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [page for page in pages if page != GLOSSARY]


def citations(paths: Iterable[Path]) -> list[str]:
    """Each citation as ``path:line: text``, the text the citation's line around it."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            line_start = text.rfind("\n", 0, match.start()) + 1
            line_end = text.find("\n", match.end())
            line_end = len(text) if line_end == -1 else line_end
            start = max(line_start, match.start() - CONTEXT)
            end = min(line_end, match.end() + CONTEXT)
            excerpt = " ".join(text[start:end].split())
            number = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{number}: {excerpt}")
    return found


def test_the_documentation_has_pages_to_check() -> None:
    pages = documentation_pages()
    assert ROOT / "README.md" in pages
    assert ROOT / "docs" / "measured.md" in pages
    assert GLOSSARY.exists()
    assert GLOSSARY not in pages


@pytest.mark.parametrize(
    "cited",
    [
        "issue 18",
        "Issue 29's targets",
        "issues 20, 30",
        "issues 15-17",
        "issue #30",
        "before issue\n  31",
        "Algorithm 5's keys",
        "Seed 001",
        "seed\n    # 001",
    ],
)
def test_the_pattern_catches_each_spelling(cited: str) -> None:
    assert CITATION.search(cited)


@pytest.mark.parametrize("named", ["tissue 5", "seed 1", "seeds 1-3", "the seed's", "issued 3"])
def test_the_pattern_leaves_other_numbers_alone(named: str) -> None:
    assert not CITATION.search(named)


def test_product_code_cites_no_spec_by_number() -> None:
    found = citations(product_modules())
    assert not found, "name the rule instead (docs/glossary.md):\n" + "\n".join(found)


def test_documentation_cites_no_issue_or_spec_by_number() -> None:
    found = citations(documentation_pages())
    assert not found, (
        "say what the rule or change is instead (only docs/glossary.md says where each name "
        "comes from):\n" + "\n".join(found)
    )
