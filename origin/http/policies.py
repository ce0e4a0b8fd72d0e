"""Ranking policies, bearer ``PERSO_ADMIN_TOKEN``: define a named, versioned
configuration, list them, and promote one (``origin.policies``).

    PUT  /v1/admin/policies/{name}           {"exploration_weight": 0.2, ...}: a version
    GET  /v1/admin/policies                  every policy and version, and which is live
    GET  /v1/admin/policies/{name}           one policy's versions
    POST /v1/admin/policies/{name}/promote   {"version": "3"} (none: the newest): live

A definition whose configuration is the name's newest version already answers 200 with
that version; a changed one is the next version, 201. A bad field or name is a 400 naming
it. ``configured`` is the policy the settings build: defining it is a 409 naming ``name``;
it can be promoted (back).

A promotion is a deployment (``origin.catalog.deployment``): the next epoch, the live
model kept, under the global ``model-deployment`` lock and through the fenced pointer, and
announced to every region (``ModelEpoch`` with the policy), where every edge switches as
it reads it; this origin switches at once, the others within ``PERSO_POLICY_POLL_S``. A
roll-back is the same call naming the older policy or version. Another deployment in
progress is a 409, nothing written.

    {"epoch": 4, "policy": "ranker-b/2", "previous": "configured/1",
     "model_version": "ranker-2026-05-01", "seq": 1843, "regions": [...], "latency_ms": 2.1}
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field
from redis.exceptions import RedisError
from starlette.responses import Response

from origin.http.deployments import deployment_errors
from origin.http.inputs import JsonBody, OriginOf
from origin.policies.registry import name_problem
from protocol.api import Flag, Number
from protocol.exceptions import ApiError, MalformedMessage
from protocol.policies import (
    BOUNDS,
    DEFAULT_CONFIG,
    LIVE_POLICY_PATH,
    NAME_PATTERN,
    Policy,
    config_of,
    encode_live,
)
from web.openapi import declared
from web.responses import elapsed_ms, json_response

policies_router = APIRouter()

PolicyName = Annotated[str, Path(pattern=NAME_PATTERN.pattern)]


def _bounded(name: str) -> float:
    low, high = BOUNDS[name]
    bounded: float = Field(default=getattr(DEFAULT_CONFIG, name), ge=low, le=high)
    return bounded


class PolicyRequest(BaseModel):
    """A policy's configuration (``protocol.policies.PolicyConfig``); a knob left out is at
    its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["ranker", "random", "popular"] = "ranker"
    exploration_weight: Number = _bounded("exploration_weight")
    diversity_weight: Number = _bounded("diversity_weight")
    emotion_rules: Flag = DEFAULT_CONFIG.emotion_rules
    user_prior_scale: Number = _bounded("user_prior_scale")


class PromoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # None: the newest version.
    version: str | None = Field(default=None, min_length=1, max_length=64)


class PolicyAnswer(BaseModel):
    name: str
    version: str
    label: str
    kind: str
    exploration_weight: float
    diversity_weight: float
    emotion_rules: bool
    user_prior_scale: float
    live: bool


class PoliciesAnswer(BaseModel):
    live: str
    epoch: int
    policies: list[PolicyAnswer]


class PromoteAnswer(BaseModel):
    epoch: int
    policy: str
    previous: str
    model_version: str
    seq: int
    regions: list[str]
    latency_ms: float


def _answer(policy: Policy, live: Policy) -> PolicyAnswer:
    config = policy.config
    return PolicyAnswer(
        name=policy.name,
        version=policy.version,
        label=policy.label,
        kind=config.kind,
        exploration_weight=config.exploration_weight,
        diversity_weight=config.diversity_weight,
        emotion_rules=config.emotion_rules,
        user_prior_scale=config.user_prior_scale,
        live=policy.label == live.label,
    )


def _unavailable(exc: Exception) -> ApiError:
    return ApiError(503, "unavailable", f"policies not read or written: {exc}", retry_after_s=1)


