"""The product as a slate policy for ``benchmarks.learning``: a running stack (``perso.stack``:
embedded Redis, the origin, stream workers, one edge), the world's catalog and nothing else
in it, every slate asked of the edge's HTTP API and every outcome told to it.

- The catalog: before the stack starts, the world's items (``shop_world.catalog_items``:
  title, category, price, popularity, and the visible vector as the ``image`` modality,
  zero-padded to the product's image dimension) are
  written to the stack's Qdrant collection and Redis through the admin ingest path
  (``origin.catalog.ingest.ingest_items``), so the stack finds a catalog of the shop's own
  and generates no sample items.
- A slate: ``POST /v1/personalize`` at the edge with the user's token (fetched once from the
  origin with the stack's API key), the request's device, page ``home``, ``count`` 10.
- An outcome: one ``POST /v1/feedback`` at the edge with the answer's ``request_id`` and an
  event per engaged or dismissed position (``click``, ``add_to_cart``, ``purchase``,
  ``dismiss``). Nothing is sent for the items the user ignored: the decision the edge
  logged for the answer says what was shown, and the workers join the two.

For a benchmark that compares the product's paths once it has learnt
(``benchmarks.edge_ranking_quality``): ``ask`` returns the edge's whole answer, ``freeze``
waits until the workers have applied everything sent and then stops them, so that what
the stack learnt holds still, and ``endpoints`` and ``settings`` say where and how it runs.

What the product learns it learns asynchronously, through its streams and workers, while
the run goes on: that lag is part of what it is measured on. Time is compressed (a shop's
20,000 page views in a few minutes), so the reward wait (how long a decision waits for its
feedback) is set to ``reward_wait_s`` and the freshness tiers (how long a casual or active
user's feedback may be held) are on or off as asked; both are in the configuration the
report shows.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from benchmarks.backlog import wait_settled
from benchmarks.click_model import Outcome
from benchmarks.shop_world import Request, ShopWorld, catalog_items
from config.settings import Settings
from origin.catalog.ingest import CatalogItemIn, ingest_items
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.vector_store import VectorStore
from perso.process import stop_all
from perso.redis_server import RedisServer
from perso.stack import Endpoints, Stack
from perso.user_tokens import UserTokens
from redis_client.client import connect

REGION = "eu-west"
INGEST_BATCH = 500
# How long the workers may take to apply what was sent before ``freeze`` gives up, beyond
# the reward wait (the last decisions' joins close only after it).
SETTLE_S = 60.0


@dataclass(frozen=True, slots=True)
class PersoConfig:
    """The stack's settings that the run changes from the defaults."""

    reward_wait_s: float = 3.0
    freshness_tiers: bool = False  # off: every user's feedback is applied at once
    exploration_weight: float = 0.3
    diversity_weight: float = 0.0
    emotion_rules: bool = False
    user_prior_scale: float | None = None  # None: the product's default
    edge_ttl_casual_s: int | None = None  # None: the product's default
    workers: int = 1
    edge_ranking: bool | None = None  # True: power and active users ranked at the edge
    # A pool's freshness, compressed as the reward wait is (the product's 60 s / 10): a
    # pool's posteriors are what the edge ranks by, and the run is a shop's day in minutes.
    edge_pool_ttl_s: float | None = 6.0
    context_log_rate: float | None = None  # None: the product's default


