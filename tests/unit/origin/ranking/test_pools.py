"""A shared fill's pool: which candidates it keeps (optimistic score, value shift, the
answer's items always), in which order, and what it says of each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pytest

from origin.catalog.item_index import ItemIndex
from origin.ranking.pools import build_pool, optimistic_scores
from origin.ranking.retrieval import Candidates, Source
from protocol.api import ItemMetadata
from protocol.pools import decode_pool, encode_pool
from tests.unit.catalogs import make_catalog

DIM = 8


@pytest.fixture(scope="module")
def index() -> ItemIndex:
    return make_catalog(60, 5, DIM).index()


def candidates(rows: Sequence[int], sources: Sequence[Source] | None = None) -> Candidates:
    kinds = sources if sources is not None else [Source.TRENDING] * len(rows)
    return Candidates(np.array(rows, np.intp), np.array([int(s) for s in kinds], np.int8))


def pool_of(
    index: ItemIndex,
    posteriors: Sequence[tuple[float, float]],
    *,
    value: Sequence[float] | None = None,
    answer: Sequence[int] = (),
    size: int = 300,
    weight: float = 1.0,
    sources: Sequence[Source] | None = None,
) -> list[int]:
    """The pool's candidates as positions in ``posteriors`` (candidate k is index row 10+k)."""
    n = len(posteriors)
    rows = [10 + k for k in range(n)]
    built = build_pool(
        index,
        candidates(rows, sources),
        alpha=np.array([a for a, _ in posteriors], np.float64),
        beta=np.array([b for _, b in posteriors], np.float64),
        value=np.array(value if value is not None else [1.0] * n, np.float64),
        answer_rows=[rows[k] for k in answer],
        size=size,
        value_weight=weight,
        context="mobile_evening",
        model_version="nn-test",
        built_ms=1_000,
    )
    return [int(i.removeprefix("it-")) - 10 for i in built.item_ids]


CERTAIN_GOOD = (200.0, 800.0)  # 20 %, certain
CERTAIN_POOR = (20.0, 980.0)  # 2 %, certain
UNKNOWN = (1.0, 1.0)  # anything: optimistic


@pytest.mark.parametrize(
    ("posteriors", "options", "expected"),
    [
        # best first, by mean + 2 sd
        ([CERTAIN_POOR, CERTAIN_GOOD], {}, [1, 0]),
        # an unknown item is optimistic: it beats a certain 20 %
        ([CERTAIN_GOOD, UNKNOWN, CERTAIN_POOR], {}, [1, 0, 2]),
        # the size caps the pool: the best stay
        ([CERTAIN_POOR, CERTAIN_GOOD, UNKNOWN], {"size": 2}, [2, 1]),
        ([CERTAIN_POOR, CERTAIN_GOOD, UNKNOWN], {"size": 1}, [2]),
        # the answer's items are always in, in their place by score
        ([CERTAIN_POOR, CERTAIN_GOOD, UNKNOWN], {"size": 2, "answer": (0,)}, [2, 0]),
        ([CERTAIN_POOR, CERTAIN_GOOD, UNKNOWN], {"size": 2, "answer": (0, 1)}, [1, 0]),
        # an item worth four clicks per engagement outranks its equal worth one
        ([CERTAIN_POOR, CERTAIN_POOR], {"size": 1, "value": [1.0, 4.0]}, [1]),
        # ... unless values do not count (weight 0): equals keep their retrieval order
        ([CERTAIN_POOR, CERTAIN_POOR], {"size": 1, "value": [1.0, 4.0], "weight": 0.0}, [0]),
        # nothing retrieved, nothing pooled
        ([], {}, []),
    ],
)
def test_the_pool_keeps_the_best_by_optimistic_score(
    index: ItemIndex,
    posteriors: list[tuple[float, float]],
    options: dict[str, Any],
    expected: list[int],
) -> None:
    assert pool_of(index, posteriors, **options) == expected


def test_optimistic_scores_are_the_slates_preselection() -> None:
    alpha = np.array([200.0, 1.0, 20.0])
    beta = np.array([800.0, 1.0, 980.0])
    vectors = np.eye(3, DIM, dtype=np.float32)
    plain = optimistic_scores(vectors, alpha, beta, np.ones(3), 1.0)
    assert plain[1] > plain[0] > plain[2]
    valued = optimistic_scores(vectors, alpha, beta, np.array([1.0, 1.0, 4.0]), 1.0)
    assert valued[2] > plain[2]
    assert np.array_equal(valued[:2], plain[:2])


@pytest.mark.parametrize(
    ("source", "named"),
    [
        (Source.COLLABORATIVE, "collaborative"),
        (Source.CONTENT, "content"),
        (Source.TRENDING, "trending"),
        (Source.FRESH, "trending"),
        (Source.LEARNED, "trending"),
        # the edge marks its own exploration; a random pick is a catalog-wide pick here
        (Source.RANDOM, "trending"),
    ],
)
def test_sources_are_named_as_the_api_names_them(
    index: ItemIndex, source: Source, named: str
) -> None:
    built = build_pool(
        index,
        candidates([7], [source]),
        alpha=np.ones(1),
        beta=np.ones(1),
        value=np.ones(1),
        answer_rows=[],
        size=5,
        value_weight=1.0,
        context="desktop_morning",
        model_version="nn-test",
        built_ms=5,
    )
    assert built.sources == (named,)


def test_each_candidate_comes_with_what_an_edge_ranks_and_shows(index: ItemIndex) -> None:
    rows = [3, 17, 42]
    alpha, beta, value = np.array([2.0, 3.0, 4.0]), np.array([50.0, 60.0, 70.0]), np.ones(3)
    built = build_pool(
        index,
        candidates(rows),
        alpha=alpha,
        beta=beta,
        value=value * np.array([1.0, 2.0, 0.5]),
        answer_rows=[],
        size=300,
        value_weight=0.0,
        context="tablet_night",
        model_version="nn-test",
        built_ms=1234,
    )
    assert (built.context, built.model_version, built.built_ms, built.dim) == (
        "tablet_night",
        "nn-test",
        1234,
        DIM,
    )
    for k, item_id in enumerate(built.item_ids):
        row = index.row_of[item_id]
        c = rows.index(row)
        item = index.items[row]
        assert built.categories[k] == item.category
        assert ItemMetadata.model_validate_json(built.metadata[k]) == ItemMetadata(
            title=item.title,
            category=item.category_name,
            price=item.price,
            image_url=item.image_url,
        )
        assert orjson.loads(built.metadata[k])["category"] == item.category_name
        np.testing.assert_allclose(built.vectors[k], index.vectors[row], atol=1e-3)
        assert (built.alpha[k], built.beta[k]) == (np.float32(alpha[c]), np.float32(beta[c]))
        assert built.value[k] == np.float32([1.0, 2.0, 0.5][c])
    assert encode_pool(decode_pool(encode_pool(built))) == encode_pool(built)


def test_an_empty_pool_still_has_the_catalogs_dimension(index: ItemIndex) -> None:
    built = build_pool(
        index,
        candidates([]),
        alpha=np.ones(0),
        beta=np.ones(0),
        value=np.ones(0),
        answer_rows=[],
        size=300,
        value_weight=1.0,
        context="mobile_evening",
        model_version="nn-test",
        built_ms=0,
    )
    assert (len(built), built.dim) == (0, DIM)
    assert len(decode_pool(encode_pool(built))) == 0
