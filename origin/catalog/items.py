"""Catalog items: what the origin knows about each item besides its vectors.

An item's metadata travels as a Qdrant payload; ``to_payload``/``from_payload`` are the one
place that maps between the two.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

# Point ids in Qdrant must be integers or UUIDs; item ids are strings, mapped by uuid5.
_POINT_NAMESPACE = uuid.UUID("6f1d3c2e-8a4b-4e59-9a57-1f0c2b7d9e11")


class Availability(StrEnum):
    IN_STOCK = "in_stock"
    LIMITED = "limited"
    OUT_OF_STOCK = "out_of_stock"


@dataclass(frozen=True, slots=True)
class Item:
    item_id: str
    title: str
    category: str  # category id, the filter key: "electronics"
    category_name: str  # what a person reads: "Electronics"
    brand: str
    price: float
    availability: Availability
    popularity: float  # [0, 1], log-rank percentile of demand
    freshness: float  # [0, 1], exp(-age / 90 days) at catalog time
    created_at: int  # epoch seconds
    image_url: str
    modalities: tuple[str, ...]
    # Identifies the catalog build this item came from (see sample_catalog.fingerprint).
    catalog: str
    version: int = 1
    # What kind of thing it is, a ranking feature: physical, media, consumable, apparel,
    # digital (CONTENT_TYPES).
    content_type: str = "physical"
    # How long it takes to consume (the emotion rules' "content_length"): short, medium,
    # long.
    content_length: str = "medium"


CONTENT_TYPES = ("physical", "media", "consumable", "apparel", "digital")
CONTENT_LENGTHS = ("short", "medium", "long")
# ``Item.catalog`` of items ingested through the admin API (origin.catalog.ingest); sample
# builds carry their fingerprint there instead.
EXTERNAL_CATALOG = "external"


def point_id(item_id: str) -> str:
    return str(uuid.uuid5(_POINT_NAMESPACE, item_id))


def to_payload(item: Item) -> dict[str, Any]:
    payload = asdict(item)
    payload["availability"] = item.availability.value
    payload["modalities"] = list(item.modalities)
    return payload


def from_payload(payload: dict[str, Any]) -> Item:
    return Item(
        item_id=str(payload["item_id"]),
        title=str(payload["title"]),
        category=str(payload["category"]),
        category_name=str(payload["category_name"]),
        brand=str(payload["brand"]),
        price=float(payload["price"]),
        availability=Availability(payload["availability"]),
        popularity=float(payload["popularity"]),
        freshness=float(payload["freshness"]),
        created_at=int(payload["created_at"]),
        image_url=str(payload["image_url"]),
        modalities=tuple(payload.get("modalities", ())),
        catalog=str(payload.get("catalog", "")),
        version=int(payload.get("version", 1)),
        content_type=str(payload.get("content_type", "physical")),
        content_length=str(payload.get("content_length", "medium")),
    )
