"""The product as a slate policy for ``benchmarks.learning``: a running stack (``perso.stack``:
embedded Redis, the origin, stream workers, one edge), the world's catalog and nothing else
in it, every slate asked of it over HTTP and every outcome told to it.

- The catalog: before the stack starts, the world's items (``shop_world.catalog_items``:
  title, category, price, popularity when the shop has one, and the visible vector as the
  ``image`` modality, zero-padded to the product's image dimension) are written to the
  stack's Qdrant collection and Redis through the admin ingest path
  (``origin.catalog.ingest.ingest_items``), so the stack finds a catalog of the shop's own
  and generates no sample items.
- The settings: the product's shipped defaults, but for the plumbing of a stack of its own
  (data directory, Redis, one region, identity keys, quiet logs) and
  ``PersoConfig.overrides`` (``Settings`` field names and values; empty: none).
- A slate, by ``PersoConfig.path``: ``edge``, ``POST /v1/personalize`` at the region's edge
  with the user's token (fetched once from the origin with the stack's API key), as a
  browser asks; ``origin``, the origin's own ``POST /v1/personalize`` with the service token
  and no fill scope (the origin ranks for the user and logs the decision itself), as a
  shop's backend would. Either way: the request's device, page ``home``, ``count`` 10.
- An outcome: one ``POST /v1/feedback`` on the same path with the answer's ``request_id``
  and an event for each (position, action) the shop reports
  (``shop_world.reported``: clicks only, clicks and dismisses, or clicks, carts and
  purchases, by the world's ``feedback``). Nothing is sent for the items the user ignored:
  the decision logged for the answer says what was shown, and the workers join the two.

For a benchmark that compares the product's paths once it has learnt
(``benchmarks.edge_ranking_quality``): ``ask`` returns the whole answer, ``freeze`` waits
until the workers have applied everything sent and then stops them, so that what the stack
learnt holds still, and ``endpoints`` and ``settings`` say where and how it runs.

What the product learns it learns asynchronously, through its streams and workers, while
the run goes on: that lag is part of what it is measured on. The benchmarks that measure
the product with time compressed (a shop's day in minutes) say so in their overrides:
``compressed_time`` is the set ``benchmarks.learning`` used before its headline became the
shipped defaults.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_origin

import httpx
from pydantic import SecretStr, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from benchmarks.backlog import wait_settled
from benchmarks.click_model import Outcome
from benchmarks.shop_world import Request, ShopWorld, catalog_items, reported
from config.settings import Settings
from origin.catalog.ingest import CatalogItemIn, ingest_items
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.vector_store import VectorStore
from perso.process import stop_all
from perso.redis_server import RedisServer
from perso.stack import Stack
from perso.stack_endpoints import Endpoints
from perso.user_tokens import UserTokens
from redis_client.client import connect

REGION = "eu-west"
INGEST_BATCH = 500
# How long the workers may take to apply what was sent before ``freeze`` gives up, beyond
# the reward wait (the last decisions' joins close only after it).
SETTLE_S = 60.0
IDENTITY_KEY = "learning-benchmark-identity-key-0123"
# The settings a run sets for a stack of its own: an override may not change them.
PLUMBING = ("data_dir", "redis_url", "regions", "identity_keys")
# What the report shows of the settings a stack ran with: those the learning depends on.
LEARNING_SETTINGS = (
    "reward_wait_s",
    "reward_grace_s",
    "freshness_active_s",
    "freshness_casual_s",
    "exploration_weight",
    "diversity_weight",
    "emotion_rules",
    "value_weight",
    "user_prior_scale",
    "edge_ranking",
    "edge_pool_ttl_s",
    "text_encoder",
    "workers",
)

NONE_WORDS = ("none", "null")


def problems(exc: ValidationError) -> str:
    """What pydantic refused, one line: each field and why."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


