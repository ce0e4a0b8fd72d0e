"""The operations page (issue 21) in Debian's chromium against a real stack in real
processes: ``perso up`` with two regions (embedded Redis, the origin, a stream worker, an
edge per region; 300 items), one more edge process of us-east started here, and
simulated shoppers (``perso.demo.drive``) so that the figures move.

The page is the origin's ``/ops``; the token is typed by keyboard alone. The extra edge
is then killed by its PID (SIGKILL: no clean goodbye, as a crash) and the page must call
it unreachable within a few seconds while the other rows keep updating. No console error.
Last, the origin serving the page is killed: the page keeps the figures it last had and
says its origin is unreachable, until the stack's supervisor has it back.
``OPS_SCREENSHOT=docs/img/ops.png`` makes the test write the README's screenshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from playwright.async_api import Page, expect

from loadtests.traffic import make_population
from perso.demo import drive
from perso.stack_endpoints import Endpoints
from tests.browser.conftest import BrowserPage, chromium_path
from tests.credentials import IDENTITY_KEY
from tests.e2e.conftest import RunningStack, child_pid, free_port_run, perso_env, start_stack
from tests.readiness import wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

REGIONS = ("us-east", "eu-west")
EXTRA = "edge-us-east-extra"
# The page polls every 2 s; a killed process is unreachable at the next scrape.
UNREACHABLE_WITHIN_MS = 8_000
UNKNOWN = "\N{EN DASH}"  # what the page shows for a figure it does not have


@pytest.fixture(scope="module")
def ops_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    if chromium_path() is None:
        pytest.skip("no chromium: see tests/browser/conftest.py")  # before starting a stack
    running = start_stack(
        tmp_path_factory.mktemp("ops"),
        ports=3,
        PERSO_REGIONS=",".join(REGIONS),
        PERSO_CATALOG_SIZE="300",
        PERSO_TEXT_ENCODER="hashing",
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
        # Joins close within seconds, so that the learning curve has points to draw.
        PERSO_REWARD_WAIT_S="3",
    )
    yield running
    running.stop()


@pytest.fixture
def extra_edge(ops_stack: RunningStack, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One more us-east edge process, not supervised by the stack (so that it stays dead
    once killed), registered in the stack's Redis like any edge."""
    port = free_port_run(1)
    env = perso_env(
        tmp_path,
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
        PERSO_ORIGIN_URL=ops_stack.origin_url,
        PERSO_ORIGIN_TOKEN=str(ops_stack.endpoints["origin_token"]),
        PERSO_REGIONS=",".join(REGIONS),
        PERSO_EDGE_NAME=EXTRA,
        PERSO_LOG_LEVEL="warning",
        REDIS_URL=ops_stack.redis_url,
    )
    log = (tmp_path / "edge.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "perso", "edge", "--region", "us-east", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}", process, tmp_path / "edge.log")
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


@contextlib.asynccontextmanager
async def shoppers(stack: RunningStack, seconds: float) -> AsyncIterator[None]:
    """Simulated shoppers on both regions' edges for up to ``seconds`` (stopped on exit)."""
    e = stack.endpoints
    endpoints = Endpoints(
        redis_url=e["redis_url"],
        origin_url=e["origin_url"],
        edges=e["edges"],
        data_dir=e["data_dir"],
        admin_token=e["admin_token"],
        origin_token=e["origin_token"],
        api_key=e["api_key"],
    )
    population = make_population(3000, list(REGIONS), 7)
    task = asyncio.create_task(drive(endpoints, population, seconds=seconds, concurrency=2, seed=7))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def sign_in(tab: Page, origin_url: str, token: str) -> None:
    """Open the page and give it the token by keyboard alone: Tab to the field (after the
    skip link), type, Enter."""
    await tab.goto(origin_url + "/ops")
    await expect(tab.get_by_role("heading", name="perso operations")).to_be_visible()
    field = tab.get_by_label("Admin token")
    for _ in range(5):
        await tab.keyboard.press("Tab")
        if await field.evaluate("node => node === document.activeElement"):
            break
    await expect(field).to_be_focused()
    await tab.keyboard.type(token)
    await tab.keyboard.press("Enter")


async def updated(tab: Page) -> int:
    return int(await tab.locator("body").get_attribute("data-updated") or 0)


