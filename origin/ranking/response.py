"""Turning a ranking into the personalize response body of the HTTP API contract."""

from __future__ import annotations

from origin.catalog.item_index import ItemIndex
from origin.catalog.items import Item
from origin.ranking.pipeline import Ranking
from protocol.api import Explanation, ItemMetadata, RankedItem


def ranked_items(index: ItemIndex, ranking: Ranking, *, explain: bool) -> list[RankedItem]:
    """The response's items in ranking order, ranked from 1, with their catalog metadata; the
    explanation (reason, signals, rules) only when ``explain``."""
    out = []
    for rank, ranked in enumerate(ranking.items, start=1):
        item = index.items[ranked.row]
        out.append(
            RankedItem(
                item_id=item.item_id,
                rank=rank,
                score=ranked.score,
                source=ranked.source,
                explanation=(
                    Explanation(
                        primary_reason=ranked.reason,
                        signals=list(ranked.signals),
                        rules=list(ranked.rules),
                        llm_generated=ranked.llm_generated,
                    )
                    if explain
                    else None
                ),
                metadata=item_metadata(item),
            )
        )
    return out


def item_metadata(item: Item) -> ItemMetadata:
    """What an answer shows of an item besides its rank and score."""
    return ItemMetadata(
        title=item.title,
        category=item.category_name,
        price=item.price,
        image_url=item.image_url,
    )
