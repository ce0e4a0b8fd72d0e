"""``perso up --edges-per-region 2``: one region's two edge processes are one PoP, sharing
a store in the stack's Redis: what one fills the other serves, one user's rate limit is
the tier's over both, and a cold key asked of both at once costs the origin one fill."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from perso.user_tokens import UserTokens
from tests.e2e.conftest import RunningStack, start_stack

pytestmark = pytest.mark.e2e

REGION = "us-east"
FREE_SECRET = "free-shop-secret-0123456789"
LEAN = {
    "PERSO_REGIONS": REGION,
    "PERSO_WORKERS": "0",
    "PERSO_TEXT_ENCODER": "hashing",
    "PERSO_API_KEYS": f"free-shop:free:{FREE_SECRET}",
    # The PoP's shared cache path: the origin ranks, the processes share what it ranked.
    "PERSO_EDGE_RANKING": "false",
}


@pytest.fixture(scope="module")
def pop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("pop"), "--edges-per-region", "2", **LEAN)
    yield running
    running.stop()


def urls(stack: RunningStack) -> list[str]:
    found: list[str] = stack.endpoints["edge_urls"][REGION]
    return found


def body(user_id: str, page: str = "home") -> dict[str, object]:
    return {"user_id": user_id, "context": {"page_type": page, "device": "mobile"}}


def counter(metrics: str, name: str) -> float:
    """The value of the one sample of ``metrics`` that starts with ``name``."""
    lines = [line for line in metrics.splitlines() if line.startswith(name)]
    assert len(lines) == 1, (name, lines)
    return float(lines[0].rsplit(" ", 1)[1])


def test_the_stack_file_names_every_edge_of_the_pop(pop: RunningStack) -> None:
    edges = urls(pop)
    assert len(edges) == 2
    assert len(set(edges)) == 2
    assert pop.edges == {REGION: edges[0]}  # the tools that read one edge per region
    log = pop.log()
    assert f"({REGION}, edge-{REGION}-0)" in log
    assert f"({REGION}, edge-{REGION}-1)" in log


async def test_what_one_process_fills_the_other_serves(pop: RunningStack) -> None:
    first, second = urls(pop)
    async with httpx.AsyncClient(timeout=10) as client:
        auth = await pop.user_headers(client, "e2e-pop")
        filled = await client.post(f"{first}/v1/personalize", json=body("e2e-pop"), headers=auth)
        served = await client.post(f"{second}/v1/personalize", json=body("e2e-pop"), headers=auth)
    assert filled.headers["x-cache"] == "MISS"
    assert served.headers["x-cache"] == "HIT"
    assert served.json()["items"] == filled.json()["items"]


async def test_one_user_over_both_processes_gets_the_tiers_limit(pop: RunningStack) -> None:
    """Free tier: 10 personalize requests a second, 10 at once; two processes with their
    own buckets would let 20 through at once."""
    edges = urls(pop)
    async with httpx.AsyncClient(timeout=10) as client:
        tokens = UserTokens(pop.origin_url, FREE_SECRET)
        auth = await tokens.headers(client, "e2e-free")
        await client.post(f"{edges[0]}/v1/personalize", json=body("e2e-free"), headers=auth)
        started = time.perf_counter()

        async def limited(n: int) -> bool:
            response = await client.post(
                f"{edges[n % 2]}/v1/personalize", json=body("e2e-free"), headers=auth
            )
            assert response.status_code == 200, response.text  # the cached answer
            return bool(response.json()["metadata"].get("rate_limited", False))

        answers = await asyncio.gather(*(limited(n) for n in range(40)))
        took = time.perf_counter() - started
        allowed = 1 + answers.count(False)
        assert 10 <= allowed <= 10 + 10 * took + 1, (allowed, took)
        for edge in edges:
            metrics = (await client.get(f"{edge}/metrics")).text
            pop_checks = 'perso_edge_rate_limit_checks_total{decided_by="pop"'
            assert counter(metrics, pop_checks) > 0
            assert counter(metrics, 'perso_edge_rate_limit_checks_total{decided_by="process"') == 0


async def test_a_cold_key_asked_of_both_at_once_is_filled_once(pop: RunningStack) -> None:
    edges = urls(pop)
    async with httpx.AsyncClient(timeout=10) as client:

        async def fills() -> float:
            pages = [(await client.get(f"{edge}/metrics")).text for edge in edges]
            return sum(counter(page, "perso_edge_fills_total") for page in pages)

        users = [f"cold-{n}" for n in range(20)]
        auth = {user: await pop.user_headers(client, user) for user in users}
        before = await fills()
        answers = await asyncio.gather(
            *(
                client.post(
                    f"{edges[n % 2]}/v1/personalize",
                    json=body(user, page="search"),
                    headers=auth[user],
                )
                for n, user in enumerate(users)
            )
        )
        assert all(answer.status_code == 200 for answer in answers)
        assert await fills() == before + 1
        assert len({str(answer.json()["items"]) for answer in answers}) == 1


def test_ports_follow_the_base(pop: RunningStack) -> None:
    """Region r's n-th process on the base port + r * N + n: the PoP's two are adjacent."""
    first, second = (int(url.rsplit(":", 1)[1]) for url in urls(pop))
    assert second == first + 1
