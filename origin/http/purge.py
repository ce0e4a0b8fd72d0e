"""``POST /v1/admin/purge`` (bearer ``PERSO_ADMIN_TOKEN``): invalidate edge entries in
every region, by surrogate tag (an item id), by user, by segment or by cache key; and
``POST /v1/admin/model-epoch``: a new model is live, every edge entry filled before it is
stale (a soft purge: still served while the origin cannot answer).

    {"tag": "it-000042", "soft": false}      every entry showing the item, removed
    {"tag": "it-000042", "soft": true}       the same entries, stale (served only on error)
    {"user_id": "u-42"}                      the user's own entries
    {"segment": "casual"}                    the segment's shared entries
    {"key": "<cache key>"}                   one entry

Exactly one target. The answer comes once the message is in every region's
``edge_sync`` stream (one atomic script: all regions or none), with its origin sequence:

    {"seq": 1842, "regions": ["us-east", "eu-west", "ap-south"], "latency_ms": 0.9}

Edges apply it as soon as their subscriber reads it (``edge.sync_apply``). A 503 means
nothing was published; retrying is safe (a purge applied twice removes nothing more).
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Self

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.responses import Response

from origin.http.deployments import deployment_errors
from origin.http.inputs import JsonBody, OriginOf
from protocol.api import Flag, Identifier
from protocol.exceptions import ApiError
from protocol.segments import Segment
from sync.exceptions import PublishFailed
from sync.messages import (
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    Message,
    PurgeTag,
)
from web.openapi import declared
from web.responses import elapsed_ms, json_response

purge_router = APIRouter()


TARGETS = ("tag", "user_id", "segment", "key")


def _exactly_one_target() -> dict[str, Any]:
    """The rule of ``PurgeRequest._one_target`` in JSON Schema, for the API document: one
    branch per target, that target given and the others absent or null, ``soft`` only in
    the tag's."""
    branches: list[dict[str, Any]] = []
    for target in TARGETS:
        properties: dict[str, Any] = {
            other: {"not": {"type": "null"}} if other == target else {"type": "null"}
            for other in TARGETS
        }
        if target != "tag":
            properties["soft"] = {"const": False}
        branches.append({"required": [target], "properties": properties})
    return {"oneOf": branches}


class PurgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_exactly_one_target())

    tag: Identifier | None = None
    user_id: Identifier | None = None
    segment: Segment | None = None
    key: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    soft: Flag = False

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        targets = [self.tag, self.user_id, self.segment, self.key]
        if sum(t is not None for t in targets) != 1:
            raise ValueError("give exactly one of tag, user_id, segment, key")
        if self.soft and self.tag is None:
            raise ValueError("soft purges are by tag")
        return self

    def message(self) -> Message:
        if self.tag is not None:
            return PurgeTag(self.tag, soft=self.soft)
        if self.user_id is not None:
            return InvalidateUser(self.user_id, reason="admin")
        if self.segment is not None:
            return InvalidateSegment(self.segment.value)
        assert self.key is not None
        return InvalidateKey(self.key)


class EpochRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model_version: Identifier


class EpochResponse(BaseModel):
    epoch: int
    model_version: str
    seq: int
    regions: list[str]
    latency_ms: float


class PurgeResponse(BaseModel):
    seq: int
    regions: list[str]
    latency_ms: float


@purge_router.post(
    "/v1/admin/purge",
    response_class=Response,
    responses={200: {"model": PurgeResponse}, **declared(503)},
)
async def purge(
    body: Annotated[PurgeRequest, JsonBody.of(PurgeRequest)], origin: OriginOf
) -> Response:
    started = time.perf_counter()
    message = body.message()
    try:
        try:
            [seq] = await origin.publisher.publish([message])
        except PublishFailed:  # a connection that died under it (a restarted Redis): once more
            [seq] = await origin.publisher.publish([message])
    except PublishFailed as exc:
        raise ApiError(503, "unavailable", f"not published: {exc}", retry_after_s=1) from exc
    answer = PurgeResponse(
        seq=seq, regions=list(origin.publisher.regions), latency_ms=elapsed_ms(started)
    )
    return json_response(answer)


@purge_router.post(
    "/v1/admin/model-epoch",
    response_class=Response,
    responses={200: {"model": EpochResponse}, **declared(409, 503)},
)
async def model_epoch(
    body: Annotated[EpochRequest, JsonBody.of(EpochRequest)], origin: OriginOf
) -> Response:
    """The next epoch, written under the global deployment lock through a fenced pointer
    and announced to every region (``origin.catalog.deployment``). A deployment already
    running makes this one a 409; nothing is written then."""
    started = time.perf_counter()
    with deployment_errors():
        deployment = await origin.deployments.deploy(body.model_version)
    assert deployment.seq is not None
    origin.switch(deployment)  # the same live policy, at the new epoch
    answer = EpochResponse(
        epoch=deployment.epoch,
        model_version=deployment.model_version,
        seq=deployment.seq,
        regions=list(origin.publisher.regions),
        latency_ms=elapsed_ms(started),
    )
    return json_response(answer)
