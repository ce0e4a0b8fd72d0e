"""Request and response bodies of the HTTP API contract.

Edge and origin serve the same contract; the edge fills ``metadata.tier`` (who ranked)
and ``metadata.cache_hit``. Identifiers are restricted to a safe alphabet because they end up in
Redis keys and hash tags (a ``}`` in a user id would move the key to another slot).
Requests reject unknown fields so that a misspelt option is a 400, not silently ignored,
and take numbers and booleans only as JSON numbers and booleans (``Number``, ``Integer``,
``Flag``): what the published JSON Schema says (an integer is a number without a
fraction, ``98.0`` too), where pydantic's lax mode would also take ``true`` for a number
and ``"1"`` for an integer.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationInfo,
)

from protocol import client_time

Identifier = Annotated[
    str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")
]
CategoryId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
CountryCode = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z]{2}$", to_upper=True, min_length=2, max_length=2)
]


def _integral(value: object) -> object:
    """JSON Schema's integer: any number without a fraction, ``98.0`` as well as ``98``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# JSON numbers and booleans only: no ``true`` for 1, no ``"1"``, no 1.5 for an integer.
Number = Annotated[float, Strict()]
Integer = Annotated[int, Strict(), BeforeValidator(_integral)]
Flag = Annotated[bool, Strict()]


def _believable(moment: datetime, info: ValidationInfo) -> datetime:
    return client_time.check(moment, client_time.now_of(info.context))


# A client's clock reading, within ``protocol.client_time``'s window around the receiver's.
ClientTime = Annotated[
    datetime,
    AfterValidator(_believable),
    Field(
        description="ISO 8601; without a zone it is UTC. Must be within the last 30 days and "
        "at most a day ahead of the server's clock, with a UTC offset within +-14:00."
    ),
]

MAX_COUNT = 100
INT32_MAX = 2**31 - 1  # bounds integers that travel in events (msgpack, Redis)
MAX_EXCLUDE = 500
MAX_FEEDBACK_ITEMS = 100


class PageType(StrEnum):
    HOME = "home"
    SEARCH = "search"
    CATEGORY = "category"
    ITEM_DETAIL = "item_detail"


class Placement(StrEnum):
    HERO = "hero"
    FEED = "feed"
    SIDEBAR = "sidebar"
    RELATED = "related"


class Device(StrEnum):
    MOBILE = "mobile"
    DESKTOP = "desktop"
    TABLET = "tablet"
    TV = "tv"


class Action(StrEnum):
    VIEW = "view"
    CLICK = "click"
    ADD_TO_CART = "add_to_cart"
    PURCHASE = "purchase"
    DISMISS = "dismiss"


class _Request(BaseModel):
    # Infinity and NaN are not numbers a client means (1e400 parses as inf), and JSON
    # cannot carry them on to the origin: refuse them here.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Geo(_Request):
    country: CountryCode | None = None
    region: Annotated[str, StringConstraints(max_length=64)] | None = None
    city: Annotated[str, StringConstraints(max_length=128)] | None = None


class Context(_Request):
    page_type: PageType
    placement: Placement = Placement.FEED
    device: Device
    geo: Geo | None = None
    timestamp: ClientTime | None = None


class PriceRange(_Request):
    """Items priced from ``min`` to ``max``, both included; ``min`` above ``max`` is an empty
    range (no items), not an error: the spec cannot say otherwise, so neither do we."""

    min: Number | None = Field(default=None, ge=0)
    max: Number | None = Field(default=None, ge=0)


class Constraints(_Request):
    count: Integer = Field(default=20, ge=1, le=MAX_COUNT)
    categories: list[CategoryId] | None = Field(default=None, max_length=50)
    exclude_items: list[Identifier] = Field(default_factory=list, max_length=MAX_EXCLUDE)
    price_range: PriceRange | None = None


class Options(_Request):
    include_explanation: Flag = False
    exploration_rate: Number | None = Field(default=None, ge=0, le=1)
    diversity_weight: Number | None = Field(default=None, ge=0, le=1)


class PersonalizeRequest(_Request):
    user_id: Identifier
    session_id: Identifier | None = None
    context: Context
    constraints: Constraints = Field(default_factory=Constraints)
    options: Options = Field(default_factory=Options)


Source = Literal["collaborative", "content", "trending", "exploration"]
Tier = Literal["edge", "origin", "llm"]
# Who ranked the items of an answer (``ResponseMetadata.ranked_by``).
RankedBy = Literal["edge", "origin"]


class _Response(BaseModel):
    model_config = ConfigDict(frozen=True)


class Explanation(_Response):
    primary_reason: str
    signals: list[str]
    # Not in the HTTP API contract: the emotion rules that fired for the item (their "reasons").
    rules: list[str] = Field(default_factory=list)
    # Fallback generation: false for template and rule-based explanations.
    llm_generated: bool = False


class ItemMetadata(_Response):
    title: str
    category: str
    price: float
    image_url: str


class RankedItem(_Response):
    item_id: str
    rank: int
    score: float
    source: Source
    explanation: Explanation | None = None
    metadata: ItemMetadata


