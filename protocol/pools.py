"""Candidate pools: what an edge needs to rank a segment's candidates for one of its users
itself (edge ranking), and their msgpack wire format.

A pool is built by the origin for a shared cache key (the segment cache key's page, segment, geo,
device, time bucket and variant; never a user) from the candidates its retrieval found for
that key, and carries nothing of any user's: per candidate, its id, its unified vector
(float16), its effective Beta posterior in the key's context cell (alpha, beta: what the
origin's own ranking draws from), what an engagement with it is worth relative to a click
(``relevance.item_value``), where retrieval found it, its category, and its catalog
metadata as the JSON the answer will show. An edge ranks it with ``relevance.slate``, the
code the origin ranks with.

Beside the effective posteriors, a pool carries what they were computed from (``stored``):
per candidate, its stored Beta posterior in the context cell and over all contexts as
Redis held them (alpha, beta, time of the last change; zeros where nothing was stored), so
that an edge can recompute the effective posteriors with the workers' later changes
(``edge.ranking.live_posteriors``) as the origin would (``relevance.item_posteriors.effective``).

Body (``encode_pool``): a msgpack map ``{"v": 1, "context", "model_version", "built_ms",
"dim", "ids": [...], "sources": [...], "categories": [...], "metadata": [bytes...],
"vectors": bytes, "alpha": bytes, "beta": bytes, "value": bytes[, "stored": bytes,
"population": bytes]}``, the
arrays little-endian (vectors float16, ``stored`` float64 rows of six, the others float32);
``stored`` is optional (an origin that predates it sends none: the edge ranks by the
effective posteriors as filled), and so is ``population``, the users' population prior the
origin ranked under (``relevance.population``'s bytes; none before the workers estimated
one), which the edge ranks the pool's users under: one prior for a pool, at the origin and
at the edge. Decoding is strict: a missing or ill-typed field, arrays
whose lengths disagree, a non-finite or non-positive posterior or value, a negative stored
number raise ``MalformedMessage`` naming the field.

A pool fill (the answer to ``POST /v1/internal/pools``, ``encode_pool_fill``): a msgpack
map ``{"answer": bytes, "pool": bytes}``, the JSON body ``/v1/personalize`` answers for the
same shared fill and the pool it was ranked from (``encode_pool``), so that an edge stores
and serves the answer as it would a fill of ``/v1/personalize`` and keeps the pool beside it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, get_args

import msgpack
import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from protocol.api import Constraints, Identifier, Source
from protocol.exceptions import MalformedMessage
from protocol.packed import array, strings, typed, unpack_map

POOL_VERSION = 1
# Where an edge asks for a pool fill, and the media type of its body.
POOLS_PATH = "/v1/internal/pools"
POOL_MEDIA_TYPE = "application/vnd.perso.pool+msgpack"
SOURCES: tuple[Source, ...] = get_args(Source)
# Where an edge asks for some items as rows of one of its pools (``PoolItemsRequest``).
POOL_ITEMS_PATH = "/v1/internal/pools/items"
MAX_POOL_ITEMS = 500
# A stored row: the context cell's alpha, beta, last change (ms), then all contexts'.
STORED_COLUMNS = 6

Floats = npt.NDArray[np.float32]


class PoolItemsRequest(BaseModel):
    """The body of ``POST /v1/internal/pools/items``: items an edge wants as rows of a pool
    it holds (a known user's own candidates, ``edge.ranking.own_candidates``), in the pool's
    context ``cell`` and under the constraints of the fill that built it. The answer is a
    pool (``encode_pool``) of those of ``item_ids`` the catalog holds and the constraints
    allow, each with the source ``collaborative``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cell: str = Field(pattern=r"^[a-z]+_[a-z]+$", max_length=40)
    constraints: Constraints = Field(default_factory=Constraints)
    item_ids: list[Identifier] = Field(min_length=1, max_length=MAX_POOL_ITEMS)


@dataclass(frozen=True, slots=True, eq=False)
class Pool:
    """A segment's candidates, aligned by row."""

    context: str  # the context cell the posteriors are for (``<device>_<daypart>``)
    model_version: str
    built_ms: int
    item_ids: tuple[str, ...]
    sources: tuple[Source, ...]  # where retrieval found each (the answer's ``source``)
    categories: tuple[str, ...]  # category slugs (stated preferences apply by category)
    metadata: tuple[bytes, ...]  # each item's ``metadata`` object as JSON
    vectors: npt.NDArray[np.float16]  # (n, dim), unit length
    alpha: Floats  # effective Beta posterior in ``context``
    beta: Floats
    value: Floats  # an engagement's worth relative to a click (1: a click's)
    # (n, 6): the stored posteriors the effective ones come from (module docstring): the
    # cell's alpha, beta, last change (ms), then all contexts'; None: not sent.
    stored: npt.NDArray[np.float64] | None = None
    # The users' population prior the origin ranked under when it filled the pool
    # (``relevance.population.population_bytes``); None: none yet, or not sent.
    population: bytes | None = None

    def __len__(self) -> int:
        return len(self.item_ids)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def without(self, item_ids: Collection[str]) -> Pool:
        """The pool but ``item_ids`` (itself when it holds none of them)."""
        keep = [n for n, i in enumerate(self.item_ids) if i not in item_ids]
        if len(keep) == len(self):
            return self
        rows = np.array(keep, np.intp)
        return Pool(
            context=self.context,
            model_version=self.model_version,
            built_ms=self.built_ms,
            item_ids=tuple(self.item_ids[n] for n in keep),
            sources=tuple(self.sources[n] for n in keep),
            categories=tuple(self.categories[n] for n in keep),
            metadata=tuple(self.metadata[n] for n in keep),
            vectors=self.vectors[rows],
            alpha=self.alpha[rows],
            beta=self.beta[rows],
            value=self.value[rows],
            stored=None if self.stored is None else self.stored[rows],
            population=self.population,
        )

    def joined(self, other: Pool, rows: npt.NDArray[np.intp]) -> Pool:
        """This pool's rows, then the ``rows`` of ``other`` (a pool of the same context
        cell); stored posteriors only when both carry them."""
        picked = rows.tolist()
        stored = None
        if self.stored is not None and other.stored is not None:
            stored = np.concatenate([self.stored, other.stored[rows]])
        return Pool(
            context=self.context,
            model_version=self.model_version,
            built_ms=self.built_ms,
            item_ids=self.item_ids + tuple(other.item_ids[n] for n in picked),
            sources=self.sources + tuple(other.sources[n] for n in picked),
            categories=self.categories + tuple(other.categories[n] for n in picked),
            metadata=self.metadata + tuple(other.metadata[n] for n in picked),
            vectors=np.concatenate([self.vectors, other.vectors[rows]]),
            alpha=np.concatenate([self.alpha, other.alpha[rows]]),
            beta=np.concatenate([self.beta, other.beta[rows]]),
            value=np.concatenate([self.value, other.value[rows]]),
            stored=stored,
            population=self.population,
        )

    @property
    def size(self) -> int:
        """Bytes it holds, roughly: what an edge's memory budget charges for it."""
        text = sum(
            len(i) + len(m) + len(c)
            for i, m, c in zip(self.item_ids, self.metadata, self.categories, strict=True)
        )
        arrays = self.vectors.nbytes + self.alpha.nbytes + self.beta.nbytes + self.value.nbytes
        if self.stored is not None:
            arrays += self.stored.nbytes
        return text + arrays + 150 * len(self)


def encode_pool(pool: Pool) -> bytes:
    doc: dict[str, Any] = {
        "v": POOL_VERSION,
        "context": pool.context,
        "model_version": pool.model_version,
        "built_ms": pool.built_ms,
        "dim": pool.dim,
        "ids": list(pool.item_ids),
        "sources": list(pool.sources),
        "categories": list(pool.categories),
        "metadata": list(pool.metadata),
        "vectors": np.asarray(pool.vectors, "<f2").tobytes(),
        "alpha": np.asarray(pool.alpha, "<f4").tobytes(),
        "beta": np.asarray(pool.beta, "<f4").tobytes(),
        "value": np.asarray(pool.value, "<f4").tobytes(),
    }
    if pool.stored is not None:
        doc["stored"] = np.asarray(pool.stored, "<f8").tobytes()
    if pool.population is not None:
        doc["population"] = pool.population
    return msgpack.packb(doc, use_bin_type=True)


def decode_pool(raw: bytes) -> Pool:
    doc = unpack_map(raw, "pool", version=POOL_VERSION)
    context = typed(doc, "pool", "context", str)
    model_version = typed(doc, "pool", "model_version", str)
    built_ms = typed(doc, "pool", "built_ms", int)
    dim = typed(doc, "pool", "dim", int)
    if dim <= 0:
        raise MalformedMessage(f"pool: field 'dim' is not positive: {dim}")
    ids = strings(doc, "pool", "ids")
    n = len(ids)
    sources = strings(doc, "pool", "sources", n)
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise MalformedMessage(f"pool: field 'sources' holds {unknown[0]!r}, not a source")
    categories = strings(doc, "pool", "categories", n)
    metadata = typed(doc, "pool", "metadata", list)
    if len(metadata) != n or not all(isinstance(m, bytes) for m in metadata):
        raise MalformedMessage(f"pool: field 'metadata' is not {n} byte strings")
    vectors = array(doc, "pool", "vectors", "<f2", n * dim).reshape(n, dim)
    alpha = array(doc, "pool", "alpha", "<f4", n, positive=True)
    beta = array(doc, "pool", "beta", "<f4", n, positive=True)
    value = array(doc, "pool", "value", "<f4", n, positive=True)
    stored = None
    if "stored" in doc:
        stored = array(doc, "pool", "stored", "<f8", n * STORED_COLUMNS).reshape(n, STORED_COLUMNS)
        if (stored < 0).any():
            raise MalformedMessage("pool: field 'stored' holds a negative number")
    population = doc.get("population")
    if population is not None and (not isinstance(population, bytes) or not population):
        raise MalformedMessage("pool: field 'population' is not a non-empty byte string")
    return Pool(
        context=context,
        model_version=model_version,
        built_ms=built_ms,
        item_ids=tuple(ids),
        sources=tuple(sources),  # type: ignore[arg-type]  # checked against SOURCES above
        categories=tuple(categories),
        metadata=tuple(metadata),
        vectors=vectors.astype(np.float16),
        alpha=alpha.astype(np.float32),
        beta=beta.astype(np.float32),
        value=value.astype(np.float32),
        stored=None if stored is None else stored.astype(np.float64),
        population=population,
    )


def encode_pool_fill(answer: bytes, pool: Pool) -> bytes:
    """A pool fill's body: ``answer`` (a personalize answer's JSON) and ``pool``."""
    return msgpack.packb({"answer": answer, "pool": encode_pool(pool)}, use_bin_type=True)


def decode_pool_fill(raw: bytes) -> tuple[bytes, Pool]:
    """The answer's JSON (not parsed here) and the pool of a pool fill's body; strict."""
    doc = unpack_map(raw, "pool fill")
    extra = sorted(str(k) for k in doc if k not in ("answer", "pool"))
    if extra:
        raise MalformedMessage(f"pool fill: unknown field {extra[0]!r}")
    for name in ("answer", "pool"):
        if not isinstance(doc.get(name), bytes) or not doc[name]:
            raise MalformedMessage(f"pool fill: field {name!r} is not a non-empty byte string")
    answer: bytes = doc["answer"]
    return answer, decode_pool(doc["pool"])
