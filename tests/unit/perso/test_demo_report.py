"""perso.demo_report: the report folder from a run's series (a seeded synthetic run)."""

from __future__ import annotations

import random
from html.parser import HTMLParser
from pathlib import Path

import pytest

from perso import demo_report
from perso.demo import DemoReport, RegionStats
from perso.demo_freshness import Scrape, parse
from perso.demo_series import Observation
from tests.unit.perso.test_demo_freshness import exposition

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REGIONS = ("us-east", "eu-west", "ap-south")


def synthetic_run(seconds: float, seed: int = 7) -> DemoReport:
    rng = random.Random(seed)
    report = DemoReport(
        seconds=seconds, concurrency=4, users=50, regions={r: RegionStats() for r in REGIONS}
    )
    for n in range(int(seconds * 40)):
        region = rng.choice(REGIONS)
        t_s = n / 40
        ok = rng.random() > 0.01
        hit = ok and rng.random() < min(0.9, t_s / seconds)
        client_ms, edge_ms = rng.uniform(2, 30), rng.uniform(0.1, 0.5) if hit else 20.0
        stats = report.regions[region]
        stats.requests += 1
        stats.errors += not ok
        stats.hits += hit
        stats.client_ms.append(client_ms)
        if ok:
            stats.edge_ms.append(edge_ms)
        report.observations.append(
            Observation(
                t_s,
                region,
                f"u{rng.randrange(50)}",
                ok,
                hit=hit,
                personalized=ok and rng.random() < t_s / seconds,
                engaged=ok and rng.random() < 0.4,
                client_ms=client_ms,
                edge_ms=edge_ms if ok else None,
            )
        )
    applied: dict[str, list[float]] = {r: [] for r in REGIONS}
    for step in range(int(seconds) + 1):
        for region in REGIONS:
            applied[region] += [rng.uniform(1, 40) for _ in range(step * 3)]
        text = "".join(exposition(r, applied[r]) for r in REGIONS)
        report.freshness.append(Scrape(float(step), parse(text)))
    return report


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.rows = 0
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs))
        elif tag == "tr":
            self.rows += 1
        elif tag in ("link", "script"):
            self.links.append(tag)


@pytest.mark.parametrize("seconds", [4.0, 90.0])
def test_the_report_folder_has_a_page_and_a_png_per_figure(tmp_path: Path, seconds: float) -> None:
    report = synthetic_run(seconds)
    index = demo_report.write(report, tmp_path / "report")
    assert index == tmp_path / "report" / "index.html"
    page = Page()
    page.feed(index.read_text(encoding="utf-8"))
    files = [image["src"] for image in page.images]
    assert files == ["hit_ratio.png", "latency.png", "personalised.png", "freshness.png",
                     "learning.png"]  # fmt: skip
    for image in page.images:
        assert len(image.get("alt") or "") > 20
        png = (tmp_path / "report" / str(image["src"])).read_bytes()
        assert png.startswith(PNG_SIGNATURE)
        assert len(png) > 10_000
    # a header row, one per region and one for all; nothing fetched from elsewhere
    assert page.rows == 1 + len(REGIONS) + 1
    assert page.links == []
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == sorted([*files, "index.html"])


def test_the_key_numbers_add_up_per_region_and_overall() -> None:
    report = synthetic_run(6.0)
    rows = demo_report.key_numbers(report)
    assert [row[0] for row in rows] == [*REGIONS, "all"]
    requests = [int(row[1].replace(",", "")) for row in rows]
    assert sum(requests[:-1]) == requests[-1] == len(report.observations)
    # freshness read from the edges' histograms: 1-40 ms observed, so between 1 and 50 ms
    for row in rows:
        assert 1.0 <= float(row[7]) <= float(row[8]) <= 50.0


def test_a_run_without_sync_changes_says_so_rather_than_failing(tmp_path: Path) -> None:
    report = synthetic_run(3.0)
    report.freshness.clear()
    index = demo_report.write(report, tmp_path)
    assert (tmp_path / "freshness.png").read_bytes().startswith(PNG_SIGNATURE)
    assert "<td>-</td>" in index.read_text(encoding="utf-8")
