"""The origin as ``benchmarks.edge_replay``'s edges see it when they rank for themselves
(issue 18): the answers to their pool fills and user-state fetches, on the wire as the
origin sends them, and each user's model as the stream workers last wrote it.

An edge's ``OriginClient`` talks to ``SimOrigin.handle`` through an ``httpx`` mock
transport, so every pool fill and state fetch goes through the client's real request,
decoding and checks (``decode_pool_fill``, ``decode_user_model``), and the edge decodes,
stores and ranks a real pool. What the origin would compute is simulated:

- **Pools**: one pool of ``pool_size`` candidates (unit vectors of the catalog's
  dimension, plausible posteriors, item values, categories and metadata of a realistic
  size), built once from the seed and sent for every pool key: the hit ratio depends on
  when pools are asked for, not on what they hold.
- **Users' models**: every interaction is a new version of its user's model (the stream
  worker folds each event in), its bytes ``relevance.user_model.model_bytes`` of a model
  drawn once per user, sent with the user's preferences as the worker reads them (no
  user of the traffic model states any: version 0).

Every call is counted in ``calls`` by kind (``pool fill`` on a request's path, ``pool
refresh`` in the background, ``user state``) while ``counting`` is set (the measured
window).
"""

from __future__ import annotations

import random
from collections import Counter
from urllib.parse import unquote

import httpx
import numpy as np
import orjson

from protocol.api import (
    ItemMetadata,
    PersonalizeResponse,
    RankedItem,
    ResponseMetadata,
)
from protocol.audience import AUDIENCE_HEADER, SEGMENT
from protocol.decisions import (
    CONTEXT_HEADER,
    POLICY_HEADER,
    PROPENSITIES_HEADER,
    propensities_header,
)
from protocol.pools import POOL_MEDIA_TYPE, POOLS_PATH, SOURCES, Pool, encode_pool_fill
from protocol.user_model_wire import (
    STATE_MEDIA_TYPE,
    UserModelWire,
    encode_preferences,
    encode_user_model,
)
from relevance.user_model import UserModel, model_bytes

STATE_PREFIX = "/v1/internal/users/"
CATEGORIES = ("home-kitchen", "books", "toys", "garden", "sports", "beauty", "electronics")
CONTEXT = "desktop_evening"
MODEL_VERSION = "nn-slice-1"


def sim_pool(size: int, dim: int, seed: int) -> Pool:
    """``size`` candidates as an origin's pool holds them."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(size, dim))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    rate = rng.uniform(0.01, 0.1, size)
    evidence = rng.uniform(20, 400, size)
    categories = tuple(CATEGORIES[n % len(CATEGORIES)] for n in range(size))
    metadata = tuple(
        orjson.dumps(
            ItemMetadata(
                title=f"Sample catalog item number {n}",
                category=categories[n],
                price=24.99,
                image_url=f"https://cdn.example.com/items/it-{n}.jpg",
            ).model_dump(mode="json", exclude_none=True)
        )
        for n in range(size)
    )
    return Pool(
        context=CONTEXT,
        model_version=MODEL_VERSION,
        built_ms=1_767_225_600_000,
        item_ids=tuple(f"it-{n}" for n in range(size)),
        sources=tuple(SOURCES[n % len(SOURCES)] for n in range(size)),
        categories=categories,
        metadata=metadata,
        vectors=vectors.astype(np.float16),
        alpha=(rate * evidence).astype(np.float32),
        beta=((1 - rate) * evidence).astype(np.float32),
        value=rng.uniform(1.0, 2.0, size).astype(np.float32),
    )


def segment_answer(pool: Pool, count: int) -> bytes:
    """The segment's answer a pool fill carries: the pool's first ``count`` items."""
    items = [
        RankedItem(
            item_id=pool.item_ids[n],
            rank=n + 1,
            score=round(1.0 - n / 1000, 6),
            source=pool.sources[n],
            metadata=ItemMetadata.model_validate_json(pool.metadata[n]),
        )
        for n in range(min(count, len(pool.item_ids)))
    ]
    answer = PersonalizeResponse(
        request_id="00000000-0000-0000-0000-000000000000",
        user_id="segment",
        items=items,
        metadata=ResponseMetadata(
            latency_ms=5.0,
            tier="origin",
            cache_hit=False,
            exploration_applied=False,
            model_version=MODEL_VERSION,
            degraded=False,
        ),
    )
    return answer.model_dump_json(exclude_none=True).encode()


class SimOrigin:
    def __init__(
        self, *, pool_size: int, fill_items: int, dim: int, seed: int, policy: str
    ) -> None:
        """``policy``: the label of the ranking policy its pools are filled under, the live
        one's (a real origin's); an edge ranks only pools of the policy it holds."""
        pool = sim_pool(pool_size, dim, seed)
        self.pool_size = pool_size
        self._pool_fill = encode_pool_fill(segment_answer(pool, fill_items), pool)
        self._pool_headers = {
            "content-type": POOL_MEDIA_TYPE,
            AUDIENCE_HEADER: SEGMENT,
            CONTEXT_HEADER: CONTEXT,
            POLICY_HEADER: policy,
            PROPENSITIES_HEADER: propensities_header([1.0] * min(fill_items, pool_size)),
        }
        self._dim = dim
        self._rng = random.Random(seed + 7)
        self._models: dict[str, tuple[int, bytes]] = {}
        self.counting = False
        self.on_request_path = False  # a pool fill then, else a refresh in the background
        self.calls: Counter[str] = Counter()

    no_preferences = encode_preferences({})

    @property
    def pool_fill_bytes(self) -> int:
        return len(self._pool_fill)

    def interacted(self, user_id: str) -> tuple[int, bytes]:
        """The stream worker folded one more interaction of ``user_id`` in: their model's
        new version and bytes."""
        version, raw = self._models.get(user_id, (0, b""))
        if not raw:
            raw = model_bytes(self._model())
        self._models[user_id] = (version + 1, raw)
        return version + 1, raw

    def _model(self) -> UserModel:
        prior = UserModel.prior(self._dim, 1.0)
        mean = np.array([self._rng.gauss(0.0, 0.05) for _ in range(self._dim)], np.float32)
        return UserModel(mean=mean, var=prior.var * 0.5)

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == POOLS_PATH and request.method == "POST":
            self._count("pool fill" if self.on_request_path else "pool refresh")
            return httpx.Response(200, content=self._pool_fill, headers=self._pool_headers)
        if path.startswith(STATE_PREFIX) and path.endswith("/state") and request.method == "GET":
            self._count("user state")
            user_id = unquote(path.removeprefix(STATE_PREFIX).removesuffix("/state"))
            version, raw = self._models.get(user_id, (0, b""))
            wire = UserModelWire(user_id, version, raw or None, {})
            return httpx.Response(
                200, content=encode_user_model(wire), headers={"content-type": STATE_MEDIA_TYPE}
            )
        raise AssertionError(f"the replay's origin answers pools and user states, not {path}")

    def _count(self, kind: str) -> None:
        if self.counting:
            self.calls[kind] += 1
