"""``perso demo``'s report page, opened from disk in a real Chromium: every picture loads,
each says what it shows, and nothing goes wrong in the console."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perso import demo_report
from tests.browser.conftest import BrowserPage
from tests.unit.perso.test_demo_report import REGIONS, synthetic_run


async def test_the_report_page_shows_every_picture_from_its_folder(
    page: BrowserPage, tmp_path: Path
) -> None:
    index = demo_report.write(synthetic_run(20.0), tmp_path / "report")
    tab: Any = page.page
    await tab.goto(index.as_uri())
    images = await tab.eval_on_selector_all(
        "img",
        "imgs => imgs.map(i => ({src: i.getAttribute('src'), alt: i.alt, "
        "width: i.naturalWidth, caption: i.closest('figure').querySelector('figcaption')"
        ".textContent}))",
    )
    assert [i["src"] for i in images] == [
        "hit_ratio.png", "latency.png", "personalised.png", "freshness.png", "learning.png"
    ]  # fmt: skip
    for image in images:
        assert image["width"] > 500  # decoded: the file is there and whole
        assert image["alt"]
        assert len(image["caption"]) > 80
    assert await tab.get_attribute("html", "lang") == "en"
    rows = await tab.eval_on_selector_all(
        "tbody tr", "rows => rows.map(r => r.cells[0].textContent)"
    )
    assert rows == [*REGIONS, "all"]
    assert await tab.text_content("table caption")
    page.assert_no_console_errors()
