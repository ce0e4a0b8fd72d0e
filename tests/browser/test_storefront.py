"""The storefront (issue 21) in Debian's chromium against a real stack in real processes:
``perso up --demo`` (embedded Redis, the origin, a stream worker, one edge; 300 items), the
page served by that edge, the shoppers' tokens from its demo token route.

What the page shows is checked against what the edge answered (every personalize response
the browser received, read back from the browser itself), and every test ends with no
console error. ``STOREFRONT_SCREENSHOT=docs/img/storefront.png`` makes the first
test write the README's screenshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Error, Page, Request, Response, Route, expect

from protocol.identity import verify
from tests.browser.conftest import BrowserPage, chromium_path
from tests.credentials import IDENTITY_KEY
from tests.e2e.conftest import RunningStack, free_port_run, perso_env, start_stack
from tests.readiness import wait_ready

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

SETTLE_MS = 10_000  # an action's whole round (feedback, the pause, the next slate or two)
PREVIOUSLY_ENGAGED = "You showed interest in this recently"
PERSONAL_SOURCES = {"collaborative", "content"}


@pytest.fixture(scope="module")
def demo_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    if chromium_path() is None:
        pytest.skip("no chromium: see tests/browser/conftest.py")  # before starting a stack
    running = start_stack(
        tmp_path_factory.mktemp("storefront"),
        "--demo",
        ports=2,
        PERSO_REGIONS="us-east",
        PERSO_CATALOG_SIZE="300",
        PERSO_TEXT_ENCODER="hashing",
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
    )
    yield running
    running.stop()


@pytest.fixture
def edge_url(demo_stack: RunningStack) -> str:
    return demo_stack.edges["us-east"]


@dataclass
class Storefront:
    """One browser tab on the storefront, and what went between it and the edge."""

    tab: Page
    console: list[str]
    answers: list[Response] = field(default_factory=list)
    sent: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tab.on("request", self._request)
        self.tab.on("response", self._response)

    def _request(self, request: Request) -> None:
        if "/v1/" in request.url:
            self.sent.append(request)

    def _response(self, response: Response) -> None:
        if response.url.endswith("/v1/personalize") and response.status == 200:
            self.answers.append(response)

    async def open(self, base: str) -> None:
        await self.tab.goto(base + "/")
        await expect(self.tab.get_by_role("heading", name="perso storefront")).to_be_visible()

    async def type_shopper(self, shopper: str) -> None:
        """By keyboard alone: the id typed into its labelled field, Enter to switch."""
        field_ = self.tab.get_by_label("Or type a shopper id")
        await field_.focus()
        await self.tab.keyboard.type(shopper)
        await self.tab.keyboard.press("Enter")
        await self.settled()

    async def settled(self) -> None:
        await expect(self.tab.locator("#slate")).to_have_attribute(
            "aria-busy", "false", timeout=SETTLE_MS
        )

    async def shown(self) -> list[str]:
        return [
            str(await card.get_attribute("data-item-id"))
            for card in await self.tab.locator("#slate > li").all()
        ]

    async def reasons(self) -> dict[str, str]:
        """The explanation the page shows for each item."""
        out = {}
        for card in await self.tab.locator("#slate > li").all():
            out[str(await card.get_attribute("data-item-id"))] = str(
                await card.locator(".why").text_content()
            )
        return out

    async def own_text(self) -> str:
        """What the page says of its shopper and their slate (not the shopper list)."""
        parts = ["#signed-in", "#slate-for", "#status", "#slate"]
        return " ".join([str(await self.tab.locator(p).text_content()) for p in parts])

    async def act(self, position: int, label: str) -> tuple[str, float]:
        """``label`` ("View", "Add to cart", "Dismiss") on the item at ``position`` (0
        first); the item's id and the seconds until the next slate was shown."""
        card = self.tab.locator("#slate > li").nth(position)
        item = str(await card.get_attribute("data-item-id"))
        started = time.monotonic()
        await card.get_by_role("button", name=label).click()
        await self.settled()
        return item, time.monotonic() - started

    async def last(self) -> tuple[dict[str, Any], Response]:
        response = self.answers[-1]
        body: dict[str, Any] = await response.json()
        return body, response

    async def answered(self) -> list[dict[str, Any]]:
        return [await response.json() for response in self.answers]

    async def fact(self, name: str) -> str:
        return str(await self.tab.locator(f"#fact-{name}").text_content())

    async def status(self) -> str:
        return str(await self.tab.locator("#status").text_content())


def storefront(page: BrowserPage) -> Storefront:
    tab: Page = page.page  # type: ignore[assignment]
    return Storefront(tab, page.console.errors)


