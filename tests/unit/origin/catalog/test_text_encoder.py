from __future__ import annotations

import numpy as np
import pytest

from origin.catalog.text_encoder import (
    HASHING_DIM,
    MINILM_DIM,
    HashingEncoder,
    TextEncoder,
    hashed_features,
    load_text_encoder,
    minilm_available,
)

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="MiniLM is not installed")


def cosine(encoder: TextEncoder, a: str, b: str) -> float:
    vectors = encoder.encode([a, b])
    return float(vectors[0] @ vectors[1])


@pytest.mark.parametrize(
    ("text", "features"),
    [
        ("", []),
        ("Tea", [("w:tea", 1.0), ("c:<te", 0.3), ("c:tea", 0.3), ("c:ea>", 0.3)]),
        ("a B", [("w:a", 1.0), ("w:b", 1.0), ("b:a b", 0.7), ("c:<a>", 0.3), ("c:<b>", 0.3)]),
    ],
)
def test_hashed_features(text: str, features: list[tuple[str, float]]) -> None:
    assert hashed_features(text) == features


def test_the_fallback_is_deterministic_unit_and_of_its_dimension() -> None:
    titles = ["Voltaic Compact Headphones 482", "Copperleaf Olive Oil", ""]
    a, b = HashingEncoder().encode(titles), HashingEncoder().encode(titles)
    assert np.array_equal(a, b)
    assert a.shape == (3, HASHING_DIM)
    assert a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0, atol=1e-6)
    assert not a[2].any()  # no words, no features
    # fixed across runs and machines: blake2b, not hash()
    assert round(float(a[0] @ a[1]), 6) == round(float(b[0] @ b[1]), 6)


@pytest.mark.parametrize(
    ("title", "similar", "unrelated"),
    [
        ("Voltaic Wireless Headphones", "Nimbus Wireless Headphone", "Copperleaf Olive Oil"),
        ("Paperlark Travel Guide", "Folio House Travel Guides", "Pawsome Dog Bed"),
        ("extra virgin olive oil", "olive oil", "running shoes"),
    ],
)
def test_fallback_similar_titles_are_closer(title: str, similar: str, unrelated: str) -> None:
    encoder = HashingEncoder()
    assert cosine(encoder, title, similar) > cosine(encoder, title, unrelated) + 0.2


@needs_minilm
@pytest.mark.parametrize(
    ("text", "near", "far"),
    [
        ("wireless headphones", "bluetooth earbuds", "olive oil"),
        ("running shoes", "sneakers", "coffee maker"),
        ("cookbook", "recipes for dinner", "power bank"),
    ],
)
def test_the_model_knows_synonyms(text: str, near: str, far: str) -> None:
    encoder = load_text_encoder("minilm")
    assert encoder.dim == MINILM_DIM
    assert cosine(encoder, text, near) > cosine(encoder, text, far) + 0.2


@needs_minilm
def test_the_model_gives_unit_rows_whatever_the_batch() -> None:
    encoder = load_text_encoder("minilm")
    texts = ["a", "a much longer title with many more words than the first one", "olive oil"]
    together = encoder.encode(texts)
    alone = np.concatenate([encoder.encode([t]) for t in texts])
    assert together.shape == (3, MINILM_DIM)
    assert together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    assert np.allclose(together, alone, atol=1e-4)  # padding is masked out
    assert encoder.encode([]).shape == (0, MINILM_DIM)


@pytest.mark.parametrize(
    ("choice", "name"),
    [
        ("hashing", "hashing-v1-512"),
        ("auto", "all-MiniLM-L6-v2-int8" if minilm_available() else "hashing-v1-512"),
    ],
)
def test_selection(choice: str, name: str) -> None:
    assert load_text_encoder(choice).name == name  # type: ignore[arg-type]
