"""``perso demo``'s report folder: ``index.html`` and one PNG per figure.

Drawn from the run's time series (``perso.demo_series``, ``perso.demo_freshness``): hit
ratio, latency and the share of personalised answers over time per region, freshness (the
edges' publish-to-applied time), and the learning curve. The page has no external asset:
the images are beside it, referred to by relative path.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perso import plots
from perso.demo import DemoReport, ratio
from perso.demo_freshness import Histogram, difference, per_interval, quantile, total
from perso.demo_series import ALL, Bucket, bucket_width, bucketed, percentile, reach
from perso.plots import Axes


@dataclass(frozen=True, slots=True)
class Figure:
    file: str
    title: str
    alt: str
    explanation: str


@dataclass(frozen=True, slots=True)
class _Run:
    report: DemoReport
    out: Path
    width: float
    series: dict[str, list[Bucket]]

    @property
    def time_label(self) -> str:
        return f"seconds since the traffic started ({self.width:.0f} s buckets)"


def _xs(buckets: Sequence[Bucket], width: float) -> list[float]:
    return [b.start_s + width / 2 for b in buckets]


def _colour(regions: Sequence[str], name: str) -> str:
    """A region's colour, the same in every figure; black for all regions together."""
    return "black" if name not in regions else f"C{list(regions).index(name)}"


def _series(ax: Axes, run: _Run, value: str, scale: float = 1.0) -> None:
    """``value`` of each bucket over time, a line per region and a dashed one for all."""
    for name, buckets in run.series.items():
        ys = [getattr(b, value) for b in buckets]
        ax.plot(
            _xs(buckets, run.width),
            [math.nan if y is None else y * scale for y in ys],
            label=name,
            marker="." if len(buckets) < 30 else None,
            linestyle="--" if name == ALL else "-",
            color=_colour(list(run.report.regions), name),
        )


def _bucket_bars(ax: Axes, histograms: dict[str, Histogram], regions: Sequence[str]) -> None:
    """Each region's share of changes per bucket, side by side, up to the last bucket any
    change fell in."""
    bounds = [bound for bound, _ in next(iter(histograms.values()))]
    shares = {
        region: [
            100 * (count - before) / total(h)
            for (_, count), before in zip(h, [0.0] + [c for _, c in h[:-1]], strict=True)
        ]
        for region, h in histograms.items()
    }
    last = max(i for values in shares.values() for i, v in enumerate(values) if v > 0)
    labels, low = [], 0.0
    for bound in bounds[: last + 1]:
        labels.append(
            f"> {low * 1000:g}" if math.isinf(bound) else f"{low * 1000:g}-{bound * 1000:g}"
        )
        low = bound
    width = 0.8 / len(histograms)
    for k, (region, values) in enumerate(shares.items()):
        ax.bar(
            [i + (k - (len(histograms) - 1) / 2) * width for i in range(last + 1)],
            values[: last + 1],
            width,
            label=f"{region} ({total(histograms[region]):,.0f})",
            color=_colour(regions, region),
        )
    ax.set_xticks(range(last + 1), labels, rotation=30)


def _run_histogram(report: DemoReport, region: str) -> Histogram:
    scrapes = [s for s in report.freshness if region in s.by_region]
    if not scrapes:
        return []
    first = scrapes[0].by_region[region] if len(scrapes) > 1 else None
    return difference(scrapes[-1].by_region[region], first)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def draw(report: DemoReport, out: Path) -> list[Figure]:
    """Write the PNGs into ``out``; their descriptions, in the page's order."""
    width = bucket_width(report.seconds)
    series = bucketed(report.observations, width, report.seconds)
    # The regions in the report's order, so that each keeps its colour in every figure.
    ordered = {r: series[r] for r in [*report.regions, ALL] if r in series}
    run = _Run(report, out, width, ordered)
    return [_hit_ratio(run), _latency(run), _personalised(run), _freshness(run), _learning(run)]


def _hit_ratio(run: _Run) -> Figure:
    out, time_label = run.out, run.time_label
    with plots.figure(out / "hit_ratio.png", "Edge cache hit ratio over time, per region") as [ax]:
        _series(ax, run, "hit_ratio", 100)
        plots.labelled(ax, "", time_label, "hit ratio (% of answers)")
        ax.set_ylim(0, 100)
    return Figure(
        "hit_ratio.png",
        "Hit ratio",
        "Line chart of the share of answers each region's edge served from its cache, "
        "per time bucket.",
        "The share of answered requests each region's edge served from its own cache "
        "(metadata.cache_hit). It starts at zero (empty caches) and climbs as each "
        "shopper's answer is cached; a cached answer is dropped when the shopper acts.",
    )


