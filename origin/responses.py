"""Turning a ranking into the response body of seed 001."""

from __future__ import annotations

from origin.item_index import ItemIndex
from origin.ranking import Scored
from protocol.api import Explanation, ItemMetadata, RankedItem


def ranked_items(index: ItemIndex, ranked: list[Scored], *, explain: bool) -> list[RankedItem]:
    out = []
    for rank, scored in enumerate(ranked, start=1):
        item = index.items[scored.row]
        out.append(
            RankedItem(
                item_id=item.item_id,
                rank=rank,
                score=scored.score,
                source=scored.source,
                explanation=(
                    Explanation(primary_reason=scored.reason, signals=list(scored.signals))
                    if explain
                    else None
                ),
                metadata=ItemMetadata(
                    title=item.title,
                    category=item.category_name,
                    price=item.price,
                    image_url=item.image_url,
                ),
            )
        )
    return out
