"""Prometheus families of the LLM tier: what the counters of the tier, its caches and its
gateway hold, read at scrape time (the request path only increments integers).

The seed's figures follow from them: invocation rate = llm answers / explanations, cache
hit rate = hits / (hits + misses) per cache, fallback rate = fallbacks / wanted (the model
was wanted: it answered, or it was skipped for budget or rate, or it failed).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from origin.llm.tier import LlmTier

PREFIX = "perso_origin_llm"


def llm_metrics(tier: LlmTier) -> Iterator[Metric]:
    c = tier.counters
    for name, doc, value in (
        ("explanations", "Explanations asked of the tier", c.explanations),
        ("answers", "Explanations the model wrote (or one of its caches had)", c.llm_answers),
        ("wanted", "Explanations for which the model was wanted", c.wanted),
        ("speculated", "Personalize requests that started the tier speculatively", c.speculated),
        (
            "speculation_used",
            "Speculations whose item came out on top and got the model's headline",
            c.speculation_used,
        ),
        (
            "speculation_missed",
            "Speculations cancelled: the ranking put another item on top",
            c.speculation_missed,
        ),
        ("precomputed", "Segment explanations written ahead of time", c.precomputed),
    ):
        family = CounterMetricFamily(f"{PREFIX}_{name}", doc)
        family.add_metric([], value)
        yield family
    decisions = CounterMetricFamily(
        f"{PREFIX}_decisions", "Trigger evaluations by deciding rule", labels=["reason"]
    )
    for reason, count in sorted(c.decisions.items()):
        decisions.add_metric([reason], count)
    yield decisions
    fallbacks = CounterMetricFamily(
        f"{PREFIX}_fallbacks", "Templates served where the model was wanted", labels=["reason"]
    )
    for reason, count in sorted(c.fallbacks.items()):
        fallbacks.add_metric([reason], count)
    yield fallbacks
    cache = CounterMetricFamily(
        f"{PREFIX}_cache_lookups", "Cache lookups by cache and result", labels=["cache", "result"]
    )
    for name, store in (("prompt", tier.prompts), ("response", tier.responses)):
        cache.add_metric([name, "hit"], store.hits)
        cache.add_metric([name, "miss"], store.misses)
    yield cache
    enabled = GaugeMetricFamily(f"{PREFIX}_enabled", "1 when a model server is configured")
    enabled.add_metric([], 1.0 if tier.enabled else 0.0)
    yield enabled
    gateway = tier.gateway
    if gateway is None:
        return
    g = gateway.counters
    calls = CounterMetricFamily(
        f"{PREFIX}_calls", "Gateway calls by how they ended", labels=["outcome"]
    )
    for outcome, count in sorted(g.calls.items()):
        calls.add_metric([outcome], count)
    yield calls
    figures: tuple[tuple[str, str, float], ...] = (
        ("requests", "HTTP requests sent to model servers", g.requests),
        ("retries", "Second requests after an answer that did not parse", g.retries),
        ("failovers", "Requests sent to the other model than the one asked for", g.failovers),
        ("input_tokens", "Prompt tokens sent", g.input_tokens),
        ("output_tokens", "Completion tokens received", g.output_tokens),
        ("cost_usd", "Spent by this process, in US dollars", g.cost_usd),
    )
    for name, doc, figure in figures:
        family = CounterMetricFamily(f"{PREFIX}_{name}", doc)
        family.add_metric([], figure)
        yield family
