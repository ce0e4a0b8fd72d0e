from __future__ import annotations

import dataclasses

from invalidation.rules import ItemChange
from origin.catalog.events import item_changes
from origin.catalog.items import Availability
from tests.unit.catalogs import make_catalog


def test_changes_compare_the_written_items_with_the_served_index() -> None:
    catalog = make_catalog(200, seed=3, dim=8)
    index = catalog.index()
    in_stock = [i for i in catalog.items if i.availability != Availability.OUT_OF_STOCK]
    a, b, c = in_stock[:3]
    written = [
        dataclasses.replace(a, availability=Availability.OUT_OF_STOCK),
        dataclasses.replace(b, price=b.price + 1),
        dataclasses.replace(c, item_id="brand-new"),
    ]
    assert item_changes(index, written) == [
        ItemChange(a.item_id, True, False, a.price, a.price),
        ItemChange(b.item_id, True, True, b.price, b.price + 1),
    ]
