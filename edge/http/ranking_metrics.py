"""The ranking the edge does itself, in ``GET /metrics`` (``edge.http.metrics``): the users'
models it holds, their banks of runs, the shadow of its rankings, the catalog's vectors and the
users' own candidates ranked from them."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from edge.node import Edge


def user_model_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    table = edge.user_models
    if table is None:
        return
    for name, doc, value in (
        ("user_models", "Users' models the edge holds (pushed by the sync stream)", len(table)),
        (
            "user_models_bytes",
            "What the held users' models cost, by the table's estimate",
            table.bytes,
        ),
    ):
        gauge = GaugeMetricFamily(f"perso_edge_{name}", doc, labels=labels)
        gauge.add_metric(region, value)
        yield gauge
    evicted = CounterMetricFamily(
        "perso_edge_user_models_evicted",
        "Users' models dropped to stay within PERSO_EDGE_USER_MODELS_MB",
        labels=labels,
    )
    evicted.add_metric(region, table.evicted)
    yield evicted
    if edge.sync is not None:
        refused = CounterMetricFamily(
            "perso_edge_user_models_refused",
            "Users' models in sync messages that could not be read (damaged, other dimension)",
            labels=labels,
        )
        refused.add_metric(region, edge.sync.counters.models_refused)
        yield refused


def run_bank_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    banks = edge.run_banks
    if banks is None:
        return
    for name, doc, value in (
        ("run_banks", "Users' banks of runs the edge holds", len(banks)),
        ("run_banks_bytes", "What the banks of runs cost, by the table's estimate", banks.bytes),
    ):
        gauge = GaugeMetricFamily(f"perso_edge_{name}", doc, labels=labels)
        gauge.add_metric(region, value)
        yield gauge
    dropped = CounterMetricFamily(
        "perso_edge_run_banks_dropped",
        "Banks of runs dropped: used up, void (another state, pool entry or policy), or "
        "evicted to stay within PERSO_EDGE_RUN_BANKS_MB",
        labels=[*labels, "why"],
    )
    counters = banks.counters
    for why, count in (
        ("used_up", counters.used_up),
        ("void", counters.void),
        ("evicted", counters.evicted),
    ):
        dropped.add_metric([*region, why], count)
    yield dropped
    draws = edge.item_draws
    if draws is not None:
        item_draws = CounterMetricFamily(
            "perso_edge_bank_item_draws",
            "Banks of runs by their item draws: drawn for the bank, or shared with earlier "
            "banks over the same pool terms (edge.ranking.item_draws)",
            labels=[*labels, "draws"],
        )
        item_draws.add_metric([*region, "drawn"], draws.counters.drawn)
        item_draws.add_metric([*region, "shared"], draws.counters.shared)
        yield item_draws


def shadow_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """Shadow mode on the answers this edge ranks (``edge.ranking.shadow``); the comparison with
    the live policy is the origins' ``perso_origin_shadow_*``, over every shadow record."""
    shadow = edge.evaluation.shadow if edge.evaluation is not None else None
    if shadow is None:
        return
    counters = shadow.counters
    for name, doc, value in (
        ("sampled", "Edge-ranked decisions handed to the shadow policy", counters.sampled),
        ("logged", "Shadow decisions written to the shadow log", counters.logged),
        ("dropped", "Shadow samples dropped: the shadow's queue was full", counters.dropped),
        ("failed", "Shadow samples that could not be computed", counters.failed),
    ):
        family = CounterMetricFamily(f"perso_edge_shadow_{name}", doc, labels=[*labels, "policy"])
        family.add_metric([*region, shadow.policy.label], value)
        yield family


def own_candidate_metrics(edge: Edge, labels: list[str], region: list[str]) -> Iterator[Metric]:
    """The catalog's vectors the edge holds and the users' own candidates ranked from them
    (``edge.ranking.item_vectors``, ``edge.ranking.own_candidates``)."""
    own = edge.own_candidates
    if own is None:
        return
    vectors = own.vectors
    for name, doc, value in (
        ("item_vectors", "Catalog items whose vectors the edge holds", len(vectors)),
        ("item_vectors_bytes", "Bytes of the item vectors' lists", vectors.nbytes),
        ("item_vectors_version", "Catalog version of the vectors held (-1: none)", vectors.version),
        ("own_candidate_pools", "Pools with rows of users' own candidates held", len(own)),
    ):
        gauge = GaugeMetricFamily(f"perso_edge_{name}", doc, labels=labels)
        gauge.add_metric(region, value)
        yield gauge
    counts = vectors.counters
    loads = CounterMetricFamily(
        "perso_edge_item_vector_reads",
        "Reads of the catalog's vectors: whole loads, items changed, failed reads",
        labels=[*labels, "what"],
    )
    for what, value in (
        ("load", counts.loads),
        ("change", counts.changes),
        ("failure", counts.failures),
    ):
        loads.add_metric([*region, what], value)
    yield loads
    c = own.counters
    family = CounterMetricFamily(
        "perso_edge_own_candidates",
        "Users' own candidates: draws that ranked some, rows ranked, rows missing (asked "
        "for), calls for rows, failed calls, rows sent",
        labels=[*labels, "what"],
    )
    for what, value in (
        ("joined", c.joined),
        ("ranked", c.rows_ranked),
        ("missing", c.missing),
        ("fetch", c.fetches),
        ("fetch_failure", c.fetch_failures),
        ("fetched", c.rows_fetched),
    ):
        family.add_metric([*region, what], value)
    yield family
