from __future__ import annotations

import pytest

from invalidation.rules import (
    Event,
    Feedback,
    ItemChange,
    ItemRemoved,
    ModelDeployed,
    PreferenceChange,
    SegmentChanged,
    messages_for,
)
from protocol.segments import Segment
from sync.messages import (
    InvalidateSegment,
    InvalidateUser,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
)


@pytest.mark.parametrize(
    ("event", "messages"),
    [
        (Feedback("u", "purchase"), [InvalidateUser("u", reason="purchase")]),
        (Feedback("u", "click"), []),
        (Feedback("u", "view"), []),
        (Feedback("u", "add_to_cart"), []),
        (Feedback("u", "dismiss"), []),
        (PreferenceChange("u"), [InvalidateUser("u", reason="preference")]),
        (ItemChange("it-1", True, False, 10.0, 10.0), [PurgeTag("it-1", soft=False)]),
        (ItemChange("it-1", True, True, 10.0, 12.0), [PurgeTag("it-1", soft=False)]),
        (ItemChange("it-1", False, False, 10.0, 8.0), [PurgeTag("it-1", soft=False)]),
        (ItemChange("it-1", False, True, 10.0, 10.0), []),  # back in stock: next fill
        (ItemChange("it-1", True, True, 10.0, 10.0), []),
        (ItemRemoved("it-1"), [ItemUpdate("it-1", in_stock=False, price=None, removed=True)]),
        (ModelDeployed(7, "nn-2"), [ModelEpoch(7, "nn-2")]),
        (SegmentChanged(Segment.CASUAL), [InvalidateSegment("casual")]),
    ],
)
def test_rules(event: Event, messages: list[Message]) -> None:
    assert messages_for(event) == messages
