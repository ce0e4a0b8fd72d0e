"""What the origin remembers about a user between requests, in Redis under the user's tag.

- ``u:{id}:ctx``: the latest request context (device, UTC offset, page type, last seen),
  written by ``/v1/personalize``; the feedback path reads it to know in which context
  segment an interaction happened (feedback requests carry no context).
- ``u:{id}:ix``: the last ``INTERACTIONS_KEPT`` interactions (the recent
  interactions), a sorted set by time whose members are a pure function of the
  interaction, so recording a retried request again changes nothing.

Both live ``USER_STATE_TTL_S`` after the user's last activity. Everything derived from them
(segment, session, emotional state, ranking features) is computed by pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
from redis.typing import EncodableT, FieldT

from origin.catalog.item_index import ItemIndex
from protocol import keys
from protocol.api import Device, PageType
from protocol.events import FeedbackEvent
from protocol.exceptions import MalformedMessage
from protocol.segments import Segment, segment_for
from redis_client.client import RedisClient, RedisPipeline

DAY_MS = 86_400_000
_DEVICES = frozenset(d.value for d in Device)
_PAGES = frozenset(p.value for p in PageType)


@dataclass(frozen=True, slots=True)
class Interaction:
    """One interaction as kept in ``u:{id}:ix``: times in ms since the epoch, ``category`` from
    the catalog when it knew the item, ``duration_ms`` and ``position`` as the client
    reported them."""

    interaction_id: str
    item_id: str
    action: str
    timestamp_ms: int
    category: str | None = None
    duration_ms: int | None = None
    position: int | None = None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The context of the user's latest personalize request."""

    device: Device | None = None
    # Offset of the user's clock from UTC, from the last request whose time carried a zone.
    utc_offset_min: int | None = None
    page_type: PageType | None = None
    last_seen_ms: int | None = None


@dataclass(frozen=True)
class RankingHistory:
    """What ``read_history`` finds about a user: the latest request context and the kept
    interactions, newest first. The defaults are a user never seen, or whose read failed."""

    context: RequestContext = field(default_factory=RequestContext)
    # Newest first.
    interactions: tuple[Interaction, ...] = ()

    def interactions_since(self, since_ms: int) -> tuple[Interaction, ...]:
        """The kept interactions at ``since_ms`` or later, newest first; only the newest
        ``INTERACTIONS_KEPT`` are kept, so older ones may be missing."""
        return tuple(i for i in self.interactions if i.timestamp_ms >= since_ms)

    def segment(self, now_ms: int) -> Segment:
        """The user's activity segment at ``now_ms``, from the interactions of the last 24 hours
        (``protocol.segments``); ``new`` only for a user with no interaction kept at all."""
        recent = len(self.interactions_since(now_ms - DAY_MS))
        return segment_for(recent, ever_seen=bool(self.interactions))

    def session(self, now_ms: int, idle_ms: int) -> tuple[Interaction, ...]:
        """The interactions of the current session: newest first, back to the first gap
        longer than ``idle_ms`` (none when the latest is older than that)."""
        session: list[Interaction] = []
        later = now_ms
        for interaction in self.interactions:
            if later - interaction.timestamp_ms > idle_ms:
                break
            session.append(interaction)
            later = interaction.timestamp_ms
        return tuple(session)


def encode_interaction(interaction: Interaction) -> bytes:
    """The msgpack member of ``u:{id}:ix`` for the interaction: short keys, unset optional
    fields left out, so the same interaction always encodes to the same bytes and a
    retried write adds nothing."""
    doc: dict[str, Any] = {
        "i": interaction.interaction_id,
        "it": interaction.item_id,
        "a": interaction.action,
        "t": interaction.timestamp_ms,
    }
    optional = {"c": interaction.category, "d": interaction.duration_ms, "p": interaction.position}
    doc.update({k: v for k, v in optional.items() if v is not None})
    return msgpack.packb(doc, use_bin_type=True)


