"""Candidate pools: what an edge needs to rank a segment's candidates for one of its users
itself (issue 18), and their msgpack wire format.

A pool is built by the origin for a shared cache key (Algorithm 5's page, segment, geo,
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

from protocol.api import Source
from protocol.exceptions import MalformedMessage
from protocol.packed import unpack_map

POOL_VERSION = 1
# Where an edge asks for a pool fill, and the media type of its body.
POOLS_PATH = "/v1/internal/pools"
POOL_MEDIA_TYPE = "application/vnd.perso.pool+msgpack"
SOURCES: tuple[Source, ...] = get_args(Source)
# A stored row: the context cell's alpha, beta, last change (ms), then all contexts'.
STORED_COLUMNS = 6

Floats = npt.NDArray[np.float32]


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
    context = _typed(doc, "context", str)
    model_version = _typed(doc, "model_version", str)
    built_ms = _typed(doc, "built_ms", int)
    dim = _typed(doc, "dim", int)
    if dim <= 0:
        raise MalformedMessage(f"pool: field 'dim' is not positive: {dim}")
    ids = _strings(doc, "ids")
    n = len(ids)
    sources = _strings(doc, "sources", n)
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise MalformedMessage(f"pool: field 'sources' holds {unknown[0]!r}, not a source")
    categories = _strings(doc, "categories", n)
    metadata = _typed(doc, "metadata", list)
    if len(metadata) != n or not all(isinstance(m, bytes) for m in metadata):
        raise MalformedMessage(f"pool: field 'metadata' is not {n} byte strings")
    vectors = _array(doc, "vectors", "<f2", n * dim).reshape(n, dim)
    alpha = _array(doc, "alpha", "<f4", n, positive=True)
    beta = _array(doc, "beta", "<f4", n, positive=True)
    value = _array(doc, "value", "<f4", n, positive=True)
    stored = None
    if "stored" in doc:
        stored = _array(doc, "stored", "<f8", n * STORED_COLUMNS).reshape(n, STORED_COLUMNS)
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


def _typed(doc: dict[Any, Any], name: str, kind: type) -> Any:
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedMessage(
            f"pool: field {name!r} is not of type {kind.__name__}: {value!r:.60}"
        )
    return value


def _strings(doc: dict[Any, Any], name: str, n: int | None = None) -> list[str]:
    values: list[str] = _typed(doc, name, list)
    if not all(isinstance(v, str) and v for v in values):
        raise MalformedMessage(f"pool: field {name!r} holds something not a non-empty string")
    if n is not None and len(values) != n:
        raise MalformedMessage(f"pool: field {name!r} has {len(values)} values for {n} items")
    return values


def _array(
    doc: dict[Any, Any], name: str, dtype: str, count: int, *, positive: bool = False
) -> npt.NDArray[Any]:
    raw = _typed(doc, name, bytes)
    width = np.dtype(dtype).itemsize
    if len(raw) != count * width:
        raise MalformedMessage(f"pool: field {name!r} is {len(raw)} bytes, not {count * width}")
    values = np.frombuffer(raw, dtype=dtype)
    if not np.isfinite(values).all():
        raise MalformedMessage(f"pool: field {name!r} holds a non-finite number")
    if positive and count and not (values > 0).all():
        raise MalformedMessage(f"pool: field {name!r} holds a number that is not positive")
    return values
