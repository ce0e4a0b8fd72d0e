"""Browser tests: the pages in a real headless Chromium, driven by Playwright's client.

The browser is Debian's ``chromium`` (``/usr/bin/chromium``, or ``TEST_CHROMIUM``),
which ``make test`` installs when it runs as root; no browser is ever downloaded. Without
it these tests are skipped with the reason (``-rs`` prints it). It starts with the flags a
machine with no network beyond loopback needs (no background connections, no component
updates), a fresh profile each time.

``page`` records what the page logs as an error and every uncaught exception; a test ends
by ``assert_no_console_errors`` (the fixture checks it again at teardown).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> Path | None:
    named = os.environ.get("TEST_CHROMIUM")
    if named:
        return Path(named)
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


@dataclass
class Console:
    """What a page reported as going wrong."""

    errors: list[str] = field(default_factory=list)


@dataclass
class BrowserPage:
    page: object  # playwright.async_api.Page (typed loosely: tests import it themselves)
    console: Console

    def assert_no_console_errors(self) -> None:
        assert self.console.errors == []


@pytest.fixture
async def page() -> AsyncIterator[BrowserPage]:
    chromium = chromium_path()
    if chromium is None or not os.access(chromium, os.X_OK):
        pytest.skip(
            "no chromium: `make test` installs Debian's chromium when run as root "
            "(apt-get install chromium), or set TEST_CHROMIUM"
        )
    try:
        from playwright.async_api import async_playwright  # noqa: PLC0415
    except ImportError:  # pragma: no cover - a dev dependency
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    console = Console()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(chromium), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 900})
            tab = await context.new_page()
            tab.on(
                "console",
                lambda message: (
                    console.errors.append(f"console: {message.text}")
                    if message.type == "error"
                    else None
                ),
            )
            tab.on("pageerror", lambda error: console.errors.append(f"page error: {error}"))
            wrapped = BrowserPage(tab, console)
            yield wrapped
            wrapped.assert_no_console_errors()
        finally:
            await browser.close()
