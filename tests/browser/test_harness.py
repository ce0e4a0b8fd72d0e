"""The browser harness itself: Debian's chromium driven headless, clicks, and console errors
caught (a page that logs one fails its test)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.async_api import Page

from tests.browser.conftest import BrowserPage

PAGE = """<!doctype html><html><head><title>harness</title>
<link rel="icon" href="data:,"></head><body>
<button id="go" type="button">go</button><p id="out">before</p>
<script>
document.getElementById("go").addEventListener("click", () => {
  document.getElementById("out").textContent = "after";
  if (location.hash === "#fail") console.error("the page failed");
});
</script></body></html>"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "index.html").write_text(PAGE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


async def test_a_click_changes_the_page(page: BrowserPage, site: str) -> None:
    tab: Page = page.page  # type: ignore[assignment]
    await tab.goto(site)
    await tab.click("#go")
    assert await tab.text_content("#out") == "after"


async def test_a_console_error_is_caught(page: BrowserPage, site: str) -> None:
    tab: Page = page.page  # type: ignore[assignment]
    await tab.goto(site + "#fail")
    await tab.click("#go")
    await tab.wait_for_timeout(100)
    assert page.console.errors == ["console: the page failed"]
    page.console.errors.clear()  # seen: the fixture's check at teardown would fail it
