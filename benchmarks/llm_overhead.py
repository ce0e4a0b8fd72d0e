"""What the LLM tier adds on top of the model server's own time, on ``POST /v1/explain``, and
how often it falls back to a template at seed 000's invocation rate.

Set-up, all on loopback and stopped at the end: an embedded Redis, a 2,000-item sample
catalog (feature-hashing title vectors, so that set-up takes seconds), the origin as its own
process (``perso.stack.Stack``, one idle edge), and the project's fake OpenAI-compatible model
server (``python -m tests.llm_server``) answering every completion after a uniform 80-150 ms
(seed 000: "LLM inference alone takes 80-150ms"). The origin gets seed 000's 200 ms model
deadline and a rate limit far above what is sent, so the limiter is not what is measured.

**Overhead**, one request at a time on a keep-alive connection (standard-library client:
its own cost is a fraction of a millisecond): active users (4 clicks in one category, so
their explanations are personal) ask about items of that category they have not clicked.
Such a request always wants the model (explicitly requested; not a trending item; its prompt
holds the user's activity and the item, so no cache can answer it). After each request the
model server's ``/stats`` says whether it was called and how long its handler took
(``x-server-time-ms``); overhead = client-observed latency - that time, for requests the
model answered (``llm_generated``) with exactly one call. It includes both loopback HTTP hops
(client to origin, origin to model server and the model server's own HTTP stack), the
user read, context, prompt, the prompt cache lookup and write, and rendering. The same
client calling the model server directly gives the floor of that figure (``direct_*``).

**Fallback rate**, open loop at a steady rate (default 100 requests/s for 20 s): 88%
``/v1/personalize`` (no explanations asked), 8% personal explanations as above (the model
wanted: seed 000 invokes it for 7% of requests), 4% explanations for casual users (segment
explanations, answered by the response cache after the first of each kind). fallback_rate =
templates served where the model was wanted / explanations where it was wanted, from the
difference of the origin's ``/metrics`` (``perso_origin_llm_fallbacks``,
``perso_origin_llm_wanted``) before and after.

Run: ``.venv/bin/python -m benchmarks.llm_overhead [--requests 400] [--rate 100] [--seconds 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from benchmarks.report import finish, machine, percentile
from config.settings import Settings
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.sample import generate
from perso.process import free_port
from perso.stack import Stack

CATALOG_SIZE = 2_000
DELAY_MS = (80.0, 150.0)  # seed 000: "LLM inference alone takes 80-150ms"
LLM_TIMEOUT_MS = 200  # seed 000: the LLM path's budget
LLM_RATE_PER_S = 1_000.0  # far above the load: our own limiter is not what is measured
CLICKS = 4  # >= 3 interactions in a day: an active user, explained personally
STYLES = ("concise", "detailed", "conversational")
WARMUP_REQUESTS = 20
DIRECT_REQUESTS = 100
# The open-loop mix: the rest is /v1/personalize.
PERSONAL_SHARE = 0.08  # seed 000: the model is invoked for 7% of requests
SEGMENT_SHARE = 0.04
OVERHEAD_P99_TARGET_MS = 5.0
FALLBACK_RATE_TARGET = 0.05
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 20.0


class ModelServer:
    """``python -m tests.llm_server`` (the project's stand-in for vLLM) on a free port."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.llm_server", "--port", str(self.port)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}/health", timeout=0.5).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the fake model server did not start; see {log_path}")

    def control(self, **config: Any) -> None:
        httpx.post(f"{self.url}/control", json=config, timeout=5).raise_for_status()

    def requests(self) -> int:
        stats: dict[str, Any] = httpx.get(f"{self.url}/stats", timeout=5).json()
        return int(stats["requests"])

    async def quiet(self, for_s: float = 1.0, timeout_s: float = 60.0) -> int:
        """Wait until nobody has called the server for ``for_s`` (the origin's pre-computed
        explanations are written at start-up); returns the calls so far."""
        deadline = time.monotonic() + timeout_s
        count, since = self.requests(), time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            now = self.requests()
            if now != count:
                count, since = now, time.monotonic()
            elif time.monotonic() - since >= for_s:
                return count
        raise RuntimeError(f"the model server was still being called after {timeout_s:g} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Connection:
    """One keep-alive connection, timed around each request."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=10)
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

    def close(self) -> None:
        self._conn.close()


@dataclass
class Sample:
    client_ms: float
    origin_ms: float  # the origin's own latency_ms: inside its handler
    server_ms: float | None  # the model server's own time, when called exactly once
    llm: bool


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


def sequential(origin: Connection, model: Connection, bodies: list[dict[str, Any]]) -> list[Sample]:
    seen = len(model.call("GET", "/stats")[2]["server_ms"])
    samples = []
    for body in bodies:
        client_ms, _, answer = origin.call("POST", "/v1/explain", body)
        times = model.call("GET", "/stats")[2]["server_ms"]
        called, seen = times[seen:], len(times)
        samples.append(
            Sample(
                client_ms,
                float(answer["latency_ms"]),
                float(called[0]) if len(called) == 1 else None,
                bool(answer["explanation"]["llm_generated"]),
            )
        )
    return samples


def direct(model: Connection, n: int) -> list[float]:
    """The model server called straight: client latency - its own time, the floor of any
    overhead over loopback HTTP."""
    prompt = "Explain why this item suits the user. Item: " + '"Acme Solid Kettle 412"' * 40
    body = {
        "model": "llama-3.1-8b-instruct",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 200,
    }
    out = []
    for _ in range(n):
        client_ms, headers, _ = model.call("POST", "/v1/chat/completions", body)
        out.append(client_ms - float(headers["x-server-time-ms"]))
    return out


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
class Bench:
    """What both phases use: the running origin and model server, the catalog."""

    origin_url: str
    token: str
    model_server: ModelServer
    catalog: dict[str, list[str]]
    rng: np.random.Generator


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
    population: Population, rate: float, seconds: float, rng: np.random.Generator
) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, path, body) of every request of the open loop, in order."""
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
            item = f"it-{int(rng.integers(0, CATALOG_SIZE)):06d}"
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


def summary(name: str, samples: list[float]) -> str:
    return (
        f"{name}: p50 {percentile(samples, 50):.2f} ms, p99 {percentile(samples, 99):.2f} ms "
        f"({len(samples)})"
    )


def ms(value: float) -> float:
    return round(value, 3)


async def overhead_phase(bench: Bench, requests: int) -> dict[str, Any]:
    """One request at a time: the overhead over the model server's own time."""
    warmed = await bench.model_server.quiet()
    print(f"model server idle after {warmed} calls from the origin's pre-computation")
    origin = Connection(bench.origin_url, {"authorization": f"Bearer {bench.token}"})
    model = Connection(bench.model_server.url, {})
    per_user = 4
    try:
        warm = active_users("warm", WARMUP_REQUESTS // per_user, per_user, bench.catalog, bench.rng)
        users = active_users("seq", -(-requests // per_user), per_user, bench.catalog, bench.rng)
        for user in [*warm, *users]:
            post_clicks(origin, user.user_id, user.clicked)
        bodies = [
            explain_body(u.user_id, item, STYLES[n % len(STYLES)])
            for u in users
            for n, item in enumerate(u.to_explain)
        ][:requests]
        sequential(
            origin,
            model,
            [explain_body(u.user_id, i, "concise") for u in warm for i in u.to_explain],
        )
        started = time.perf_counter()
        samples = sequential(origin, model, bodies)
        took = time.perf_counter() - started
        direct_ms = direct(model, DIRECT_REQUESTS)
    finally:
        origin.close()
        model.close()
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
    }


async def prepare(client: httpx.AsyncClient, bench: Bench, n: int) -> Population:
    """Active users for the personal explanations of ``n`` requests, casual users."""
    personal = active_users(
        "load", int(n * PERSONAL_SHARE * 1.5) // 4 + 1, 4, bench.catalog, bench.rng
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


async def fallback_phase(bench: Bench, rate: float, seconds: float) -> dict[str, Any]:
    """The open loop at ``rate``: how often the model was wanted and a template served."""
    async with httpx.AsyncClient(
        base_url=bench.origin_url,
        headers={"authorization": f"Bearer {bench.token}"},
        timeout=10.0,
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    ) as client:
        population = await prepare(client, bench, int(rate * seconds))
        plan = load_plan(population, rate, seconds, bench.rng)
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


async def run(requests: int, rate: float, seconds: float) -> None:
    print(f"machine: {machine()}")
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="perso-llm-bench-") as tmp:
        root = Path(tmp)
        model_server = ModelServer(root / "model-server.log")
        try:
            model_server.control(mode="good", delay_ms=list(DELAY_MS), reset_stats=True)
            settings = Settings(
                data_dir=root,
                catalog_size=CATALOG_SIZE,
                text_encoder="hashing",
                workers=0,
                regions=("bench",),
                origin_token=SecretStr(token),
                log_level="warning",
                llm_base_url=f"{model_server.url}/v1",
                llm_timeout_ms=LLM_TIMEOUT_MS,
                llm_rate_per_s=LLM_RATE_PER_S,
            )
            catalog = items_by_category(settings)
            async with Stack(settings, free_ports=True) as endpoints:
                bench = Bench(
                    endpoints.origin_url, token, model_server, catalog, np.random.default_rng(8)
                )
                overhead = await overhead_phase(bench, requests)
                fallback = await fallback_phase(bench, rate, seconds)
        finally:
            model_server.stop()
    figures = {"overhead_p50_ms": overhead.pop("overhead_p50_ms")}
    figures["overhead_p99_ms"] = overhead.pop("overhead_p99_ms")
    figures["fallback_rate"] = fallback.pop("fallback_rate")
    finish(
        {
            **figures,
            **overhead,
            **fallback,
            "overhead_p99_target_ms": OVERHEAD_P99_TARGET_MS,
            "fallback_rate_target": FALLBACK_RATE_TARGET,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="sequential explanations")
    parser.add_argument("--rate", type=float, default=100.0, help="open-loop requests/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="open-loop duration")
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.rate, args.seconds))


if __name__ == "__main__":
    main()