class PersoPolicy:
    """Slates from a running stack's edge; see the module's docstring."""

    def __init__(
        self, world: ShopWorld, config: PersoConfig, *, name: str = "perso", quiet: bool = True
    ) -> None:
        self._world = world
        self._config = config
        self._name = name
        self._quiet = quiet
        self._tmp = tempfile.TemporaryDirectory(prefix="learning-perso-")
        self._redis_server: RedisServer | None = None
        self._stack: Stack | None = None
        self._client: httpx.AsyncClient | None = None
        self._tokens: UserTokens | None = None
        self._edge = ""
        self._settings_used: Settings | None = None
        self._request_ids: dict[int, str] = {}
        self.errors = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def redis_url(self) -> str:
        """The stack's Redis (for a reader of its streams and keys)."""
        if self._redis_server is None:
            raise RuntimeError("the policy's stack is not started (use started())")
        return self._redis_server.url

    @property
    def settings(self) -> Settings:
        """The settings the stack runs with."""
        if self._settings_used is None:
            raise RuntimeError("the policy's stack is not started (use started())")
        return self._settings_used

    @property
    def endpoints(self) -> Endpoints:
        """Where the stack's processes answer, and their credentials."""
        if self._stack is None or self._stack.endpoints is None:
            raise RuntimeError("the policy's stack is not started (use started())")
        return self._stack.endpoints

    def configuration(self) -> dict[str, Any]:
        return {**asdict(self._config), "path": f"edge HTTP API ({REGION})"}

    async def start(self) -> None:
        data_dir = Path(self._tmp.name)
        self._redis_server = RedisServer(data_dir / "redis", persistent=False).start()
        settings = self._settings(data_dir, self._redis_server.url)
        self._settings_used = settings
        await self._load_catalog(settings)
        say = (lambda _line: None) if self._quiet else (lambda line: print(f"  {line}"))
        self._stack = Stack(settings, free_ports=True, redis_persistent=False, say=say)
        endpoints = await self._stack.start()
        self._edge = endpoints.edges[REGION]
        self._client = httpx.AsyncClient(timeout=10.0)
        self._tokens = UserTokens(endpoints.origin_url, endpoints.api_key)

    def _settings(self, data_dir: Path, redis_url: str) -> Settings:
        c = self._config
        tiers: dict[str, Any] = {}
        if not c.freshness_tiers:
            tiers = {"freshness_active_s": 0.0, "freshness_casual_s": 0.0}
        if c.user_prior_scale is not None:
            tiers["user_prior_scale"] = c.user_prior_scale
        if c.edge_ttl_casual_s is not None:
            tiers["edge_ttl_casual_s"] = c.edge_ttl_casual_s
        if c.edge_pool_ttl_s is not None:
            tiers["edge_pool_ttl_s"] = c.edge_pool_ttl_s
        if c.edge_ranking is not None:
            tiers["edge_ranking"] = c.edge_ranking
        if c.context_log_rate is not None:
            tiers["context_log_rate"] = c.context_log_rate
        return Settings(
            data_dir=data_dir,
            redis_url=redis_url,
            text_encoder="hashing",
            workers=c.workers,
            regions=(REGION,),
            reward_wait_s=c.reward_wait_s,
            reward_grace_s=min(2.0, c.reward_wait_s / 3),
            exploration_weight=c.exploration_weight,
            diversity_weight=c.diversity_weight,
            emotion_rules=c.emotion_rules,
            identity_keys=SecretStr("learning-benchmark-identity-key-0123"),
            log_level="warning",
            **tiers,  # and the other overrides
        )

    async def _load_catalog(self, settings: Settings) -> None:
        vectors = ItemVectors.from_settings(settings)
        image_dim = vectors.modality_dims["image"]
        items = [
            CatalogItemIn.model_validate({**item, "image": padded(item["image"], image_dim)})
            for item in catalog_items(self._world)
        ]
        store = VectorStore.open(settings)
        redis = connect(settings.redis_url or "")
        try:
            for start in range(0, len(items), INGEST_BATCH):
                batch = items[start : start + INGEST_BATCH]
                await ingest_items(batch, vectors=vectors, store=store, redis=redis)
        finally:
            await redis.aclose()
            await store.close()

    def _session(self) -> tuple[httpx.AsyncClient, UserTokens]:
        if self._client is None or self._tokens is None:
            raise RuntimeError("the policy's stack is not started (use started())")
        return self._client, self._tokens

    async def ask(
        self, request: Request, *, exploration_rate: float | None = None
    ) -> httpx.Response:
        """The edge's answer to ``request`` as it came (status, headers, body)."""
        client, tokens = self._session()
        auth = await tokens.headers(client, request.user_id)
        body = personalize_body(request, exploration_rate=exploration_rate)
        return await client.post(f"{self._edge}/v1/personalize", json=body, headers=auth)

    async def slate(self, request: Request) -> list[str]:
        response = await self.ask(request)
        if response.status_code != 200:
            self.errors += 1
            return []
        answer = response.json()
        self._request_ids[request.index] = str(answer["request_id"])
        return [str(item["item_id"]) for item in answer["items"]][: request.count]

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        client, tokens = self._session()
        request_id = self._request_ids.pop(request.index, None)
        events = []
        for position, item_id in enumerate(slate):
            for flags, action in (
                (outcome.clicked, "click"),
                (outcome.carted, "add_to_cart"),
                (outcome.purchased, "purchase"),
                (outcome.dismissed, "dismiss"),
            ):
                if bool(flags[position]):
                    events.append({"item_id": item_id, "action": action, "position": position})
        if not events or request_id is None:
            return
        auth = await tokens.headers(client, request.user_id)
        body = {
            "user_id": request.user_id,
            "session_id": f"s-{request.user_id}",
            "request_id": request_id,
            "feedback": events,
        }
        response = await client.post(f"{self._edge}/v1/feedback", json=body, headers=auth)
        if response.status_code != 200:
            self.errors += 1

    async def edge_metrics(self) -> str:
        """The edge's ``/metrics`` text."""
        client, _ = self._session()
        response = await client.get(f"{self._edge}/metrics")
        response.raise_for_status()
        return response.text

    async def freeze(self) -> bool:
        """Wait until the workers have applied everything sent (False: they had not after
        the reward wait and ``SETTLE_S``), then stop them: the users' models and the items'
        posteriors stay as they are, whatever is asked of the stack after."""
        if self._stack is None:
            raise RuntimeError("the policy's stack is not started (use started())")
        settings = self.settings
        redis = connect(self.redis_url)
        try:
            timeout_s = settings.reward_wait_s + settings.reward_grace_s + SETTLE_S
            done = await wait_settled(redis, settings.event_partitions, timeout_s)
        finally:
            await redis.aclose()
        workers = [
            process.child
            for name, process in self._stack.processes().items()
            if name.startswith("worker") and process.child is not None
        ]
        await asyncio.to_thread(stop_all, workers, 15.0)
        return done

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._stack is not None:
            await self._stack.stop()
        if self._redis_server is not None:
            self._redis_server.stop()
        self._tmp.cleanup()


