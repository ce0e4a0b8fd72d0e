"""The local model's side of ``benchmarks.llm_overhead``: the same two phases against a
stack started as ``perso up --llm local`` starts one (``perso.stack.Stack`` with
``llm="local"``: llama.cpp's server on the SmolLM2-135M GGUF, one thread, and the tier's
local settings), when ``make llm-deps`` installed its packages.

The model server's own time for a request is llama.cpp's: the growth of its prompt and
generation seconds in ``/metrics`` (``llamacpp:prompt_seconds_total``,
``llamacpp:tokens_predicted_seconds_total``) across the request, counted when it wrote
tokens. So the overhead here is everything but the model's compute: our tier and its two
loopback hops, and llama.cpp's own HTTP, tokenizing and grammar set-up (the direct call
measures that floor). Pre-computation is off: the model's one slot serves the requests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.explain_traffic import Target, fallback_phase, items_by_category, overhead_phase
from benchmarks.report import percentile
from config.settings import ConfigError, Settings
from origin.llm.client import TEMPERATURE
from origin.llm.context import segment_context
from origin.llm.model import ItemSummary, RecommendationSummary, UserSummary
from origin.llm.prompt import build
from perso.local_llm import LOCAL_MODEL, LocalLlmError, local_settings, preflight
from perso.stack import Stack

WARMUP_REQUESTS = 2
DIRECT_REQUESTS = 5
# llama.cpp's counters (its /metrics): tokens read and their seconds, tokens written and
# theirs.
PROMPT_TOKENS = "llamacpp:prompt_tokens_total"
PROMPT_SECONDS = "llamacpp:prompt_seconds_total"
WRITTEN_TOKENS = "llamacpp:tokens_predicted_total"
WRITTEN_SECONDS = "llamacpp:tokens_predicted_seconds_total"
COUNTERS = (PROMPT_TOKENS, PROMPT_SECONDS, WRITTEN_TOKENS, WRITTEN_SECONDS)


@dataclass(frozen=True)
class Call:
    """What llama.cpp did for one request: tokens read (beyond its prompt cache) and
    written, and the seconds of each."""

    read: float
    read_s: float
    written: float
    written_s: float


class LlamaClock:
    """llama.cpp's compute time between ``mark`` and ``spent_ms`` (a ``ModelClock``); each
    call's tokens and seconds kept in ``calls``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=10)
        self._at = dict.fromkeys(COUNTERS, 0.0)
        self.calls: list[Call] = []

    def _read(self) -> dict[str, float]:
        counters = dict.fromkeys(COUNTERS, 0.0)
        for family in text_string_to_metric_families(self._http.get("/metrics").text):
            for sample in family.samples:
                if sample.name in counters:
                    counters[sample.name] += sample.value
        return counters

    def mark(self) -> None:
        self._at = self._read()

    def spent_ms(self) -> float | None:
        now = self._read()
        delta = {name: now[name] - self._at[name] for name in COUNTERS}
        if delta[WRITTEN_TOKENS] <= 0:
            return None  # the model wrote nothing: not called, or abandoned before writing
        call = Call(
            delta[PROMPT_TOKENS],
            delta[PROMPT_SECONDS],
            delta[WRITTEN_TOKENS],
            delta[WRITTEN_SECONDS],
        )
        self.calls.append(call)
        return (call.read_s + call.written_s) * 1000

    def report(self) -> dict[str, float]:
        """Medians over the calls: tokens read and written, and their speeds."""
        calls = self.calls
        if not calls:
            return {}
        figures = {
            "read_tokens_p50": percentile([c.read for c in calls], 50),
            "written_tokens_p50": percentile([c.written for c in calls], 50),
            "read_tokens_per_s_p50": percentile([c.read / c.read_s for c in calls if c.read_s], 50),
            "written_tokens_per_s_p50": percentile(
                [c.written / c.written_s for c in calls if c.written_s], 50
            ),
        }
        print(
            f"llama.cpp, per call (median of {len(calls)}): read {figures['read_tokens_p50']:.0f} "
            f"tokens at {figures['read_tokens_per_s_p50']:.0f}/s, wrote "
            f"{figures['written_tokens_p50']:.0f} at {figures['written_tokens_per_s_p50']:.0f}/s"
        )
        return {k: round(v, 1) for k, v in figures.items()}

    def close(self) -> None:
        self._http.close()


def direct_body() -> dict[str, Any]:
    """A segment prompt of the tier's, as the tier sends it to llama.cpp (the grammar)."""
    item = ItemSummary(
        "it-1", "Aurora Headphones", "electronics", "Electronics", "Aurora", 99, 0.7, 0.2
    )
    user = UserSummary(segment="casual", interaction_count=2)
    rec = RecommendationSummary(source="content", confidence=0.6)
    prompt = build(segment_context(user, item, rec), item, "concise", constrained=True)
    return {
        "model": LOCAL_MODEL,
        "messages": [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ],
        "max_tokens": prompt.max_output_tokens,
        "temperature": TEMPERATURE,
        "grammar": prompt.grammar,
    }


async def figures(
    settings: Settings, *, requests: int, rate: float, seconds: float
) -> tuple[dict[str, Any] | None, str | None]:
    """Both phases against the local model; (None, why) without its packages."""
    try:
        preflight(settings)
    except (LocalLlmError, ConfigError) as exc:
        print(f"skipped: {exc}")
        return None, str(exc)
    token = settings.origin_token.get_secret_value() if settings.origin_token else ""
    stack = Stack(settings, free_ports=True, llm="local")
    async with stack as endpoints:
        server = stack.local_llm
        if server is None:
            raise RuntimeError("the stack started without its local model server")
        clock = LlamaClock(server.url)
        try:
            target = Target(
                endpoints.origin_url,
                token,
                items_by_category(settings),
                settings.catalog_size,
                np.random.default_rng(9),
            )
            overhead = overhead_phase(
                target,
                clock,
                requests=requests,
                warmup=WARMUP_REQUESTS,
                direct_body=direct_body(),
                direct_requests=DIRECT_REQUESTS,
            )
            speeds = clock.report()
            fallback = await fallback_phase(target, rate, seconds)
        finally:
            clock.close()
    local = local_settings(settings, server.base_url)
    return {
        **overhead,
        **fallback,
        "model": LOCAL_MODEL,
        "threads": settings.llm_local_threads,
        "deadline_ms": local.llm_timeout_ms,
        **speeds,
        # This machine is shared: how busy it was says how far these figures travel.
        "load_average_1m": round(os.getloadavg()[0], 2),
    }, None
