"""The edge's explanation cache and key, the origin's scope header as the edge reads it, and
the origin client's explain call against httpx's MockTransport."""

from __future__ import annotations

import httpx
import pytest

from edge.cache.explain_cache import ExplainCache, Usable, explain_key
from edge.origins.answers import explained_segment
from edge.origins.client import OriginClient
from protocol.api import (
    EXPLAIN_SCOPE_HEADER,
    FILL_SCOPE_HEADER,
    SEGMENT_HEADER,
    ExplainRequest,
    ItemExplanation,
    PageType,
)
from protocol.segments import Segment

EXPLANATION = ItemExplanation(headline="h", detailed="d", factors=[], llm_generated=False)


def key(**parts: object) -> str:
    fields: dict[str, object] = {
        "region": "us-east",
        "segment": Segment.NEW,
        "item_id": "it-1",
        "style": "concise",
        "page_type": PageType.ITEM_DETAIL,
    }
    fields.update(parts)
    return explain_key(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "other",
    [
        {"region": "eu-west"},
        {"segment": Segment.CASUAL},
        {"item_id": "it-2"},
        {"style": "detailed"},
        {"page_type": PageType.HOME},
        {"page_type": None},
        # identifiers may hold ":" and "." but not the separator
        {"item_id": "it-1:x"},
    ],
)
def test_every_part_of_the_request_is_in_the_key(other: dict[str, object]) -> None:
    assert key(**other) != key()


def test_the_same_request_has_the_same_key() -> None:
    assert key() == key() == "us-east|new|it-1|concise|item_detail"
    assert key(page_type=None) == "us-east|new|it-1|concise|"


@pytest.mark.parametrize(
    ("at", "expected"),
    [
        (0.0, Usable.FRESH),
        (99.9, Usable.FRESH),
        (100.0, Usable.STALE),
        (149.9, Usable.STALE),
        (150.0, None),
    ],
)
def test_an_entry_is_fresh_then_stale_then_gone(at: float, expected: Usable | None) -> None:
    cache = ExplainCache(ttl_s=100, stale_s=50)
    cache.put("k", "it-1", EXPLANATION, now=1000.0)
    found = cache.get("k", 1000.0 + at)
    assert (found[1] if found else None) is expected
    if expected is None:
        assert len(cache) == 0  # dropped once gone


def test_the_least_recently_used_entry_goes_first() -> None:
    cache = ExplainCache(ttl_s=100, stale_s=0, max_entries=2)
    cache.put("a", "it-a", EXPLANATION, now=0)
    cache.put("b", "it-b", EXPLANATION, now=0)
    assert cache.get("a", 1) is not None  # a is now the more recent
    cache.put("c", "it-c", EXPLANATION, now=1)
    assert [k for k in "abc" if cache.get(k, 2) is not None] == ["a", "c"]
    assert len(cache) == 2


def test_a_refill_replaces_the_entry() -> None:
    cache = ExplainCache(ttl_s=100, stale_s=0)
    cache.put("k", "it-1", EXPLANATION, now=0)
    newer = EXPLANATION.model_copy(update={"headline": "new"})
    cache.put("k", "it-1", newer, now=90)
    found = cache.get("k", 150)
    assert found is not None
    assert found[0].explanation.headline == "new"
    assert found[1] is Usable.FRESH


@pytest.mark.parametrize(
    ("scope", "segment"),
    [
        ("segment:new", Segment.NEW),
        ("segment:casual", Segment.CASUAL),
        ("segment:active", Segment.ACTIVE),
        ("segment", None),
        ("segment:", None),
        ("segment:unknown", None),
        ("user:new", None),
        ("", None),
        (None, None),
    ],
)
def test_explained_segment(scope: str | None, segment: Segment | None) -> None:
    assert explained_segment(scope) is segment


@pytest.mark.parametrize(
    ("fill_for", "sent"),
    [
        (Segment.CASUAL, {FILL_SCOPE_HEADER: "segment", SEGMENT_HEADER: "casual"}),
        (None, {}),
    ],
)
async def test_explain_sends_the_fill_headers_and_reads_the_scope(
    fill_for: Segment | None, sent: dict[str, str]
) -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = {"item_id": "it-1", "explanation": EXPLANATION.model_dump(), "latency_ms": 3.0}
        scope = {EXPLAIN_SCOPE_HEADER: "segment:casual"} if fill_for else {}
        return httpx.Response(200, json=answer, headers=scope)

    origin = OriginClient("http://origin", timeout_s=1.0, transport=httpx.MockTransport(handle))
    request = ExplainRequest.model_validate({"user_id": "u", "item_id": "it-1"})
    explained = await origin.explain(request, fill_for=fill_for)
    await origin.aclose()
    (call,) = seen
    assert call.url.path == "/v1/explain"
    assert {
        k: call.headers[k] for k in (FILL_SCOPE_HEADER, SEGMENT_HEADER) if k in call.headers
    } == sent
    assert explained.segment is fill_for
    assert explained.answer.explanation == EXPLANATION


def test_dropping_an_item_forgets_every_explanation_of_it_and_only_those() -> None:
    cache = ExplainCache(ttl_s=60, stale_s=60)
    for k, item_id in (
        (key(), "it-1"),
        (key(style="detailed"), "it-1"),
        (key(item_id="it-2"), "it-2"),
    ):
        cache.put(k, item_id, EXPLANATION, now=0.0)
    assert cache.drop_item("it-1") == 2
    assert cache.get(key(), 1.0) is None
    assert cache.get(key(item_id="it-2"), 1.0) is not None
    assert cache.drop_item("it-9") == 0