def _latency(run: _Run) -> Figure:
    out, time_label = run.out, run.time_label
    with plots.figure(
        out / "latency.png", "Latency over time, per region (ms)", panels=2, rows=2, width=9.5
    ) as axes:
        for ax, value, title in zip(
            axes,
            ("client_p50_ms", "client_p99_ms", "edge_p50_ms", "edge_p99_ms"),
            (
                "client p50 (the browser's view)",
                "client p99 (the browser's view)",
                "edge-reported p50 (metadata.latency_ms)",
                "edge-reported p99 (metadata.latency_ms)",
            ),
            strict=True,
        ):
            _series(ax, run, value)
            plots.labelled(ax, title, time_label, "ms")
            ax.set_ylim(bottom=0)
    return Figure(
        "latency.png",
        "Latency",
        "Four line charts, per region over time in milliseconds: client-side p50 and p99 "
        "latency (top), edge-reported p50 and p99 latency (bottom).",
        "Top: the time a simulated browser waited for its feed, measured on this machine "
        "(so including the load of the demo itself, which shares the cores with the "
        "stack). Bottom: the time the edge itself reports (metadata.latency_ms): cache hits "
        "take well under a millisecond, misses wait for the origin's ranking.",
    )


def _personalised(run: _Run) -> Figure:
    out, time_label = run.out, run.time_label
    with plots.figure(
        out / "personalised.png", "Share of personalised answers over time, per region"
    ) as [ax]:
        _series(ax, run, "personalized", 100)
        plots.labelled(ax, "", time_label, "personalised answers (%)")
        ax.set_ylim(0, 100)
    return Figure(
        "personalised.png",
        "Personalised answers",
        "Line chart of the percentage of answers containing items ranked from the "
        "shopper's own model or session, per region over time.",
        "An answer counts as personalised when at least one of its items comes from the "
        "shopper's own model or session (source collaborative or content) rather than "
        "from what is popular or trending. It grows as the workers learn each shopper.",
    )


def _freshness(run: _Run) -> Figure:
    out, time_label = run.out, run.time_label
    report, regions = run.report, list(run.report.regions)
    with plots.figure(
        out / "freshness.png",
        "Freshness: origin publish to edge applied (ms)",
        panels=2,
        width=9.5,
    ) as (dist, over_time):
        histograms = {r: _run_histogram(report, r) for r in regions}
        shown = {r: h for r, h in histograms.items() if total(h) > 0}
        if shown:
            _bucket_bars(dist, shown, regions)
        else:
            plots.no_data(dist, "no sync change was applied during the run")
        for region in shown:
            points = per_interval(report.freshness, region, 0.99)[1:]
            over_time.plot(
                [t for t, _ in points],
                [math.nan if v is None else v * 1000 for _, v in points],
                marker=".",
                label=region,
                color=_colour(regions, region),
            )
        over_time.set_ylim(bottom=0)
        plots.labelled(
            dist, "share of the run's changes per bucket", "applied within (ms)", "share (%)"
        )
        plots.labelled(over_time, "p99 per interval between scrapes", time_label, "ms")
    return Figure(
        "freshness.png",
        "Freshness",
        "Left: bar chart of the share of origin changes each region's edge applied within "
        "each histogram bucket (milliseconds). Right: the 99th percentile per interval "
        "over time.",
        "What a shop cares about is how soon a shopper's action shows in their feed at "
        "every region. Its last leg is measured here: from the origin publishing a change "
        "(a shopper's new model, an invalidation) to each edge applying it, as the edges "
        "count it (perso_edge_sync_publish_to_applied_seconds, scraped from their "
        "/metrics). Coarse: the histogram's buckets are 1, 2, 5, 10, 20, 50 ms and up. "
        "The worker's leg (feedback to new model) is not in it.",
    )