async def test_a_killed_edge_shows_unreachable_while_the_rest_updates(
    page: BrowserPage, ops_stack: RunningStack, extra_edge: subprocess.Popen[bytes]
) -> None:
    assert f"operations {ops_stack.origin_url}/ops" in ops_stack.log()  # perso up says where
    tab: Page = page.page  # type: ignore[assignment]
    extra_url = f"http://127.0.0.1:{extra_edge.args[-1]}"  # type: ignore[index]
    edges = [*ops_stack.endpoints["edges"].values(), extra_url]
    async with shoppers(ops_stack, 120):
        await sign_in(tab, ops_stack.origin_url, str(ops_stack.endpoints["admin_token"]))
        for url in edges:
            row = tab.locator(f'#edges tr[data-url="{url}"]')
            await expect(row).to_have_attribute("data-status", "up", timeout=15_000)
        for region in REGIONS:
            await expect(tab.locator(f'#regions tr[data-region="{region}"]')).to_be_visible()
        await expect(tab.locator('#regions tr[data-region="us-east"] td').nth(1)).to_have_text(
            "2 of 2"
        )
        # Rates need two scrapes, and traffic between them.
        first_edge = tab.locator(f'#edges tr[data-url="{edges[0]}"] td')
        await expect(first_edge.nth(3)).not_to_have_text(UNKNOWN, timeout=15_000)
        await expect(tab.locator("#status")).to_contain_text("All 4 processes up")

        extra_edge.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        dead = tab.locator(f'#edges tr[data-url="{extra_url}"]')
        await expect(dead).to_have_attribute(
            "data-status", "unreachable", timeout=UNREACHABLE_WITHIN_MS
        )
        took = time.monotonic() - killed
        print(f"killed edge shown unreachable after {took:.1f} s")
        await expect(dead).to_contain_text("UNREACHABLE")
        await expect(tab.locator("#status")).to_contain_text(f"1 unreachable: {EXTRA}")
        await expect(tab.locator('#regions tr[data-region="us-east"] td').nth(1)).to_have_text(
            "1 of 2"
        )
        # The rest keeps updating: new reports arrive, the live edges stay up with figures.
        before = await updated(tab)
        await expect(tab.locator("body")).not_to_have_attribute(
            "data-updated", str(before), timeout=6_000
        )
        assert await updated(tab) > before
        for url in edges[:-1]:
            live = tab.locator(f'#edges tr[data-url="{url}"]')
            await expect(live).to_have_attribute("data-status", "up")
            await expect(live.locator("td").nth(3)).not_to_have_text(UNKNOWN)
        await expect(tab.locator("#origins tr").nth(1)).to_have_attribute("data-status", "up")
        await expect(tab.locator("#curve polyline")).to_have_count(1, timeout=20_000)
        screenshot = os.environ.get("OPS_SCREENSHOT")
        if screenshot:
            # The workers' rate is over 15 s at least (ops_scrape.WORKER_INTERVAL_S).
            events = tab.locator("#workers tbody tr").first.locator("td").nth(3)
            await expect(events).not_to_have_text(UNKNOWN, timeout=30_000)
            await tab.screenshot(path=screenshot, full_page=True)
    page.assert_no_console_errors()


async def test_a_wrong_token_is_refused_and_asked_again(
    page: BrowserPage, ops_stack: RunningStack
) -> None:
    tab: Page = page.page  # type: ignore[assignment]
    await sign_in(tab, ops_stack.origin_url, "not-the-token")
    await expect(tab.locator("#status")).to_have_text(
        "The admin token was refused: enter it again."
    )
    await expect(tab.get_by_label("Admin token")).to_be_focused()
    assert await tab.locator("#edges tbody tr").count() == 0  # nothing shown without it
    assert await tab.evaluate("sessionStorage.length") == 0
    # The browser's own line for the expected 401, and nothing else.
    expected = "console: Failed to load resource: the server responded with a status of 401"
    assert [e.split(" (")[0] for e in page.console.errors] == [expected]
    page.console.errors.clear()


async def test_a_dead_origin_keeps_its_last_figures_and_says_so_until_it_is_back(
    page: BrowserPage, ops_stack: RunningStack
) -> None:
    """Last in the module: it kills the stack's origin (the supervisor starts it again)."""
    tab: Page = page.page  # type: ignore[assignment]
    await sign_in(tab, ops_stack.origin_url, str(ops_stack.endpoints["admin_token"]))
    for url in ops_stack.endpoints["edges"].values():
        row = tab.locator(f'#edges tr[data-url="{url}"]')
        await expect(row).to_have_attribute("data-status", "up", timeout=15_000)
    shown = await tab.locator("#edges tbody tr").count()
    port = urlparse(ops_stack.origin_url).port
    os.kill(child_pid(ops_stack.process.pid, "origin", "--port", str(port)), signal.SIGKILL)
    killed = time.monotonic()
    host = f"127.0.0.1:{port}"
    status = tab.locator("#status")
    await expect(status).to_contain_text(f"This origin ({host}) is unreachable", timeout=8_000)
    said = time.monotonic() - killed
    await expect(status).to_contain_text("The figures below are the last it gave.")
    assert await tab.locator("#edges tbody tr").count() == shown  # still on screen
    for url in ops_stack.endpoints["edges"].values():
        await expect(tab.locator(f'#edges tr[data-url="{url}"]')).to_have_attribute(
            "data-status", "up"
        )
    # Restarted on its port with the admin token it had: the page's next poll is answered.
    await expect(status).not_to_contain_text("This origin", timeout=60_000)
    print(f"dead origin said after {said:.1f} s, back after {time.monotonic() - killed:.1f} s")
    assert await tab.evaluate("sessionStorage.length") == 1  # never asked for the token again
    # The browser's own lines for the refused connections while it was down, nothing else.
    refused = "console: Failed to load resource: net::ERR_CONNECTION_REFUSED"
    assert page.console.errors, "the page never polled the dead origin"
    assert {e.split(" (")[0] for e in page.console.errors} == {refused}
    page.console.errors.clear()