@policies_router.put(
    "/v1/admin/policies/{name}",
    response_class=Response,
    responses={
        200: {"model": PolicyAnswer, "description": "The newest version is this already"},
        201: {"model": PolicyAnswer, "description": "Stored as the next version"},
        **declared(409, 503),
    },
)
async def define(
    name: PolicyName,
    body: Annotated[PolicyRequest, JsonBody.of(PolicyRequest)],
    origin: OriginOf,
) -> Response:
    problem = name_problem(name)
    if problem is not None:
        # The path's pattern already refused a malformed name: this one is taken by the
        # settings' policy, a conflict rather than a bad request.
        raise ApiError(409, "conflict", f"name {problem}", field="name")
    try:
        config = config_of(body.model_dump())
    except MalformedMessage as exc:  # the request's bounds are these; kept in step
        raise ApiError(400, "invalid_request", str(exc), field="body") from exc
    try:
        policy, created = await origin.policies.define(name, config)
        live = await origin.read_policy()
    except RedisError as exc:
        raise _unavailable(exc) from exc
    return json_response(_answer(policy, live), status=201 if created else 200)


class LivePolicyAnswer(BaseModel):
    """``GET /v1/internal/policy`` (``protocol.policies.encode_live``)."""

    epoch: int = Field(ge=0, description="the deployment epoch that made it live; 0: none")
    policy: dict[str, object] = Field(
        description="the policy: name, version and configuration (protocol.policies)"
    )


@policies_router.get(
    LIVE_POLICY_PATH,
    response_class=Response,
    responses={200: {"model": LivePolicyAnswer}},
)
async def live_policy(origin: OriginOf) -> Response:
    """The policy this origin ranks by now and its epoch, for an edge (service token): one
    that starts after a promotion ranks by it from its first request. The deployment
    pointer is read first (a failed read answers the policy held)."""
    policy = await origin.read_policy()
    return Response(encode_live(origin.live.epoch, policy), media_type="application/json")


@policies_router.get(
    "/v1/admin/policies",
    response_class=Response,
    responses={200: {"model": PoliciesAnswer}, **declared(503)},
)
async def list_policies(origin: OriginOf) -> Response:
    try:
        live = await origin.read_policy()
        every = [
            p
            for name in await origin.policies.names()
            for p in await origin.policies.versions(name)
        ]
    except RedisError as exc:
        raise _unavailable(exc) from exc
    answer = PoliciesAnswer(
        live=live.label, epoch=origin.live.epoch, policies=[_answer(p, live) for p in every]
    )
    return json_response(answer)


@policies_router.get(
    "/v1/admin/policies/{name}",
    response_class=Response,
    responses={200: {"model": PoliciesAnswer}, **declared(404, 503)},
)
async def policy_versions(name: PolicyName, origin: OriginOf) -> Response:
    try:
        live = await origin.read_policy()
        versions = await origin.policies.versions(name)
    except RedisError as exc:
        raise _unavailable(exc) from exc
    if not versions:
        raise ApiError(404, "not_found", f"no policy named {name!r}", field="name")
    answer = PoliciesAnswer(
        live=live.label, epoch=origin.live.epoch, policies=[_answer(p, live) for p in versions]
    )
    return json_response(answer)


@policies_router.post(
    "/v1/admin/policies/{name}/promote",
    response_class=Response,
    responses={200: {"model": PromoteAnswer}, **declared(404, 409, 503)},
)
async def promote(
    name: PolicyName,
    body: Annotated[PromoteRequest, JsonBody.of(PromoteRequest, optional=True)],
    origin: OriginOf,
) -> Response:
    """``name`` (version ``body.version``, else its newest) live everywhere, as the next
    deployment epoch; a 409 when another deployment holds the lock."""
    started = time.perf_counter()
    try:
        policy = await origin.policies.get(name, body.version)
    except RedisError as exc:
        raise _unavailable(exc) from exc
    if policy is None:
        if body.version is None or not await origin.policies.versions(name):
            raise ApiError(404, "not_found", f"no policy named {name!r}", field="name")
        raise ApiError(
            404, "not_found", f"policy {name!r} has no version {body.version!r}", field="version"
        )
    with deployment_errors():
        deployment, replaced = await origin.deployments.promote(
            policy, model_version=origin.settings.model_version
        )
    assert deployment.seq is not None
    origin.switch(deployment)
    previous = replaced.policy if replaced is not None else None
    answer = PromoteAnswer(
        epoch=deployment.epoch,
        policy=policy.label,
        previous=(previous or origin.policies.configured).label,
        model_version=deployment.model_version,
        seq=deployment.seq,
        regions=list(origin.publisher.regions),
        latency_ms=elapsed_ms(started),
    )
    return json_response(answer)
