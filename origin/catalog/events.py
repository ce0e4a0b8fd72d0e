"""What a catalog write changed that edges must hear about (``invalidation.rules``).

An updated item that went out of stock or changed price has answers cached at the edges
showing it as it was; the ingest turns the difference between the served index and the
written items into ``ItemChange`` events. New items change no cached answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from invalidation.rules import ItemChange
from origin.catalog.item_index import ItemIndex
from origin.catalog.items import Availability, Item


def item_changes(before: ItemIndex, written: Sequence[Item]) -> list[ItemChange]:
    changes = []
    for item in written:
        row = before.row_of.get(item.item_id)
        if row is None:
            continue
        changes.append(
            ItemChange(
                item.item_id,
                was_in_stock=bool(before.in_stock[row]),
                in_stock=item.availability != Availability.OUT_OF_STOCK,
                old_price=float(before.price[row]),
                new_price=item.price,
            )
        )
    return changes
