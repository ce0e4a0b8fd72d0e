from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from origin.catalog.ingest import (
    CatalogItemIn,
    IngestReport,
    Problem,
    item_problems,
    modality_vectors,
    plan,
    to_item,
)
from origin.catalog.item_vectors import ItemVectors
from origin.catalog.items import EXTERNAL_CATALOG, Availability

DIMS = {"text": 512, "image": 8, "audio": 8, "video": 8}
NOW = 1_800_000_000.0


def item(item_id: str = "sku-1", version: int = 1, **fields: Any) -> CatalogItemIn:
    base: dict[str, Any] = {
        "item_id": item_id,
        "version": version,
        "title": "Wireless Headphones",
        "category": "audio",
        "price": 59.0,
    }
    return CatalogItemIn.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("items", "problems"),
    [
        ([item(image=[0.1] * 8, audio=[1.0] * 8)], []),
        ([item(image=[0.1] * 7)], [Problem("[0].image", "has 7 numbers, image vectors have 8")]),
        ([item(), item("b", text=[0.0] * 512)], [Problem("[1].text", "is all zeros")]),
        ([item("a"), item("b"), item("a", 2)], [Problem("[2].item_id", "repeats the item at [0]")]),
        (
            [item(video=[1.0] * 9, audio=[0.0] * 8)],
            [
                Problem("[0].audio", "is all zeros"),
                Problem("[0].video", "has 9 numbers, video vectors have 8"),
            ],
        ),
    ],
)
def test_item_problems(items: list[CatalogItemIn], problems: list[Problem]) -> None:
    assert item_problems(items, DIMS) == problems


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"price": -1}, ("price",)),
        ({"version": 0}, ("version",)),
        ({"item_id": ""}, ("item_id",)),
        ({"content_type": "food"}, ("content_type",)),
        ({"content_length": "epic"}, ("content_length",)),
        ({"image": [1.0, math.nan]}, ("image", 1)),
        ({"text": [math.inf]}, ("text", 0)),
        ({"image": []}, ("image",)),
        ({"colour": "red"}, ("colour",)),
        ({"availability": "maybe"}, ("availability",)),
    ],
)
def test_the_schema_names_the_bad_field(fields: dict[str, Any], where: tuple[object, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        item(**fields)
    assert info.value.errors()[0]["loc"] == where


@pytest.mark.parametrize(
    ("versions", "stored", "written", "report"),
    [
        ([1, 1], {}, ["a", "b"], IngestReport(inserted=2)),
        ([1, 1], {"a": 1, "b": 1}, [], IngestReport(unchanged=2)),
        ([2, 1], {"a": 1, "b": 3}, ["a"], IngestReport(updated=1, skipped=1)),
        ([5, 1], {"b": 1}, ["a"], IngestReport(inserted=1, unchanged=1)),
    ],
)
def test_plan_writes_only_newer_versions(
    versions: list[int], stored: dict[str, int], written: list[str], report: IngestReport
) -> None:
    items = [item(i, v) for i, v in zip(("a", "b"), versions, strict=True)]
    write, counts = plan(items, stored)
    assert [i.item_id for i in write] == written
    assert counts == report


@pytest.mark.parametrize(
    ("fields", "created_at", "freshness"),
    [
        ({}, int(NOW), 1.0),
        ({"created_at": int(NOW - 90 * 86_400)}, int(NOW - 90 * 86_400), round(math.exp(-1), 6)),
        ({"created_at": int(NOW + 5000)}, int(NOW + 5000), 1.0),
        ({"created_at": 0, "freshness": 0.25}, 0, 0.25),
    ],
)
def test_to_item_dates(fields: dict[str, Any], created_at: int, freshness: float) -> None:
    converted = to_item(item(**fields), NOW)
    assert (converted.created_at, converted.freshness) == (created_at, freshness)


def test_to_item_fields() -> None:
    converted = to_item(
        item(
            version=3,
            image=[1.0] * 8,
            content_type="media",
            content_length="long",
            availability="limited",
        ),
        NOW,
    )
    assert converted.catalog == EXTERNAL_CATALOG
    assert converted.category_name == "audio"  # the id when no name is given
    assert converted.modalities == ("text", "image")
    assert (converted.version, converted.content_type, converted.content_length) == (
        3,
        "media",
        "long",
    )
    assert converted.availability is Availability.LIMITED


def test_modality_vectors_encode_missing_text_and_mask_the_rest() -> None:
    vectors = ItemVectors.default(8, "hashing")
    given = [0.5] * 512
    items = [item("a", text=given), item("b", image=[1.0] * 8), item("c")]
    matrices, present = modality_vectors(items, vectors)
    assert set(matrices) == {"text", "image"}  # nobody has audio or video
    assert present["text"].all()
    assert present["image"].tolist() == [False, True, False]
    assert np.array_equal(matrices["text"][0], np.array(given, np.float32))
    assert np.allclose(matrices["text"][1], vectors.encoder.encode(["Wireless Headphones"])[0])