def parse_setting(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` as a ``Settings`` field and its value, parsed by the field's type
    (``none`` for an optional one; a tuple's items comma-separated). ValueError naming
    what is wrong."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"--set takes NAME=VALUE, not {text!r}")
    info = Settings.model_fields.get(name)
    if info is None:
        raise ValueError(f"--set {name}: no such setting")
    if name in PLUMBING:
        raise ValueError(f"--set {name}: set by the run for its own stack")
    if info.annotation is None:
        raise ValueError(f"--set {name}: a setting without a type")
    adapter: TypeAdapter[Any] = TypeAdapter(info.annotation)
    try:
        if raw.strip().lower() in NONE_WORDS:
            return name, adapter.validate_python(None)
        if get_origin(info.annotation) is tuple:
            return name, adapter.validate_python(tuple(p.strip() for p in raw.split(",")))
        return name, adapter.validate_strings(raw)
    except ValidationError as exc:
        raise ValueError(f"--set {name}={raw}: {problems(exc)}") from exc


PathName = Literal["edge", "origin"]
PATHS: tuple[PathName, ...] = ("edge", "origin")


@dataclass(frozen=True, slots=True)
class PersoConfig:
    """How the product is run: its settings changed from the shipped defaults (``Settings``
    field names and values; empty: none) and the path every slate and outcome takes."""

    overrides: Mapping[str, Any] = field(default_factory=dict)
    path: PathName = "edge"

    def __post_init__(self) -> None:
        unknown = sorted(set(self.overrides) - set(Settings.model_fields))
        if unknown:
            raise ValueError(f"no such settings: {', '.join(unknown)}")
        mine = sorted(set(self.overrides) & set(PLUMBING))
        if mine:
            raise ValueError(f"set by the run for its own stack, not overridable: {mine}")
        if self.path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, not {self.path!r}")
        # A copy: the caller's mapping may change after.
        object.__setattr__(self, "overrides", dict(self.overrides))


def compressed_time(reward_wait_s: float = 3.0) -> dict[str, Any]:
    """The overrides ``benchmarks.learning`` ran the product with before its headline
    became the shipped defaults: a shop's day compressed into minutes (a reward wait of
    seconds, pools refreshed every 6 s, the freshness tiers off), plain Thompson sampling
    (exploration 0.3), no diversity or emotion rules, hashed title vectors, one worker.
    The benchmarks that measured with them keep them, so they measure what they did."""
    return {
        "reward_wait_s": reward_wait_s,
        "reward_grace_s": min(2.0, reward_wait_s / 3),
        "freshness_active_s": 0.0,
        "freshness_casual_s": 0.0,
        "exploration_weight": 0.3,
        "diversity_weight": 0.0,
        "emotion_rules": False,
        "edge_pool_ttl_s": 6.0,
        "text_encoder": "hashing",
        "workers": 1,
    }


class PersoPolicy:
    """Slates from a running stack, by its edge or its origin; see the module's docstring."""

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
        # Feedback events sent, by action.
        self.sent: Counter[str] = Counter()

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
        asked = (
            f"the edge's HTTP API ({REGION}) with the user's token"
            if self._config.path == "edge"
            else "the origin's POST /v1/personalize with the service token"
        )
        used = self._settings_used
        return {
            "path": self._config.path,
            "asked": asked,
            "overrides": to_jsonable_python(dict(self._config.overrides)),
            "settings": {k: getattr(used, k) for k in LEARNING_SETTINGS} if used else None,
        }

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
        """The shipped defaults, the plumbing of a stack of its own, and the overrides."""
        plumbing: dict[str, Any] = {
            "data_dir": data_dir,
            "redis_url": redis_url,
            "regions": (REGION,),
            "identity_keys": SecretStr(IDENTITY_KEY),
            "log_level": "warning",
        }
        return Settings(**{**plumbing, **self._config.overrides})

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

    async def _route(self, user_id: str) -> tuple[str, dict[str, str]]:
        """Where the path's requests go and how they are authenticated."""
        client, tokens = self._session()
        if self._config.path == "edge":
            return self._edge, await tokens.headers(client, user_id)
        endpoints = self.endpoints
        return endpoints.origin_url, {"authorization": f"Bearer {endpoints.origin_token}"}

    async def ask(
        self, request: Request, *, exploration_rate: float | None = None
    ) -> httpx.Response:
        """The path's answer to ``request`` as it came (status, headers, body)."""
        client, _ = self._session()
        base, auth = await self._route(request.user_id)
        body = personalize_body(request, exploration_rate=exploration_rate)
        return await client.post(f"{base}/v1/personalize", json=body, headers=auth)

    async def slate(self, request: Request) -> list[str]:
        response = await self.ask(request)
        if response.status_code != 200:
            self.errors += 1
            return []
        answer = response.json()
        self._request_ids[request.index] = str(answer["request_id"])
        return [str(item["item_id"]) for item in answer["items"]][: request.count]

    async def learn(self, request: Request, slate: Sequence[str], outcome: Outcome) -> None:
        client, _ = self._session()
        request_id = self._request_ids.pop(request.index, None)
        events = [
            {"item_id": slate[position], "action": action, "position": position}
            for position, action in reported(outcome, self._world.config.feedback)
            if position < len(slate)
        ]
        if not events or request_id is None:
            return
        base, auth = await self._route(request.user_id)
        body = {
            "user_id": request.user_id,
            "session_id": f"s-{request.user_id}",
            "request_id": request_id,
            "feedback": events,
        }
        response = await client.post(f"{base}/v1/feedback", json=body, headers=auth)
        if response.status_code != 200:
            self.errors += 1
            return
        self.sent.update(str(event["action"]) for event in events)

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