def decode_interaction(raw: bytes) -> Interaction:
    """The interaction in a stored member; ``MalformedMessage`` if it is not msgpack, lacks a
    required field, or has a category that is not text or a duration or position that is
    not an integer (checked here, or a damaged member would fail every later request)."""
    try:
        doc = msgpack.unpackb(raw, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise MalformedMessage(f"not msgpack: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage("interaction is not a map")
    category, duration, position = doc.get("c"), doc.get("d"), doc.get("p")
    # Checked here, or a damaged field would fail every later request of the user (the
    # emotion signals compare durations with numbers).
    if category is not None and not isinstance(category, str):
        raise MalformedMessage(f"interaction category is not text: {category!r}")
    for name, value in (("duration", duration), ("position", position)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise MalformedMessage(f"interaction {name} is not an integer: {value!r}")
    try:
        return Interaction(
            interaction_id=str(doc["i"]),
            item_id=str(doc["it"]),
            action=str(doc["a"]),
            timestamp_ms=int(doc["t"]),
            category=category,
            duration_ms=duration,
            position=position,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedMessage(f"incomplete interaction: {exc!r}") from exc


def decode_context(fields: dict[bytes, bytes]) -> RequestContext:
    """A stored context; unknown or damaged fields fall back to their defaults."""

    def text(name: bytes) -> str | None:
        value = fields.get(name)
        try:
            return value.decode() if value is not None else None
        except UnicodeDecodeError:
            return None

    def number(name: bytes) -> int | None:
        value = fields.get(name)
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    device = text(b"dev")
    page = text(b"pg")
    return RequestContext(
        device=Device(device) if device is not None and device in _DEVICES else None,
        utc_offset_min=number(b"tz"),
        page_type=PageType(page) if page is not None and page in _PAGES else None,
        last_seen_ms=number(b"ls"),
    )


def decode_history(fields: dict[bytes, bytes], members: Sequence[bytes]) -> RankingHistory:
    """State from the raw replies of ``queue_read``; a damaged interaction is skipped."""
    by_id: dict[str, Interaction] = {}
    for raw in members:
        try:
            interaction = decode_interaction(raw)
        except MalformedMessage:
            continue
        # A retry that described the interaction differently (another duration, say) is
        # a second member of the set: the interaction still counts once, as first seen.
        seen = by_id.get(interaction.interaction_id)
        if seen is None or interaction.timestamp_ms < seen.timestamp_ms:
            by_id[interaction.interaction_id] = interaction
    interactions = sorted(by_id.values(), key=lambda i: i.timestamp_ms, reverse=True)
    return RankingHistory(decode_context(fields), tuple(interactions))


def queue_read(pipe: RedisPipeline, user_id: str) -> None:
    """Queue the two reads whose replies ``decode_history`` takes (context, interactions)."""
    pipe.hgetall(keys.user_context(user_id))
    pipe.zrange(keys.user_interactions(user_id), -keys.INTERACTIONS_KEPT, -1)


def queue_context_write(pipe: RedisPipeline, user_id: str, context: RequestContext) -> None:
    """Queue on ``pipe`` the write of the user's latest request context, renewing its
    ``USER_STATE_TTL_S``. Only the fields ``context`` has are set, so a request without a
    zone keeps the UTC offset of the last one that had it."""
    mapping: dict[FieldT, EncodableT] = {}
    if context.utc_offset_min is not None:
        mapping["tz"] = context.utc_offset_min
    if context.device is not None:
        mapping["dev"] = context.device.value
    if context.page_type is not None:
        mapping["pg"] = context.page_type.value
    if context.last_seen_ms is not None:
        mapping["ls"] = context.last_seen_ms
    key = keys.user_context(user_id)
    pipe.hset(key, mapping=mapping)
    pipe.expire(key, keys.USER_STATE_TTL_S)


def queue_interactions_write(
    pipe: RedisPipeline, user_id: str, interactions: Sequence[Interaction]
) -> None:
    """Record interactions (idempotent) and keep only the newest ``INTERACTIONS_KEPT``."""
    if not interactions:
        return
    key = keys.user_interactions(user_id)
    pipe.zadd(key, {encode_interaction(i): i.timestamp_ms for i in interactions})
    pipe.zremrangebyrank(key, 0, -keys.INTERACTIONS_KEPT - 1)
    pipe.expire(key, keys.USER_STATE_TTL_S)


async def read_history(redis: RedisClient, user_id: str) -> RankingHistory:
    """The user's ranking history in one pipelined round trip (``queue_read``, then
    ``decode_history``): damaged interactions are skipped; a Redis error is the caller's."""
    async with redis.pipeline(transaction=False) as pipe:
        queue_read(pipe, user_id)
        fields, members = await pipe.execute()
    return decode_history(fields, members)


def interactions_of(events: Sequence[FeedbackEvent], index: ItemIndex) -> list[Interaction]:
    """The interactions a feedback request adds to the user's history (the category from
    the catalog when it knows the item)."""
    out = []
    for event in events:
        row = index.row_of.get(event.item_id)
        out.append(
            Interaction(
                interaction_id=event.interaction_id,
                item_id=event.item_id,
                action=event.action,
                timestamp_ms=event.timestamp_ms,
                category=index.items[row].category if row is not None else None,
                duration_ms=event.duration_ms,
                position=event.position,
            )
        )
    return out