@asynccontextmanager
async def second_tab(page: BrowserPage) -> AsyncIterator[Storefront]:
    """Another shopper's browser: a context of its own (nothing shared with the first),
    watched for console errors as the first is."""
    tab: Page = page.page  # type: ignore[assignment]
    browser: Browser | None = tab.context.browser
    assert browser is not None
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    other = await context.new_page()
    errors: list[str] = []
    other.on(
        "console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None
    )
    other.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    try:
        yield Storefront(other, errors)
    finally:
        await context.close()
    assert errors == []


def shopper_of(request: Request) -> str:
    """The user of the token a request carried."""
    token = request.headers["authorization"].removeprefix("Bearer ")
    return verify(token, [IDENTITY_KEY.encode()], now_s=time.time()).user_id


async def test_a_shoppers_clicks_change_their_next_slate(page: BrowserPage, edge_url: str) -> None:
    shop = storefront(page)
    await shop.open(edge_url)
    await shop.type_shopper("ada")
    await expect(shop.tab.locator("#signed-in")).to_contain_text("Signed in as ada")
    first, response = await shop.last()
    assert first["user_id"] == "ada"
    assert await shop.shown() == [item["item_id"] for item in first["items"]]
    assert len(first["items"]) == 8
    # the page shows what the edge said about its answer
    assert await shop.fact("cache") == response.headers["x-cache"]
    assert await shop.fact("ranked") == first["metadata"]["ranked_by"] == "origin"
    assert await shop.fact("latency") == f"{first['metadata']['latency_ms']} ms"
    reasons = await shop.reasons()
    assert all(reasons[i["item_id"]] == i["explanation"]["primary_reason"] for i in first["items"])

    # Three views make ada an active shopper: from then on her slates are hers alone.
    timings = []
    for _ in range(3):
        before = await shop.shown()
        viewed, took = await shop.act(0, "View")
        timings.append(took)
    after, response = await shop.last()
    assert await shop.shown() == [item["item_id"] for item in after["items"]]
    assert await shop.shown() != before
    assert response.headers["x-cache"] == "MISS"  # a new key: her last interactions
    personal = [i for i in after["items"] if i["source"] in PERSONAL_SOURCES]
    assert personal, after["items"]
    assert await shop.fact("personal") == f"{len(personal)} of 8"
    status = await shop.status()
    assert status.startswith("Viewed “"), status
    assert "New recommendations" in status, status
    # the feedback named the answer it was about, and the item's position in it
    views = [r for r in shop.sent if r.url.endswith("/v1/feedback")]
    assert len(views) == 3
    sent = json.loads(views[-1].post_data or "{}")
    assert sent["feedback"][0]["item_id"] == viewed
    assert sent["feedback"][0]["position"] == 1

    # A dismissed item goes, and the next slate says so; by keyboard this time.
    before = await shop.shown()
    dismissed = before[1]
    button = shop.tab.locator("#slate > li").nth(1).get_by_role("button", name="Dismiss")
    await button.focus()
    await shop.tab.keyboard.press("Enter")
    await shop.settled()
    now = await shop.shown()
    assert dismissed not in now
    assert now != before
    asked = [r for r in shop.sent if r.url.endswith("/v1/personalize")][-1]
    assert dismissed in json.loads(asked.post_data or "{}")["constraints"]["exclude_items"]
    assert (await shop.status()).startswith("Dismissed “")
    print(f"click to next slate shown: {', '.join(f'{t:.2f}' for t in timings)} s")
    # the page waits 0.4 s, then asks; the loop itself is well under a second
    assert max(timings) < 3.0

    screenshot = os.environ.get("STOREFRONT_SCREENSHOT")
    if screenshot:
        await shop.tab.screenshot(path=screenshot, full_page=True)
    page.assert_no_console_errors()