class ResponseMetadata(_Response):
    latency_ms: float
    # Who ranked the answer: ``edge`` when an edge ranked it itself, ``origin`` for the
    # origin's ranking, also when an edge serves it from its cache (``cache_hit``). Not where
    # it came from, as DESIGN.md section 5 has it (``edge`` for any edge cache hit), so that
    # it agrees with ``ranked_by``. The HTTP API contract also lists ``llm``, which nothing
    # serves.
    tier: Tier
    cache_hit: bool
    exploration_applied: bool
    model_version: str
    # Not in the HTTP API contract: the ranking policy that chose the items, ``name/version``
    # (``protocol.policies``); ``popular/...`` for the popular fallback. Empty only in an
    # answer of an origin that predates it.
    policy: str = ""
    # Not in the HTTP API contract; DESIGN.md section 5: a fallback answer "says so in metadata".
    degraded: bool = False
    # Not in the HTTP API contract: the caller is over its rate limit and got a cached or
    # popular answer.
    rate_limited: bool = False
    # Not in the HTTP API contract: who ranked the items, whoever served the answer. The
    # default is what an answer without the field is: the origin's ranking.
    ranked_by: RankedBy = Field(
        default="origin",
        description="Who ranked the items: the edge itself (edge ranking), or the origin, also "
        "when an edge serves the origin's ranking from its cache; the same as tier's edge or "
        "origin.",
    )


class PersonalizeResponse(_Response):
    request_id: str
    user_id: str
    items: list[RankedItem]
    metadata: ResponseMetadata


class FeedbackItem(_Request):
    item_id: Identifier
    action: Action
    position: Integer | None = Field(default=None, ge=0, le=INT32_MAX)
    duration_ms: Integer | None = Field(default=None, ge=0, le=INT32_MAX)
    # Without a time zone it is taken as UTC.
    timestamp: ClientTime | None = None
    reward_override: Number | None = Field(default=None, ge=0, le=1)
    # Not in the HTTP API contract's request, in its data model ("Interaction.interaction_id"): the
    # idempotency key of the interaction. When absent it is derived from the request, so a
    # retried request is recognised as the same interaction.
    interaction_id: Identifier | None = None


class FeedbackRequest(_Request):
    user_id: Identifier
    session_id: Identifier | None = None
    request_id: Identifier | None = None
    feedback: list[FeedbackItem] = Field(min_length=1, max_length=MAX_FEEDBACK_ITEMS)


class FeedbackResponse(_Response):
    # "accepted": durable in the origin's event log; "held": the origin could not take it
    # now, so the edge holds it on its disk and hands it on when it can (HTTP 202).
    status: Literal["accepted", "held"]
    # Every item of the request is durably recorded (new ones appended, retried ones
    # recognised), so a retry answers like the first attempt.
    processed: int
    latency_ms: float


Direction = Literal["positive", "negative"]


class PreferenceRequest(_Request):
    """``POST /v1/preferences`` (the preference signal): the user's explicit
    preference for a catalog category. It replaces what the user said before about that
    category; strength 0 clears it; a negative preference of strength 1 hides the category."""

    user_id: Identifier
    # The example names a category of the sample catalog: what the contract run (schemathesis)
    # sends among its generated ones, so that the operation is seen to succeed.
    category: CategoryId = Field(examples=["electronics"])
    direction: Direction
    strength: Number = Field(ge=0, le=1)


class CategoryPreference(_Response):
    category: str
    direction: Direction
    strength: float


class PreferencesResponse(_Response):
    """The user's preferences after the change, by category name."""

    user_id: str
    preferences: list[CategoryPreference]
    latency_ms: float


# Set by an edge on the origin request that fills a shared cache entry for a coarse segment
# (value "segment"): the origin then answers for the segment, not from that user's
# embedding, so one user's history never shapes what the whole segment is served.
FILL_SCOPE_HEADER = "x-perso-fill-scope"
SEGMENT_SCOPE = "segment"


class TokenRequest(_Request):
    """``POST /v1/auth/token`` (ours, not the HTTP API contract's): a customer's backend,
    with its API key in ``X-API-Key``, asks for a token for one of its users."""

    user_id: Identifier
    ttl_s: Integer | None = Field(default=None, ge=60, le=7 * 86_400)


class DemoTokenRequest(_Request):
    """``POST /v1/demo/token`` of an edge in demo mode (ours, the storefront demo's): the shopper a
    storefront demo wants a user token for; the edge asks the origin with its demo API key."""

    user_id: Identifier


class TokenResponse(BaseModel):
    token: str
    token_type: Literal["Bearer"] = "Bearer"
    user_id: str
    segment: str
    tier: str
    expires_at: datetime


ExplanationStyle = Literal["concise", "detailed", "conversational"]


class ExplainContext(_Request):
    page_type: PageType | None = None
    explanation_style: ExplanationStyle = "concise"


class ExplainRequest(_Request):
    """``POST /v1/explain`` (the explain API): why ``item_id`` suits the user."""

    user_id: Identifier
    item_id: Identifier
    context: ExplainContext = Field(default_factory=ExplainContext)


class ExplanationFactor(_Response):
    factor: str
    weight: float  # in [0, 1]
    description: str


class ItemExplanation(_Response):
    headline: str
    detailed: str
    factors: list[ExplanationFactor]
    # Fallback generation: false for template and rule-based explanations.
    llm_generated: bool


class ExplainResponse(_Response):
    item_id: str
    explanation: ItemExplanation
    latency_ms: float


# Set by the origin on an explain answer that used nothing of the user's but their segment
# (value "segment"): an edge may cache it for the segment (origin.llm's response cache does
# the same at the origin). Any other answer is the user's own and never cached at an edge.
EXPLAIN_SCOPE_HEADER = "x-perso-explain-scope"
# Set by an edge with ``FILL_SCOPE_HEADER`` on an explain fill: the segment it will cache the
# answer under (the user's token's), which the origin then explains for.
SEGMENT_HEADER = "x-perso-segment"
