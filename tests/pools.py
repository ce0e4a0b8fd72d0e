"""Candidate pools for tests: unit vectors, plausible posteriors, three categories."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import orjson

from protocol.pools import Pool

CATEGORIES = ("books", "toys", "garden")


def make_pool(
    n: int = 60, dim: int = 8, seed: int = 0, value: npt.NDArray[np.float32] | None = None
) -> Pool:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim))
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    rate = rng.uniform(0.01, 0.1, n)
    evidence = rng.uniform(20, 400, n)
    return Pool(
        context="mobile_evening",
        model_version="nn-1",
        built_ms=1_767_225_600_000,
        item_ids=tuple(f"it-{k:03d}" for k in range(n)),
        sources=tuple(("trending", "content", "collaborative")[k % 3] for k in range(n)),
        categories=tuple(CATEGORIES[k % 3] for k in range(n)),
        metadata=tuple(
            orjson.dumps({"title": f"T{k}", "category": "C", "price": 1.5, "image_url": "u"})
            for k in range(n)
        ),
        vectors=vectors.astype(np.float16),
        alpha=(rate * evidence).astype(np.float32),
        beta=((1 - rate) * evidence).astype(np.float32),
        value=value if value is not None else np.ones(n, np.float32),
    )


def same_pool(a: Pool, b: Pool) -> bool:
    """Field by field (a pool compares by identity: its arrays have no ``==``)."""
    plain = (
        "context",
        "model_version",
        "built_ms",
        "item_ids",
        "sources",
        "categories",
        "metadata",
    )
    arrays = ("vectors", "alpha", "beta", "value")
    return all(getattr(a, f) == getattr(b, f) for f in plain) and all(
        np.array_equal(getattr(a, f), getattr(b, f)) for f in arrays
    )