async def test_two_shoppers_never_see_each_others_items(page: BrowserPage, edge_url: str) -> None:
    grace = storefront(page)
    viewed: dict[str, set[str]] = {"grace": set(), "linus": set()}
    async with second_tab(page) as linus:
        await grace.open(edge_url)
        await linus.open(edge_url)
        await grace.tab.get_by_role("button", name="Grace", exact=True).click()
        await linus.tab.get_by_role("button", name="Linus", exact=True).click()
        await grace.settled()
        await linus.settled()
        # Distinct histories: grace views from the top of her slate, linus from the bottom,
        # each only items the other has not viewed.
        for _ in range(4):
            mine = [n for n, i in enumerate(await grace.shown()) if i not in viewed["linus"]]
            viewed["grace"].add((await grace.act(mine[0], "View"))[0])
            mine = [n for n, i in enumerate(await linus.shown()) if i not in viewed["grace"]]
            viewed["linus"].add((await linus.act(mine[-1], "View"))[0])
        assert not viewed["grace"] & viewed["linus"]
        for shop, me, other in ((grace, "grace", "linus"), (linus, "linus", "grace")):
            answers = await shop.answered()
            # every answer the edge gave this tab was for its own shopper ...
            assert {a["user_id"] for a in answers} == {me}
            # ... asked with its own shopper's token, and so was all its feedback
            assert {shopper_of(r) for r in shop.sent if "/v1/demo/" not in r.url} == {me}
            request_ids = {a["request_id"] for a in answers}
            for feedback in (r for r in shop.sent if r.url.endswith("/v1/feedback")):
                assert json.loads(feedback.post_data or "{}")["request_id"] in request_ids
            # what the page shows is the last of those answers
            assert await shop.shown() == [i["item_id"] for i in answers[-1]["items"]]
            assert other not in (await shop.own_text()).lower()
            # an item said to be one they showed interest in is one they did engage with,
            # never one the other shopper did
            for answer in answers:
                for item in answer["items"]:
                    if item["explanation"]["primary_reason"] == PREVIOUSLY_ENGAGED:
                        assert item["item_id"] in viewed[me], (me, item)
            assert (await shop.fact("personal")) != "0 of 8"
    page.assert_no_console_errors()


async def test_switching_shopper_clears_the_slate_and_drops_a_late_answer(
    page: BrowserPage, edge_url: str
) -> None:
    shop = storefront(page)
    await shop.open(edge_url)
    await shop.type_shopper("margaret")
    first = await shop.shown()
    assert first

    held = asyncio.Event()

    async def slow_for_margaret(route: Route) -> None:
        body = json.loads(route.request.post_data or "{}")
        if body.get("user_id") == "margaret":
            held.set()
            await asyncio.sleep(1.5)  # her answer arrives after the switch
        # the page may have given up on it (aborted): then there is nothing to deliver
        with contextlib.suppress(Error):
            await route.continue_()

    await shop.tab.route("**/v1/personalize", slow_for_margaret)
    await shop.tab.get_by_role("button", name="Ask again", exact=True).click()
    await held.wait()
    await shop.tab.get_by_label("Or type a shopper id").fill("alan")
    await shop.tab.get_by_role("button", name="Switch shopper").click()
    # at once: the page is alan's
    await expect(shop.tab.locator("#slate-for")).to_have_text("alan")
    await expect(shop.tab.locator("#signed-in")).not_to_contain_text("margaret")
    await shop.settled()
    await asyncio.sleep(2.0)  # margaret's held answer has had time to come back
    answers = await shop.answered()
    alans = [a for a in answers if a["user_id"] == "alan"]
    assert alans
    assert await shop.shown() == [i["item_id"] for i in alans[-1]["items"]]
    assert "margaret" not in await shop.own_text()
    later = [r for r in shop.sent if r.url.endswith("/v1/personalize")][-1]
    assert shopper_of(later) == "alan"
    await shop.tab.unroute("**/v1/personalize")
    # tokens lived in the page's memory only: no cookie, nothing in the browser's storage
    kept = await shop.tab.context.storage_state()
    assert kept["cookies"] == []
    assert all(not origin.get("localStorage") for origin in kept["origins"])
    page.assert_no_console_errors()


@pytest.fixture
def edge_without_demo(demo_stack: RunningStack, tmp_path: Path) -> Iterator[str]:
    """One more edge process of the stack's region, as in production: demo mode off."""
    port = free_port_run(1)
    env = perso_env(
        tmp_path,
        PERSO_IDENTITY_KEYS=IDENTITY_KEY,
        PERSO_ORIGIN_URL=demo_stack.origin_url,
        PERSO_ORIGIN_TOKEN=str(demo_stack.endpoints["origin_token"]),
        PERSO_REGIONS="us-east",
        PERSO_LOG_LEVEL="warning",
    )
    log = (tmp_path / "edge.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "perso", "edge", "--region", "us-east", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, tmp_path / "edge.log")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        log.close()


async def test_with_demo_mode_off_the_page_says_so(
    page: BrowserPage, edge_without_demo: str
) -> None:
    shop = storefront(page)
    await shop.open(edge_without_demo)
    await shop.tab.get_by_role("button", name="Ada", exact=True).click()
    await shop.settled()
    await expect(shop.tab.locator("#status")).to_contain_text("Demo mode is off")
    await expect(shop.tab.locator("#signed-in")).to_contain_text("Demo mode is off")
    assert await shop.shown() == []
    # it asked for a token, got the 404 of an unknown path, and asked nothing else
    assert [r.url.removeprefix(edge_without_demo) for r in shop.sent] == ["/v1/demo/token"]
    # the browser itself logs a failed request: that 404 is the one expected, and all
    expected = "console: Failed to load resource: the server responded with a status of 404"
    assert [e.split(" (")[0] for e in page.console.errors] == [expected]
    page.console.errors.clear()