def personalize_body(request: Request, *, exploration_rate: float | None = None) -> dict[str, Any]:
    """The body of ``POST /v1/personalize`` for ``request`` (page ``home``, its device, its
    count; the stack's exploration unless ``exploration_rate`` is given)."""
    body: dict[str, Any] = {
        "user_id": request.user_id,
        "session_id": f"s-{request.user_id}",
        "context": {"page_type": "home", "placement": "feed", "device": request.device},
        "constraints": {"count": request.count},
    }
    if exploration_rate is not None:
        body["options"] = {"exploration_rate": exploration_rate}
    return body


def padded(vector: list[float], dim: int) -> list[float]:
    """The world's visible vector in the product's image dimension: zeros appended (the same
    information; the fusion projects it with the title's text vector)."""
    if len(vector) > dim:
        raise ValueError(f"visible vectors of {len(vector)} exceed the image dimension {dim}")
    return [*vector, *([0.0] * (dim - len(vector)))]


async def started(
    world: ShopWorld, config: PersoConfig, *, name: str = "perso", quiet: bool = True
) -> PersoPolicy:
    """A policy whose stack is up, serving the world's catalog."""
    policy = PersoPolicy(world, config, name=name, quiet=quiet)
    try:
        await policy.start()
    except BaseException:
        await policy.aclose()
        raise
    return policy