def _learning(run: _Run) -> Figure:
    out, width, series, time_label = run.out, run.width, run.series, run.time_label
    report = run.report
    shoppers = reach(report.observations, width, report.seconds)
    with plots.figure(
        out / "learning.png", "Learning curve of the simulated shoppers", panels=2, width=9.5
    ) as (reached, engaged):
        buckets = series.get(ALL, [])
        # Counted by each bucket's end.
        ends = [b.start_s + width for b in buckets]
        reached.plot(ends, shoppers, color="black", marker=".")
        plots.labelled(
            reached, "shoppers served from their own model", time_label, "shoppers (cumulative)"
        )
        _series(engaged, run, "engagement")
        plots.labelled(engaged, "engagements per slate", time_label, "feedback sent per slate")
        engaged.set_ylim(bottom=0)
    return Figure(
        "learning.png",
        "Learning curve",
        "Left: cumulative number of shoppers who received a personalised answer. Right: "
        "engagements (clicks, views, carts, purchases) per slate, per region over time.",
        "Left: how many distinct shoppers the system has learnt enough about to answer "
        "from their own model, by each moment of the run. Right: engagements per slate. "
        "The demo's shoppers act at random (loadtests.traffic: a chance per activity "
        "level, position-biased), so this line stays flat by construction; the learning "
        "benchmark (docs/measured.md) is where clicks follow hidden tastes and rise.",
    )


def key_numbers(report: DemoReport) -> list[list[str]]:
    """One row per region and one for all: the page's table."""
    rows = []
    for name, stats in [*report.regions.items(), (ALL, report.total())]:
        histogram = _run_histogram(report, name)
        if name == ALL:
            merged = [_run_histogram(report, r) for r in report.regions]
            histogram = _sum(merged)
        rows.append(
            [
                name,
                f"{stats.requests:,}",
                f"{100 * ratio(stats.hits, stats.requests):.1f}%",
                f"{percentile(stats.client_ms, 50) or 0:.2f}",
                f"{percentile(stats.client_ms, 99) or 0:.2f}",
                f"{percentile(stats.edge_ms, 50) or 0:.3f}",
                f"{100 * ratio(stats.personalized, stats.requests):.1f}%",
                _ms(quantile(histogram, 0.5)),
                _ms(quantile(histogram, 0.99)),
                f"{stats.errors:,}",
            ]
        )
    return rows


def _sum(histograms: list[Histogram]) -> Histogram:
    present = [h for h in histograms if h]
    if not present:
        return []
    counts: dict[float, float] = {}
    for h in present:
        for bound, count in h:
            counts[bound] = counts.get(bound, 0.0) + count
    return sorted(counts.items())


HEADERS = (
    "region",
    "requests",
    "hit ratio",
    "p50 ms",
    "p99 ms",
    "edge p50 ms",
    "personalised",
    "freshness p50 ms",
    "freshness p99 ms",
    "errors",
)
CSS = """
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1a1a1a;background:#fff;line-height:1.5}
table{border-collapse:collapse;margin:1rem 0}th,td{border:1px solid #888;padding:.25rem .6rem}
td{text-align:right}td:first-child,th{text-align:left}th{background:#eee}
figure{margin:2rem 0}img{max-width:100%;height:auto;border:1px solid #ccc}
figcaption{color:#333;margin-top:.4rem}
"""


def page(report: DemoReport, figures: Sequence[Figure]) -> str:
    e = html.escape
    head = "".join(f'<th scope="col">{e(h)}</th>' for h in HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>"
        for row in key_numbers(report)
    )
    sections = "".join(
        f'<figure><img src="{e(f.file)}" alt="{e(f.alt)}">'
        f"<figcaption><strong>{e(f.title)}.</strong> {e(f.explanation)}</figcaption></figure>"
        for f in figures
    )
    total_requests = report.total().requests
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>perso demo report</title><style>{CSS}</style></head><body><main>"
        "<h1>perso demo report</h1>"
        f"<p>{report.seconds:.0f} s of traffic, {report.concurrency} concurrent browsers, "
        f"{report.users:,} simulated shoppers, {len(report.regions)} regions, "
        f"{total_requests:,} requests. Feedback: {report.feedback_accepted:,} accepted; "
        f"user models: {report.users_with_model:,} shoppers have one.</p>"
        f"<table><caption>Key numbers (p50/p99: seen by the client on this machine; "
        f"freshness: origin publish to edge applied)</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{sections}</main></body></html>\n"
    )


def write(report: DemoReport, out: Path) -> Path:
    """The report folder at ``out`` (created); the path of its ``index.html``."""
    out.mkdir(parents=True, exist_ok=True)
    figures = draw(report, out)
    index = out / "index.html"
    partial = out / ".index.html.partial"
    partial.write_text(page(report, figures), encoding="utf-8")
    partial.replace(index)
    return index
