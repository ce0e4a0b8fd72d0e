"""Product code names the rule, not the document it came from: "the segment cache key",
"tiered freshness", "the preference lock", never "Algorithm 5", "seed 001" or "issue 18",
which only a reader holding that paper can open. ``docs/glossary.md`` says once where each
name comes from.

Checked as text over every module of the product's packages (comments, docstrings and
strings alike), in any case, so that "Seed 001" opening a sentence is caught too.
"""

from __future__ import annotations

import re
from pathlib import Path

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
)
CITATION = re.compile(r"Algorithm [0-9]|seed 00[0-9]|issue [0-9]+", re.IGNORECASE)


def citations() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if not CITATION.search(text):
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if CITATION.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_product_code_cites_no_spec_by_number() -> None:
    found = citations()
    assert not found, "name the rule instead (docs/glossary.md):\n" + "\n".join(found)
