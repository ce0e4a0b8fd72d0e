"""The traffic of ``benchmarks.llm_overhead``, whatever model server answers the origin: the
one-at-a-time explanations that measure the tier's overhead, and the open loop that
measures its fallback rate (see that module for what each means).

The model server's own time for a request comes from a ``ModelClock``: the fake server
lists its handlers' times in ``/stats``; llama.cpp counts its compute time in ``/metrics``.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.report import percentile
from config.settings import Settings
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.sample import generate

CLICKS = 4  # >= 3 interactions in a day: an active user, explained personally
STYLES = ("concise", "detailed", "conversational")
# The open-loop mix: the rest is /v1/personalize.
PERSONAL_SHARE = 0.08  # seed 000: the model is invoked for 7% of requests
SEGMENT_SHARE = 0.04
PER_USER = 4  # items each active user asks about


class ModelClock(Protocol):
    """The model server's own time for what the origin asked of it between ``mark`` and
    ``spent_ms``."""

    url: str

    def mark(self) -> None: ...

    def spent_ms(self) -> float | None:
        """None: the model was not called exactly once."""
        ...


class Connection:
    """One keep-alive connection, timed around each request."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self._headers = {"content-type": "application/json", **headers}

    def call(self, method: str, path: str, body: Any = None) -> tuple[float, dict[str, str], Any]:
        payload = None if body is None else json.dumps(body).encode()
        started = time.perf_counter()
        self._conn.request(method, path, body=payload, headers=self._headers)
        response = self._conn.getresponse()
        raw = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {raw[:300]!r}")
        return elapsed, dict(response.getheaders()), json.loads(raw)

    def text(self, path: str) -> str:
        self._conn.request("GET", path, headers=self._headers)
        response = self._conn.getresponse()
        return response.read().decode()

    def close(self) -> None:
        self._conn.close()


@dataclass
class Sample:
    client_ms: float
    origin_ms: float  # the origin's own latency_ms: inside its handler
    server_ms: float | None  # the model server's own time, when called exactly once
    llm: bool


@dataclass
class Target:
    """The running origin, its catalog (by category), and the draws."""

    origin_url: str
    token: str
    catalog: dict[str, list[str]]
    catalog_size: int
    rng: np.random.Generator


def items_by_category(settings: Settings) -> dict[str, list[str]]:
    """The sample catalog the origin serves, by category (the same generator and seed)."""
    catalog = generate(
        settings.catalog_size,
        settings.catalog_seed,
        settings.embedding_dim,
        ItemVectors.from_settings(settings),
    )
    out: dict[str, list[str]] = {}
    for item in catalog.items:
        out.setdefault(item.category, []).append(item.item_id)
    return out


@dataclass
class ActiveUser:
    user_id: str
    clicked: list[str]
    to_explain: list[str] = field(default_factory=list)


def active_users(
    prefix: str, n: int, per_user: int, catalog: dict[str, list[str]], rng: np.random.Generator
) -> list[ActiveUser]:
    """Users who clicked ``CLICKS`` items of one category, each with ``per_user`` other
    items of it to ask about."""
    categories = sorted(catalog)
    users = []
    for k in range(n):
        pool = catalog[categories[k % len(categories)]]
        picks = [str(p) for p in rng.choice(pool, CLICKS + per_user, replace=False)]
        users.append(ActiveUser(f"{prefix}-{k}", picks[:CLICKS], picks[CLICKS:]))
    return users


def post_clicks(origin: Connection, user: str, items: list[str]) -> None:
    feedback = [{"item_id": i, "action": "click", "duration_ms": 8000} for i in items]
    origin.call("POST", "/v1/feedback", {"user_id": user, "feedback": feedback})


def explain_body(user: str, item: str, style: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "item_id": item,
        "context": {"page_type": "item_detail", "explanation_style": style},
    }


def sequential(origin: Connection, clock: ModelClock, bodies: list[dict[str, Any]]) -> list[Sample]:
    samples = []
    for body in bodies:
        clock.mark()
        client_ms, _, answer = origin.call("POST", "/v1/explain", body)
        samples.append(
            Sample(
                client_ms,
                float(answer["latency_ms"]),
                clock.spent_ms(),
                bool(answer["explanation"]["llm_generated"]),
            )
        )
    return samples


def direct(clock: ModelClock, body: dict[str, Any], n: int) -> list[float]:
    """The model server called straight: client latency - its own time, the floor of any
    overhead over loopback HTTP."""
    model = Connection(clock.url, {})
    out = []
    try:
        for _ in range(n):
            clock.mark()
            client_ms, _, _ = model.call("POST", "/v1/chat/completions", body)
            spent = clock.spent_ms()
            if spent is not None:
                out.append(client_ms - spent)
    finally:
        model.close()
    return out


