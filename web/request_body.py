"""Request bodies, from raw JSON to their model, alike on edge and origin.

A body is parsed from its bytes (``model_validate_json``), not from ``json.loads``'s output,
so that pydantic's JSON rules apply: the request models are strict, so ``true`` or ``"1"``
where the spec says number is refused (JSON Schema's types, which the specs publish), while
datetimes and enums still come from their strings. Client times are judged against the
receiver's clock, passed in the validation context (``protocol.client_time``), so that an
injected clock (a test's, a replay's) decides, not the wall clock. Anything wrong is one
400 that names every field (``web.problems``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, overload

from pydantic import BaseModel, TypeAdapter, ValidationError

from protocol import client_time
from protocol.exceptions import ApiError
from web.problems import validation_problems

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


@overload
def parse_json(shape: type[M], raw: bytes, *, now: float) -> M: ...


@overload
def parse_json(shape: TypeAdapter[T], raw: bytes, *, now: float) -> T: ...


def parse_json(shape: type[BaseModel] | TypeAdapter[Any], raw: bytes, *, now: float) -> Any:
    """``shape`` (a model, or an adapter for anything else) from the JSON ``raw``, client
    times checked against ``now`` (seconds since the epoch); ``ApiError(400)`` otherwise."""
    context = {client_time.NOW: now}
    try:
        if isinstance(shape, TypeAdapter):
            return shape.validate_json(raw, context=context)
        return shape.model_validate_json(raw, context=context)
    except ValidationError as exc:
        raise invalid_body(exc.errors()) from exc


def is_json(content_type: str | None) -> bool:
    """Does ``content_type`` say JSON (``application/json``, ``application/*+json``)?"""
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def invalid_body(errors: Sequence[Any]) -> ApiError:
    """The 400 of a body with these (pydantic) errors: the first named, all listed."""
    problems = validation_problems(errors)
    first = problems[0]
    return ApiError(400, "invalid_request", first["reason"], field=first["field"], errors=problems)
