"""Which page each generated part goes to, and how a page is brought up to date or checked.
Paths are relative to the repository's root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perso.reference import api_page, keys_page, settings_page
from perso.reference.markdown import with_generated

COMMAND = ".venv/bin/python -m perso.reference"
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Page:
    path: str
    render: Callable[[], str]


def _api() -> str:
    documents = api_page.documents()
    return "\n".join(
        f"### The {service}'s routes\n\n" + api_page.render(spec)
        for service, spec in documents.items()
    )


PAGES = (
    Page("docs/configuration.md", settings_page.render),
    Page("docs/api.md", _api),
    Page("docs/redis-keys.md", keys_page.render),
)


def expected(page: Page, root: Path = ROOT) -> str:
    """The page as the generator makes it: its prose as committed, its generated part new."""
    return with_generated((root / page.path).read_text(encoding="utf-8"), page.render())


def stale(root: Path = ROOT) -> list[str]:
    """The pages whose generated part differs from what the code makes now."""
    return [
        page.path
        for page in PAGES
        if (root / page.path).read_text(encoding="utf-8") != expected(page, root)
    ]


def write(root: Path = ROOT) -> list[str]:
    """Bring every page up to date; the ones that changed."""
    changed = []
    for page in PAGES:
        path = root / page.path
        text = expected(page, root)
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(page.path)
    return changed
