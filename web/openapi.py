"""What edge and origin publish at ``/openapi.json`` beyond what FastAPI derives.

FastAPI describes the routes it validates. It cannot know our error body and its statuses
(it declares 422 with its own body where we answer 400 with ours), the 401 and 413 that
middleware answers before any route runs, the security schemes, nor bodies that a route
parses itself. The pieces here let each service complete its document once, when it is
first asked for (``publish``), so that the document is what the service does; a
schemathesis run over both documents (``tests/contract``) holds them to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, TypeAdapter

Spec = dict[str, Any]

COMPONENTS = "#/components/schemas/"


class FieldProblem(BaseModel):
    field: str
    reason: str


class ErrorBody(BaseModel):
    """The body of every error (``web.problems``): ``field`` and ``reason`` name the
    first problem, ``errors`` (400s) lists every one."""

    error: str
    field: str | None
    reason: str
    errors: list[FieldProblem] | None = None


RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before retrying",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}

# What each error status means, wherever it is declared.
ERRORS: dict[int, str] = {
    400: "Invalid input: unknown field, wrong type, out-of-range value, body not JSON. "
    "`field` names the first problem, `errors` lists every one.",
    401: "Missing or invalid credentials; checked before the body is read.",
    403: "The body's `user_id` is not the token's user.",
    404: "No such item or resource.",
    409: "Another operation holds what this one needs; nothing was written.",
    412: "Precondition failed: the answer is the one `If-None-Match` names (its `ETag` is "
    "sent); the caller's copy is current.",
    413: "Request body over the service's limit (`field`: `body`).",
    422: "Well-formed but over a limit of the user's state (nothing was written).",
    429: "Over the rate limit, or overloaded.",
    500: "An unexpected error; it has been logged.",
    503: "A dependency is unavailable; nothing was accepted.",
}
# Statuses answered with ``Retry-After`` (not always: some 503s have no wait to give).
WITH_RETRY_AFTER = frozenset({409, 429, 503})


def declared(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's own error statuses, for its decorator: ``responses=declared(409, 503)``."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        response: dict[str, Any] = {"model": ErrorBody, "description": ERRORS[status]}
        if status in WITH_RETRY_AFTER:
            response["headers"] = RETRY_AFTER
        out[status] = response
    return out


def schema_ref(spec: Spec, shape: type[BaseModel] | TypeAdapter[Any], name: str) -> Spec:
    """Put ``shape``'s JSON Schema (as input) into ``spec``'s components as ``name``, with
    the models it uses, and return a reference to it. A component of the same name that
    says something else is an error: two models must not share a name."""
    adapter = shape if isinstance(shape, TypeAdapter) else TypeAdapter(shape)
    schema = standard(adapter.json_schema(mode="validation", ref_template=COMPONENTS + "{model}"))
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    for def_name, definition in {**schema.pop("$defs", {}), name: schema}.items():
        known = components.setdefault(def_name, definition)
        if _without_defaults(known) != _without_defaults(definition):
            raise ValueError(f"two different schemas named {def_name!r} in the API document")
    return {"$ref": COMPONENTS + name}


# pydantic writes a bound of an optional field whose type has a before-validator (our
# ``Integer``) under its own name (``{"ge": 0}``), which JSON Schema does not know.
_KEYWORDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
# Keywords whose value maps names to schemas: their keys are names, not keywords.
_NAMED = frozenset({"properties", "$defs", "patternProperties", "dependentSchemas"})


def standard(schema: Any) -> Any:
    """``schema`` with JSON Schema's names for pydantic's bounds (see ``_KEYWORDS``)."""
    if isinstance(schema, list):
        return [standard(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: standard(sub) for name, sub in value.items()}
        elif isinstance(value, int | float) and key in _KEYWORDS:
            out[_KEYWORDS[key]] = value
        else:
            out[key] = standard(value)
    return out


def _without_defaults(schema: Any) -> Any:
    """``schema`` without its ``default`` keywords (FastAPI leaves out a default of null)."""
    if isinstance(schema, dict):
        return {k: _without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema


def json_content(schema: Spec) -> Spec:
    return {"application/json": {"schema": schema}}


def error_responses(spec: Spec, statuses: Iterable[int]) -> Spec:
    """The responses of these error statuses, each with the error body."""
    error = schema_ref(spec, ErrorBody, "ErrorBody")
    responses: Spec = {}
    for status in statuses:
        response: Spec = {"description": ERRORS[status], "content": json_content(error)}
        if status in WITH_RETRY_AFTER:
            response["headers"] = RETRY_AFTER
        responses[str(status)] = response
    return responses


def operations(spec: Spec) -> Iterable[tuple[str, str, Spec]]:
    """(path, method, operation) of every operation in ``spec``."""
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            if method in ("get", "put", "post", "delete", "patch", "head", "options"):
                yield path, method, operation


def replace_422(spec: Spec, operation: Spec) -> None:
    """FastAPI's 422 (its validation error) becomes our 400: that is what we answer."""
    responses = operation.setdefault("responses", {})
    if "422" in responses and "ValidationError" in str(responses["422"]):
        del responses["422"]
        responses.update(error_responses(spec, [400]))


def drop_fastapi_errors(spec: Spec) -> None:
    """FastAPI's validation error schemas, which no answer of ours has."""
    schemas = spec.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)


def publish(app: FastAPI, complete: Callable[[Spec], None]) -> None:
    """``app``'s ``/openapi.json``: FastAPI's document completed by ``complete``, made on
    the first request and kept."""
    made: Spec | None = None
    generate = app.openapi

    def openapi() -> Spec:
        nonlocal made
        if made is None:
            spec = generate()
            complete(spec)
            made = spec
        app.openapi_schema = made
        return made

    app.openapi = openapi  # type: ignore[method-assign]
