from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from protocol.api import FeedbackRequest, PersonalizeRequest
from protocol.client_time import NOW
from web.problems import field_path, validation_problems

# The clock of the receiver: client times are checked against it (protocol.client_time).
AT = {NOW: 1_769_682_600.0}  # 2026-01-29T10:30:00Z

VALID = {
    "user_id": "u-1",
    "session_id": "s-1",
    "context": {
        "page_type": "home",
        "placement": "hero",
        "device": "mobile",
        "geo": {"country": "us", "region": "CA", "city": "San Francisco"},
        "timestamp": "2026-01-29T10:30:00Z",
    },
    "constraints": {
        "count": 20,
        "categories": ["electronics"],
        "exclude_items": ["it-1"],
        "price_range": {"min": 10.0, "max": 100.0},
    },
    "options": {"include_explanation": True, "exploration_rate": 0.1, "diversity_weight": 0.3},
}


def test_seed_example_request_is_valid() -> None:
    request = PersonalizeRequest.model_validate(VALID, context=AT)
    assert request.context.geo is not None
    assert request.context.geo.country == "US"  # normalised
    assert request.constraints.count == 20


def test_minimal_request_gets_defaults() -> None:
    request = PersonalizeRequest.model_validate(
        {"user_id": "u", "context": {"page_type": "search", "device": "tv"}},
        context=AT,
    )
    assert request.constraints.count == 20
    assert request.constraints.exclude_items == []
    assert request.options.include_explanation is False
    assert request.context.placement.value == "feed"


def _with(path: str, value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {**VALID, "context": {**VALID["context"]}}
    body["constraints"] = {**VALID["constraints"]}
    body["options"] = {**VALID["options"]}
    node = body
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return body


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("user_id", "", "user_id"),
        ("user_id", "has}brace", "user_id"),  # would break Redis hash tags
        ("user_id", _DELETE, "user_id"),
        ("context.page_type", "landing", "context.page_type"),
        ("context.device", _DELETE, "context.device"),
        ("context.geo", {"country": "USA"}, "context.geo.country"),
        ("constraints.count", 0, "constraints.count"),
        ("constraints.count", 101, "constraints.count"),
        ("constraints.count", "many", "constraints.count"),
        ("constraints.price_range", {"min": -1}, "constraints.price_range.min"),
        ("constraints.exclude_items", ["ok", ""], "constraints.exclude_items[1]"),
        ("options.exploration_rate", 1.5, "options.exploration_rate"),
        ("options.diversity_weight", -0.1, "options.diversity_weight"),
        ("options.explain", True, "options.explain"),  # unknown field: a typo is an error
        ("constraints.price_range", {"min": float("inf")}, "constraints.price_range.min"),
        ("options.exploration_rate", float("nan"), "options.exploration_rate"),
    ],
)
def test_invalid_personalize_requests_name_the_field(path: str, value: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        PersonalizeRequest.model_validate(_with(path, value), context=AT)
    fields = [p["field"] for p in validation_problems(info.value.errors())]
    assert field in fields


def test_a_price_range_with_min_above_max_is_an_empty_range_not_an_error() -> None:
    """The spec cannot say min <= max, so a body with min > max is valid: it means no item."""
    body = _with("constraints.price_range", {"min": 50, "max": 10})
    request = PersonalizeRequest.model_validate(body, context=AT)
    assert request.constraints.price_range is not None
    assert (request.constraints.price_range.min, request.constraints.price_range.max) == (50, 10)


FEEDBACK = {
    "user_id": "u-1",
    "session_id": "s-1",
    "request_id": "r-1",
    "feedback": [
        {
            "item_id": "it-1",
            "action": "click",
            "position": 3,
            "duration_ms": 5000,
            "timestamp": "2026-01-29T10:31:00Z",
            "reward_override": 0.8,
        }
    ],
}


def test_seed_example_feedback_is_valid() -> None:
    request = FeedbackRequest.model_validate(FEEDBACK, context=AT)
    assert request.feedback[0].action.value == "click"


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"item_id": "it-1", "action": "like"}, "feedback[0].action"),
        ({"item_id": "it-1", "action": "view", "position": -1}, "feedback[0].position"),
        (
            {"item_id": "it-1", "action": "view", "reward_override": 2},
            "feedback[0].reward_override",
        ),
        ({"action": "view"}, "feedback[0].item_id"),
        ({"item_id": "it-1", "action": "view", "position": 2**63}, "feedback[0].position"),
        ({"item_id": "it-1", "action": "view", "duration_ms": 2**31}, "feedback[0].duration_ms"),
    ],
)
def test_invalid_feedback_names_the_field(item: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        FeedbackRequest.model_validate({"user_id": "u", "feedback": [item]}, context=AT)
    assert field in [p["field"] for p in validation_problems(info.value.errors())]


def test_feedback_needs_at_least_one_item() -> None:
    with pytest.raises(ValidationError) as info:
        FeedbackRequest.model_validate({"user_id": "u", "feedback": []}, context=AT)
    assert validation_problems(info.value.errors())[0]["field"] == "feedback"


@pytest.mark.parametrize(
    ("loc", "path"),
    [
        (("body", "constraints", "count"), "constraints.count"),
        (("body", "feedback", 0, "action"), "feedback[0].action"),
        (("body",), "body"),
        ((), "body"),
        (("query", "x"), "query.x"),
        (("header", "idempotency-key"), "idempotency-key"),
        (("path", "resource"), "resource"),
    ],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def test_invalid_json_is_reported_as_such() -> None:
    problems = validation_problems(
        [
            {
                "type": "json_invalid",
                "loc": ("body", 1),
                "msg": "JSON decode error",
                "ctx": {"error": "Expecting value"},
            }
        ]
    )
    assert problems == [{"field": "body", "reason": "body is not valid JSON: Expecting value"}]
