"""What a route handler of the origin takes from its request: the running origin, and its
body parsed.

A body is read only once ``origin.http.auth.Access`` has let the caller in, and parsed by
``web.request_body`` (strict JSON, a 400 naming every field) with the origin's own
clock in the validation context, so that client times are judged against the clock the
origin was built with, not the wall clock. Handlers declare what they take:

    async def feedback(body: Annotated[FeedbackRequest, JsonBody.of(FeedbackRequest)],
                       origin: OriginOf) -> Response: ...

``origin.http.openapi`` finds the ``JsonBody`` of each route and describes its body from it.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from fastapi import Depends, Request
from pydantic import BaseModel, TypeAdapter

from origin.runtime import Origin
from protocol.exceptions import ApiError
from web.request_body import is_json, parse_json

T = TypeVar("T")


async def origin_of(request: Request) -> Origin:
    """The app's origin (``async``: FastAPI calls it on the event loop, not in a thread)."""
    origin: Origin = request.app.state.origin
    return origin


# Route parameter: ``origin: OriginOf``.
OriginOf = Annotated[Origin, Depends(origin_of)]


class JsonBody(Generic[T]):
    """A dependency: the request's body as ``shape``, named ``name`` in the API's
    description (a model's own name by default); ``optional``: no body at all is read as
    ``{}``."""

    def __init__(self, shape: TypeAdapter[T], name: str, *, optional: bool = False) -> None:
        self.shape = shape
        self.name = name
        self.optional = optional

    @classmethod
    def of(cls, model: type[BaseModel], *, optional: bool = False) -> Any:
        """``Depends`` on the body as ``model``."""
        adapter: TypeAdapter[BaseModel] = TypeAdapter(model)
        return JsonBody(adapter, model.__name__, optional=optional).depends()

    def depends(self) -> Any:
        return Depends(self)

    async def __call__(self, request: Request) -> T:
        origin: Origin = request.app.state.origin
        if self.optional and not await request.body():
            return parse_json(self.shape, b"{}", now=origin.clock())
        # Only JSON, as FastAPI would: a browser cannot send that across origins unasked.
        if not is_json(request.headers.get("content-type")):
            raise ApiError(
                400,
                "invalid_request",
                "expected a JSON object, sent with content-type: application/json",
                field="body",
            )
        return parse_json(self.shape, await request.body(), now=origin.clock())