def summary(name: str, samples: list[float]) -> str:
    return (
        f"{name}: p50 {percentile(samples, 50):.2f} ms, p99 {percentile(samples, 99):.2f} ms "
        f"({len(samples)})"
    )


def ms(value: float) -> float:
    return round(value, 3)


def overhead_phase(
    target: Target,
    clock: ModelClock,
    *,
    requests: int,
    warmup: int,
    direct_body: dict[str, Any],
    direct_requests: int,
) -> dict[str, Any]:
    """One request at a time: the overhead over the model server's own time."""
    origin = Connection(target.origin_url, {"authorization": f"Bearer {target.token}"})
    try:
        warm = active_users("warm", -(-warmup // PER_USER), PER_USER, target.catalog, target.rng)
        users = active_users("seq", -(-requests // PER_USER), PER_USER, target.catalog, target.rng)
        for user in [*warm, *users]:
            post_clicks(origin, user.user_id, user.clicked)
        bodies = [
            explain_body(u.user_id, item, STYLES[n % len(STYLES)])
            for u in users
            for n, item in enumerate(u.to_explain)
        ][:requests]
        warm_bodies = [explain_body(u.user_id, i, "concise") for u in warm for i in u.to_explain]
        sequential(origin, clock, warm_bodies[:warmup])
        started = time.perf_counter()
        samples = sequential(origin, clock, bodies)
        took = time.perf_counter() - started
        direct_ms = direct(clock, direct_body, direct_requests)
    finally:
        origin.close()
    answered = [(s, s.server_ms) for s in samples if s.llm and s.server_ms is not None]
    overhead = [s.client_ms - server for s, server in answered]
    inside = [s.origin_ms - server for s, server in answered]
    server = [server for _, server in answered]
    explain = [s.client_ms for s in samples]
    templates = sum(not s.llm for s in samples)
    print(f"\n== one request at a time: {len(samples)} explanations in {took:.1f} s ==")
    print(
        f"answered by the model: {len(answered)}; templates: {templates}; "
        f"model called other than once: {sum(s.server_ms is None for s in samples)}"
    )
    print(summary("explain, client-observed", explain))
    print(summary("model server's own time", server))
    print(summary("overhead (client - model server)", overhead))
    print(summary("  of which inside the origin's handler", inside))
    print(summary("direct call to the model server, client - its own time", direct_ms))
    return {
        "overhead_p50_ms": ms(percentile(overhead, 50)),
        "overhead_p99_ms": ms(percentile(overhead, 99)),
        "explain_p50_ms": ms(percentile(explain, 50)),
        "explain_p99_ms": ms(percentile(explain, 99)),
        "server_p50_ms": ms(percentile(server, 50)),
        "server_p99_ms": ms(percentile(server, 99)),
        "origin_overhead_p50_ms": ms(percentile(inside, 50)),
        "origin_overhead_p99_ms": ms(percentile(inside, 99)),
        "direct_overhead_p50_ms": ms(percentile(direct_ms, 50)),
        "direct_overhead_p99_ms": ms(percentile(direct_ms, 99)),
        "model_answered": len(answered),
        "templates": templates,
        "requests": len(samples),
        # the samples themselves (as many as --requests), for the caller's plot
        "overhead_samples_ms": overhead,
        "direct_samples_ms": direct_ms,
    }


async def llm_counters(client: httpx.AsyncClient) -> dict[str, float]:
    """``perso_origin_llm_*`` counters of the origin's /metrics, labels summed."""
    text = (await client.get("/metrics")).raise_for_status().text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("perso_origin_llm_"):
            name = family.name.removeprefix("perso_origin_llm_")
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[name] = out.get(name, 0.0) + sample.value
    return out


@dataclass
class Load:
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    llm: Counter[str] = field(default_factory=Counter)
    errors: int = 0


@dataclass(frozen=True)
class Population:
    personal: list[ActiveUser]  # active users, each with items to ask about
    casual: list[str]  # one click each
    others: list[str]  # who asks for recommendations


def load_plan(
    population: Population, target: Target, rate: float, seconds: float
) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, path, body) of every request of the open loop, in order."""
    rng = target.rng
    plan = []
    queue = [(u.user_id, item) for u in population.personal for item in u.to_explain]
    queue = [queue[int(k)] for k in rng.permutation(len(queue))]
    for _ in range(int(rate * seconds)):
        style = str(rng.choice(STYLES))
        draw = rng.random()
        if draw < PERSONAL_SHARE and queue:
            user, item = queue.pop()
            plan.append(("personal", "/v1/explain", explain_body(user, item, style)))
        elif draw < PERSONAL_SHARE + SEGMENT_SHARE:
            user = str(rng.choice(population.casual))
            item = f"it-{int(rng.integers(0, target.catalog_size)):06d}"
            plan.append(("segment", "/v1/explain", explain_body(user, item, style)))
        else:
            body = {
                "user_id": str(rng.choice(population.others)),
                "context": {
                    "page_type": str(rng.choice(["home", "category", "item_detail", "search"])),
                    "device": str(rng.choice(["mobile", "desktop", "tablet"])),
                },
                "constraints": {"count": 20},
            }
            plan.append(("personalize", "/v1/personalize", body))
    return plan


async def open_loop(
    client: httpx.AsyncClient, plan: list[tuple[str, str, dict[str, Any]]], rate: float
) -> Load:
    """Each request sent at its time whatever the others are doing."""
    result = Load()

    async def one(kind: str, path: str, body: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            response = await client.post(path, json=body)
            response.raise_for_status()
        except httpx.HTTPError:
            result.errors += 1
            return
        result.latency_ms.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        if path == "/v1/explain" and response.json()["explanation"]["llm_generated"]:
            result.llm[kind] += 1

    tasks = []
    started = time.perf_counter()
    for n, (kind, path, body) in enumerate(plan):
        delay = started + n / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(kind, path, body)))
    await asyncio.gather(*tasks)
    return result


async def prepare(client: httpx.AsyncClient, target: Target, n: int) -> Population:
    """Active users for the personal explanations of ``n`` requests, casual users."""
    personal = active_users(
        "load", int(n * PERSONAL_SHARE * 1.5) // PER_USER + 1, PER_USER, target.catalog, target.rng
    )
    casual = [f"casual-{k}" for k in range(50)]
    for user in personal:
        feedback = [{"item_id": i, "action": "click"} for i in user.clicked]
        payload = {"user_id": user.user_id, "feedback": feedback}
        (await client.post("/v1/feedback", json=payload)).raise_for_status()
    for k, user_id in enumerate(casual):  # one click: a casual user
        payload = {"user_id": user_id, "feedback": [{"item_id": f"it-{k:06d}", "action": "click"}]}
        (await client.post("/v1/feedback", json=payload)).raise_for_status()
    others = [f"cold-{k}" for k in range(100)] + [u.user_id for u in personal] + casual
    return Population(personal, casual, others)


async def fallback_phase(target: Target, rate: float, seconds: float) -> dict[str, Any]:
    """The open loop at ``rate``: how often the model was wanted and a template served."""
    async with httpx.AsyncClient(
        base_url=target.origin_url,
        headers={"authorization": f"Bearer {target.token}"},
        timeout=60.0,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    ) as client:
        population = await prepare(client, target, int(rate * seconds))
        plan = load_plan(population, target, rate, seconds)
        before = await llm_counters(client)
        started = time.perf_counter()
        load = await open_loop(client, plan, rate)
        took = time.perf_counter() - started
        after = await llm_counters(client)
    wanted = after.get("wanted", 0.0) - before.get("wanted", 0.0)
    fallbacks = after.get("fallbacks", 0.0) - before.get("fallbacks", 0.0)
    answers = after.get("answers", 0.0) - before.get("answers", 0.0)
    fallback_rate = fallbacks / wanted if wanted else float("nan")
    kinds = Counter(kind for kind, _, _ in plan)
    print(f"\n== open loop: {len(plan)} requests at {rate:g}/s in {took:.1f} s ==")
    print(
        f"personalize {kinds['personalize']}, personal explanations {kinds['personal']} "
        f"({load.llm['personal']} by the model), segment explanations {kinds['segment']} "
        f"({load.llm['segment']} by the model or its cache); errors {load.errors}"
    )
    print(
        f"model wanted {wanted:.0f} times ({wanted / len(plan):.1%} of requests), "
        f"answered {answers:.0f}, fallbacks {fallbacks:.0f}: fallback rate {fallback_rate:.2%}"
    )
    for kind, latencies in sorted(load.latency_ms.items()):
        print(summary(f"{kind}, client-observed under load", latencies))
    personal = load.latency_ms.get("personal", [])
    return {
        "fallback_rate": round(fallback_rate, 4),
        "load_requests": len(plan),
        "load_rate_per_s": rate,
        "load_model_wanted": int(wanted),
        "load_fallbacks": int(fallbacks),
        "load_invocation_share": round(wanted / len(plan), 4),
        "load_explain_p50_ms": ms(percentile(personal, 50)),
        "load_explain_p99_ms": ms(percentile(personal, 99)),
        "load_errors": load.errors,
    }
