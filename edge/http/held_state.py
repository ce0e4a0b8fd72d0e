"""``GET /v1/internal/users/{user_id}/held`` (service token, ``edge.http.access``): what this
edge holds of one user, for operators and benchmarks.

Which version of the user's model it holds (the stream workers' record version, pushed by
the sync stream or fetched from the origin), whether it knows their stated preferences,
and so whether it can rank them itself without asking the origin for their state; whether
it keeps the sync stream's updates of them at all, and the segment it keys them by from
the feedback it saw. Never the model's numbers nor the preferences themselves. Reading it
changes nothing: the user is not made more recently used (``UserModels.peek``).

200 for any valid user id (a user the edge knows nothing of is ``model_version: null``);
400 for an id the API would refuse.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from edge.node import Edge
from protocol.api import Identifier

HELD_PATH = "/v1/internal/users/{user_id}/held"

held_state_router = APIRouter()


class HeldState(BaseModel):
    user_id: str
    region: str
    model_version: int | None = Field(
        description="the version of the user's model this edge holds (the workers' record "
        "version; versions never go back); null: none held"
    )
    preferences_known: bool = Field(
        description="the user's stated preferences were fetched from the origin; with the "
        "model, ranking the user here asks the origin nothing about them (their segment's "
        "pool is another matter)"
    )
    edge_ranking: bool = Field(description="this edge ranks power and active users itself")
    serves: bool = Field(
        description="this edge keeps the sync stream's model updates of the user (it saw "
        "their feedback, or holds their state)"
    )
    seen_segment: str = Field(
        description="the segment from the user's feedback that passed through this edge "
        "(new: none; the token's segment counts then)"
    )


def held_state(edge: Edge, user_id: str) -> HeldState:
    table = edge.user_models
    held = table.peek(user_id) if table is not None else None
    return HeldState(
        user_id=user_id,
        region=edge.region,
        model_version=held.version if held is not None else None,
        preferences_known=held is not None and held.preferences is not None,
        edge_ranking=edge.rank_at_edge and table is not None,
        serves=held is not None or user_id in edge.views,
        seen_segment=edge.views.snapshot(user_id).segment.value,
    )


@held_state_router.get(HELD_PATH)
async def held(user_id: Identifier, request: Request) -> HeldState:
    """What this edge holds of the user (service token)."""
    edge: Edge = request.app.state.edge
    return held_state(edge, user_id)
