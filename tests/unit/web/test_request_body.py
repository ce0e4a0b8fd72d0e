"""Request bodies parsed from raw JSON as the published JSON Schema types them, client
times judged against the clock given, every problem named in one 400."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest

from origin.catalog.ingest import CatalogItemIn
from origin.http.purge import PurgeRequest
from protocol.api import FeedbackRequest, PersonalizeRequest, PreferenceRequest, TokenRequest
from protocol.exceptions import ApiError
from web.openapi import schema_ref
from web.request_body import is_json, parse_json

NOW = 1_769_682_600.0  # 2026-01-29T10:30:00Z
CONTEXT = '"context": {"page_type": "home", "device": "mobile"}'


def personalize(extra: str) -> bytes:
    return f'{{"user_id": "u-1", {CONTEXT}, {extra}}}'.encode()


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        # a boolean is not a number, a string is not a number, 1.5 is not an integer
        (personalize('"constraints": {"count": true}'), "constraints.count"),
        (personalize('"constraints": {"count": "5"}'), "constraints.count"),
        (personalize('"constraints": {"count": 5.5}'), "constraints.count"),
        (personalize('"options": {"exploration_rate": false}'), "options.exploration_rate"),
        (personalize('"options": {"exploration_rate": "0.5"}'), "options.exploration_rate"),
        (personalize('"options": {"include_explanation": 1}'), "options.include_explanation"),
        (personalize('"options": {"include_explanation": "true"}'), "options.include_explanation"),
        (
            personalize('"constraints": {"price_range": {"min": true}}'),
            "constraints.price_range.min",
        ),
        (b"[]", "body"),
        (b"{", "body"),
        (b"", "body"),
    ],
)
def test_a_body_the_spec_forbids_is_a_400_naming_the_field(raw: bytes, field: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_json(PersonalizeRequest, raw, now=NOW)
    error = info.value
    assert (error.status, error.field) == (400, field)
    assert error.errors is not None
    assert error.errors[0] == {"field": field, "reason": error.reason}


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (
            FeedbackRequest,
            b'{"user_id": "u", "feedback": [{"item_id": "i", "action": "view", "position": true}]}',
            "feedback[0].position",
        ),
        (
            FeedbackRequest,
            b'{"user_id": "u", "feedback": [{"item_id": "i", "action": "view",'
            b' "reward_override": "1"}]}',
            "feedback[0].reward_override",
        ),
        (
            PreferenceRequest,
            b'{"user_id": "u", "category": "c", "direction": "positive", "strength": true}',
            "strength",
        ),
        (TokenRequest, b'{"user_id": "u", "ttl_s": "600"}', "ttl_s"),
        (PurgeRequest, b'{"tag": "it-1", "soft": "yes"}', "soft"),
        (
            CatalogItemIn,
            b'{"item_id": "i", "version": true, "title": "t", "category": "c", "price": 1}',
            "version",
        ),
        (
            CatalogItemIn,
            b'{"item_id": "i", "version": 1, "title": "t", "category": "c", "price": "1"}',
            "price",
        ),
    ],
)
def test_numbers_and_booleans_are_json_ones_in_every_request(
    model: type[PersonalizeRequest], raw: bytes, field: str
) -> None:
    with pytest.raises(ApiError) as info:
        parse_json(model, raw, now=NOW)
    assert info.value.field == field


@pytest.mark.parametrize(
    "extra",
    [
        '"constraints": {"count": 5, "price_range": {"min": 10, "max": 200.5}}',
        # JSON Schema's integer: a number without a fraction, whatever its spelling
        '"constraints": {"count": 98.0}',
        '"constraints": {"count": 1e1}',
        '"constraints": {"price_range": {"min": 300, "max": 10}}',  # empty range: valid
        '"options": {"exploration_rate": 0, "diversity_weight": 1, "include_explanation": true}',
    ],
)
def test_a_body_the_spec_allows_is_parsed(extra: str) -> None:
    request = parse_json(PersonalizeRequest, personalize(extra), now=NOW)
    assert request.user_id == "u-1"


@pytest.mark.parametrize(
    ("now", "accepted"),
    [
        (NOW, True),
        (NOW + 40 * 86_400, False),  # 40 days later: too old
        (NOW - 2 * 86_400, False),  # 2 days earlier: too far ahead
    ],
)
def test_client_times_are_judged_against_the_clock_given(now: float, accepted: bool) -> None:
    raw = personalize('"constraints": {"count": 1}').replace(
        b'"device": "mobile"', b'"device": "mobile", "timestamp": "2026-01-29T10:00:00Z"'
    )
    if accepted:
        assert parse_json(PersonalizeRequest, raw, now=now).context.timestamp is not None
    else:
        with pytest.raises(ApiError) as info:
            parse_json(PersonalizeRequest, raw, now=now)
        assert info.value.field == "context.timestamp"


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON", True),
        ("application/merge-patch+json", True),
        ("text/plain", False),
        ("application/x-www-form-urlencoded", False),
        ("application/jsonl", False),
        (None, False),
    ],
)
def test_is_json(content_type: str | None, json: bool) -> None:
    assert is_json(content_type) is json


@pytest.mark.parametrize(
    ("raw", "valid"),
    [
        (b'{"tag": "it-1"}', True),
        (b'{"tag": "it-1", "soft": true, "user_id": null}', True),
        (b'{"segment": "casual", "tag": null, "key": null}', True),
        (b'{"tag": "it-1", "user_id": "u"}', False),  # two targets
        (b'{"tag": "it-1", "segment": "power", "soft": true}', False),
        (b'{"tag": null, "user_id": null}', False),  # none
        (b'{"user_id": "u", "soft": true}', False),  # soft purges are by tag
        (b"{}", False),
    ],
)
def test_purge_targets_follow_the_rule_the_document_states(raw: bytes, valid: bool) -> None:
    """The API document states PurgeRequest's one-target rule (oneOf); the model and the
    document agree on every body."""
    spec: dict[str, object] = {}
    schema_ref(spec, PurgeRequest, "PurgeRequest")
    document = {**spec, "$ref": "#/components/schemas/PurgeRequest"}
    by_document = jsonschema_rs.validator_for(document).is_valid(json.loads(raw))
    if valid:
        parse_json(PurgeRequest, raw, now=NOW)
    else:
        with pytest.raises(ApiError):
            parse_json(PurgeRequest, raw, now=NOW)
    assert by_document is valid
