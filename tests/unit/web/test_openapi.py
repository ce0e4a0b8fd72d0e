"""The API documents both services publish: what FastAPI cannot derive is there, and what
is not true is not (issue 15 item 7). The contract run (tests/contract) holds the running
services to them; these check the documents themselves."""

from __future__ import annotations

from typing import Any

import pytest

from config.settings import Settings
from edge.app import create_app as create_edge
from origin.app import create_app as create_origin
from origin.catalog.snapshot import ITEMS_PATH, MEDIA_TYPE, SNAPSHOT_PATH
from origin.http.auth import Credential, credential_for
from protocol.api import FILL_SCOPE_HEADER, SEGMENT_SCOPE
from protocol.pools import POOL_MEDIA_TYPE, POOLS_PATH
from tests.credentials import IDENTITY_KEY
from web.openapi import operations, standard


def settings() -> Settings:
    return Settings(redis_url="redis://127.0.0.1:1", identity_keys=IDENTITY_KEY)


@pytest.fixture(scope="module")
def origin_spec() -> dict[str, Any]:
    spec: dict[str, Any] = create_origin(settings()).openapi()
    return spec


@pytest.fixture(scope="module")
def edge_spec() -> dict[str, Any]:
    spec: dict[str, Any] = create_edge(settings(), region="us-east").fastapi.openapi()
    return spec


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"ge": 0, "le": 9, "type": "integer"}, {"minimum": 0, "maximum": 9, "type": "integer"}),
        ({"gt": 0, "lt": 1}, {"exclusiveMinimum": 0, "exclusiveMaximum": 1}),
        # property names are names, not keywords
        ({"properties": {"ge": {"type": "string"}}}, {"properties": {"ge": {"type": "string"}}}),
        ({"anyOf": [{"ge": 1}, {"type": "null"}]}, {"anyOf": [{"minimum": 1}, {"type": "null"}]}),
        ({"minimum": 3}, {"minimum": 3}),
    ],
)
def test_pydantic_bounds_get_their_json_schema_names(
    schema: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert standard(schema) == expected


def test_no_422_anywhere_our_400_instead(origin_spec: dict[str, Any]) -> None:
    for path, method, operation in operations(origin_spec):
        responses = operation["responses"]
        if path == "/v1/preferences":  # the one real 422: over the per-user cap, our body
            error = responses["422"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/ErrorBody"}
            continue
        assert "422" not in responses, (method, path)
    schemas = origin_spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert "ValidationError" not in schemas


def test_every_origin_operation_declares_the_credential_it_is_checked_for(
    origin_spec: dict[str, Any],
) -> None:
    scheme_of = {
        Credential.SERVICE: "ServiceToken",
        Credential.ADMIN: "AdminToken",
        Credential.API_KEY: "ApiKey",
    }
    schemes = origin_spec["components"]["securitySchemes"]
    assert schemes["ApiKey"] == {**schemes["ApiKey"], "in": "header", "name": "x-api-key"}
    for path, method, operation in operations(origin_spec):
        credential = credential_for(path)
        if credential is Credential.NONE:
            assert operation["security"] == [], path
        else:
            assert operation["security"] == [{scheme_of[credential]: []}], (method, path)
            assert "401" in operation["responses"], (method, path)


# Actions named by their path alone: they read no body.
NO_BODY = frozenset(
    {
        "/v1/admin/catalog/rebuild",
        "/v1/admin/services/{name}/revoke",
        "/v1/admin/services/{name}/restore",
    }
)


def test_every_body_is_described_with_its_400_and_413(
    origin_spec: dict[str, Any], edge_spec: dict[str, Any]
) -> None:
    posts = 0
    for spec in (origin_spec, edge_spec):
        for path, method, operation in operations(spec):
            if method != "post" or path in NO_BODY:
                continue
            posts += 1
            body = operation["requestBody"]["content"]["application/json"]["schema"]
            assert body["$ref"].startswith("#/components/schemas/"), path
            name = body["$ref"].rsplit("/", 1)[1]
            assert name in spec["components"]["schemas"], (path, name)
            for status in ("400", "413"):
                error = operation["responses"][status]["content"]["application/json"]
                assert error["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
    assert posts == 15 + 3


def test_the_policies_are_described(origin_spec: dict[str, Any]) -> None:
    paths = origin_spec["paths"]
    define = paths["/v1/admin/policies/{name}"]["put"]
    assert define["requestBody"]["required"] is True
    assert {"200", "201", "400", "401", "409"} <= set(define["responses"])
    promote = paths["/v1/admin/policies/{name}/promote"]["post"]
    # No body at all promotes the newest version.
    assert promote["requestBody"]["required"] is False
    assert {"200", "404", "409"} <= set(promote["responses"])
    schema = origin_spec["components"]["schemas"]["PolicyRequest"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["kind"]["enum"] == ["ranker", "random", "popular"]


def test_the_catalog_deletes_are_described(origin_spec: dict[str, Any]) -> None:
    schemas = origin_spec["components"]["schemas"]
    ids = schemas["DeleteItems"]["properties"]["item_ids"]
    assert (ids["minItems"], ids["maxItems"]) == (1, 1000)
    one = origin_spec["paths"]["/v1/admin/catalog/items/{item_id}"]["delete"]
    many = origin_spec["paths"]["/v1/admin/catalog/items:delete"]["post"]
    for operation in (one, many):
        assert {"200", "400", "401", "409", "503"} <= set(operation["responses"])
        answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert answer == {"$ref": "#/components/schemas/DeleteResponse"}
        assert operation["security"] == [{"AdminToken": []}]


def test_the_catalog_replicas_routes_are_described(origin_spec: dict[str, Any]) -> None:
    everything = origin_spec["paths"][SNAPSHOT_PATH]["get"]
    some = origin_spec["paths"][ITEMS_PATH]["post"]
    for operation in (everything, some):
        assert {"200", "401"} <= set(operation["responses"])
        answer = operation["responses"]["200"]["content"]
        assert answer == {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}
        assert operation["security"] == [{"ServiceToken": []}]
    body = some["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/CatalogItemsRequest"}
    ids = origin_spec["components"]["schemas"]["CatalogItemsRequest"]["properties"]["item_ids"]
    assert (ids["minItems"], ids["maxItems"]) == (1, 1000)


def test_the_pool_fill_is_described(origin_spec: dict[str, Any]) -> None:
    operation = origin_spec["paths"][POOLS_PATH]["post"]
    assert {"200", "400", "401", "413", "503"} <= set(operation["responses"])
    answer = operation["responses"]["200"]["content"]
    assert answer == {POOL_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}}
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/PersonalizeRequest"}
    assert operation["security"] == [{"ServiceToken": []}]
    (scope,) = operation["parameters"]
    assert (scope["name"], scope["in"], scope["required"]) == (FILL_SCOPE_HEADER, "header", True)
    assert scope["schema"]["enum"] == [SEGMENT_SCOPE]


def test_the_catalog_items_body_is_described(origin_spec: dict[str, Any]) -> None:
    schemas = origin_spec["components"]["schemas"]
    items = schemas["CatalogItems"]
    assert items["type"] == "array"
    assert (items["minItems"], items["maxItems"]) == (1, 1000)
    assert items["items"] == {"$ref": "#/components/schemas/CatalogItemIn"}


def test_the_edge_documents_the_routes_it_serves_without_fastapi(
    edge_spec: dict[str, Any],
) -> None:
    paths = edge_spec["paths"]
    for path, answer in [
        ("/v1/personalize", "PersonalizeResponse"),
        ("/v1/feedback", "FeedbackResponse"),
        ("/v1/explain", "ExplainResponse"),
    ]:
        operation = paths[path]["post"]
        assert operation["security"] == [{"UserToken": []}]
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": f"#/components/schemas/{answer}"}
        assert {"400", "401", "403", "413", "429", "503"} <= set(operation["responses"])
    assert edge_spec["components"]["securitySchemes"]["UserToken"]["scheme"] == "bearer"
    assert "ETag" in paths["/v1/personalize"]["post"]["responses"]["200"]["headers"]


def test_numbers_are_numbers_in_the_documents(origin_spec: dict[str, Any]) -> None:
    schemas = origin_spec["components"]["schemas"]
    assert schemas["Constraints"]["properties"]["count"]["type"] == "integer"
    position = schemas["FeedbackItem"]["properties"]["position"]["anyOf"][0]
    assert position == {"minimum": 0, "maximum": 2**31 - 1, "type": "integer"}
