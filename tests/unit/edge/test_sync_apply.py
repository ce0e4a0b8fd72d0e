"""What an edge does with each sync message, against the real in-process store."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edge.cache.entry import Entry
from edge.cache.store import MemoryEntryStore
from edge.ranking.live_posteriors import LivePosteriors
from edge.ranking.user_models import UserModels
from edge.sync_apply import Staleness, SyncApplier
from protocol.histogram import LatencyHistogram
from protocol.policies import Policy, PolicyConfig, encode_policy
from protocol.user_model_wire import encode_preferences
from relevance.item_posteriors import PosteriorConfig
from relevance.user_model import UserModel, model_bytes
from sync.messages import (
    CatalogChange,
    Envelope,
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemPosteriors,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
    UserUpdate,
)
from tests.entries import SHARED, K
from tests.fakes import FakeClock

# key -> tags of its entry
ENTRIES = {
    "ann-home": ("it-1", "it-2", "segment:power", "user:ann"),
    "bob-home": ("it-2", "it-3", "segment:active", "user:bob"),
    "casual-home": ("it-1", "it-3", "segment:casual"),
    "new-home": ("it-4", "segment:new"),
}


def entry(tags: tuple[str, ...], now: float, generation: int) -> Entry:
    return Entry(
        audience=SHARED,
        items=(),
        complete=True,
        model_version="m",
        exploration_applied=False,
        expires_at=now + 300,
        filled_at=now,
        stale_until=now + 3600,
        generation=generation,
        tags=tags,
    )


async def filled() -> tuple[MemoryEntryStore, SyncApplier, Staleness, FakeClock]:
    clock = FakeClock()
    store = MemoryEntryStore(max_bytes=10**7, clock=clock)
    for key, tags in ENTRIES.items():
        await store.put(K(key), entry(tags, clock(), store.next_generation()))
    staleness = Staleness()
    clock.tick(1)
    return store, SyncApplier(store, staleness, clock=clock), staleness, clock


def envelope(message: Message, seq: int = 1, published_ms: int = 0) -> Envelope:
    return Envelope(seq=seq, published_at_ms=published_ms, message=message)


@pytest.mark.parametrize(
    ("message", "left"),
    [
        (InvalidateUser("ann", reason="purchase"), {"bob-home", "casual-home", "new-home"}),
        (UserUpdate("bob", version=3), {"ann-home", "casual-home", "new-home"}),
        (InvalidateUser("carol", reason="purchase"), set(ENTRIES)),
        (InvalidateSegment("casual"), {"ann-home", "bob-home", "new-home"}),
        (InvalidateKey("new-home"), {"ann-home", "bob-home", "casual-home"}),
        (PurgeTag("it-1", soft=False), {"bob-home", "new-home"}),
        (PurgeTag("it-9", soft=False), set(ENTRIES)),
        (ItemUpdate("it-3", in_stock=False, price=None), {"ann-home", "new-home"}),
        (ItemUpdate("it-3", in_stock=None, price=12.5), {"ann-home", "new-home"}),
        (ItemUpdate("it-3", in_stock=True, price=None), set(ENTRIES)),
        (ItemUpdate("it-1", in_stock=False, price=None, removed=True), {"bob-home", "new-home"}),
        # removed without in_stock: purged all the same
        (ItemUpdate("it-4", in_stock=None, price=None, removed=True), set(ENTRIES) - {"new-home"}),
        (PurgeTag("it-1", soft=True), set(ENTRIES)),  # soft: kept, but stale
        (ModelEpoch(2, "nn-2"), set(ENTRIES)),
        # for the origins only (never published to a region): an edge that met one anyway
        # would change nothing
        (CatalogChange("o-1", 3, item_ids=("it-1",)), set(ENTRIES)),
    ],
)
async def test_hard_invalidations_remove_exactly_the_tagged_entries(
    message: Message, left: set[str]
) -> None:
    store, applier, _, _ = await filled()
    await applier.apply(envelope(message))
    assert {key for key in ENTRIES if await store.get(K(key)) is not None} == left
    assert applier.counters.applied == 1


@pytest.mark.parametrize(
    ("message", "forgotten"),
    [
        (ItemUpdate("it-1", in_stock=False, price=None, removed=True), ["it-1"]),
        (ItemUpdate("it-1", in_stock=False, price=None), []),
        (PurgeTag("it-1", soft=False), []),
    ],
)
async def test_a_removed_item_is_forgotten_beyond_its_entries(
    message: Message, forgotten: list[str]
) -> None:
    store, _, staleness, clock = await filled()
    seen: list[str] = []
    applier = SyncApplier(store, staleness, clock=clock, forget_item=seen.append)
    await applier.apply(envelope(message))
    assert seen == forgotten


@pytest.mark.parametrize(
    ("message", "stale"),
    [
        (PurgeTag("it-1", soft=True), {"ann-home", "casual-home"}),
        (PurgeTag("it-9", soft=True), set()),
        (ModelEpoch(2, "nn-2"), set(ENTRIES)),
        (InvalidateUser("ann", reason="purchase"), set()),
    ],
)
async def test_soft_purges_make_entries_stale_not_gone(message: Message, stale: set[str]) -> None:
    store, applier, staleness, _ = await filled()
    await applier.apply(envelope(message))
    found = {key: await store.get(K(key)) for key in ENTRIES}
    assert {k for k, e in found.items() if e is not None and staleness.is_stale(e)} == stale


async def test_entries_filled_after_a_soft_purge_are_fresh() -> None:
    store, applier, staleness, clock = await filled()
    await applier.apply(envelope(ModelEpoch(2, "nn-2")))
    clock.tick(1)
    refilled = entry(ENTRIES["new-home"], clock(), store.next_generation())
    assert not staleness.is_stale(refilled)


async def test_an_older_epoch_changes_nothing() -> None:
    _, applier, staleness, clock = await filled()
    await applier.apply(envelope(ModelEpoch(5, "nn-5")))
    moment = staleness.all_before
    clock.tick(10)
    await applier.apply(envelope(ModelEpoch(4, "nn-4")))
    assert (applier.model_epoch, applier.model_version) == (5, "nn-5")
    assert staleness.all_before == moment


async def test_a_gap_makes_everything_stale() -> None:
    store, applier, staleness, _ = await filled()
    await applier.on_gap("trimmed past the cursor")
    assert applier.counters.gaps == 1
    for key in ENTRIES:
        cached = await store.get(K(key))
        assert cached is not None
        assert staleness.is_stale(cached)


def test_soft_tag_purges_are_bounded() -> None:
    staleness = Staleness()
    for n in range(10_005):
        staleness.purge_tag(f"t{n}", float(n))
    assert len(staleness.tags) == 10_000
    assert staleness.all_before == 4.0  # the oldest moments folded into "everything"


@pytest.mark.parametrize(
    ("samples", "buckets"),
    [
        ([0.5, 3.0, 3.0, 7000.0], {"0.001": 1, "0.005": 3, "5.0": 3, "+Inf": 4}),
        ([], {"0.001": 0, "+Inf": 0}),
    ],
)
def test_latency_histogram(samples: list[float], buckets: dict[str, int]) -> None:
    histogram = LatencyHistogram()
    for ms in samples:
        histogram.observe(ms)
    cumulative = dict(histogram.cumulative())
    for le, count in buckets.items():
        assert cumulative[le] == count
    assert histogram.total == len(samples)


async def test_publish_to_applied_latency_is_observed() -> None:
    _, applier, _, clock = await filled()
    await applier.apply(envelope(InvalidateKey("k"), published_ms=int(clock() * 1000) - 12))
    assert dict(applier.counters.latency.cumulative())["0.02"] == 1


DIM = 4


def model_of(value: float, dim: int = DIM) -> bytes:
    return model_bytes(UserModel(np.full(dim, value, np.float32), np.full(dim, 0.5, np.float32)))


@pytest.mark.parametrize(
    ("updates", "held", "refused"),
    [
        ([UserUpdate("ann", 1, model=model_of(0.5))], {"ann": (1, 0.5)}, 0),
        # an edge keeps only the users it serves (it saw ann's feedback, not bob's)
        ([UserUpdate("bob", 1, model=model_of(0.5))], {}, 0),
        ([UserUpdate("ann", 1)], {}, 0),  # no model: entries dropped, nothing held
        (
            [UserUpdate("ann", 2, model=model_of(0.2)), UserUpdate("ann", 1, model=model_of(0.1))],
            {"ann": (2, 0.2)},
            0,
        ),
        ([UserUpdate("ann", 1, model=model_of(0.5, dim=8))], {}, 1),  # another dimension
        ([UserUpdate("ann", 1, model=b"\x00" * 16)], {}, 1),  # zero variance: damaged
    ],
    ids=["served", "another-edges-user", "no-model", "older-late", "other-dimension", "damaged"],
)
async def test_user_updates_hold_the_models_of_the_edges_users(
    updates: list[UserUpdate], held: dict[str, tuple[int, float]], refused: int
) -> None:
    store, _, staleness, clock = await filled()
    users = UserModels(10**6, DIM)
    applier = SyncApplier(store, staleness, clock=clock, users=users, serves={"ann"}.__contains__)
    for update in updates:
        await applier.apply(envelope(update))
    found = {}
    for user in ("ann", "bob"):
        h = users.get(user)
        if h is not None:
            found[user] = (h.version, pytest.approx(float(h.model.mean[0]), abs=1e-3))
    assert found == held
    assert applier.counters.models_refused == refused
    assert applier.counters.models_held == len(held)
    # the user's own entries go either way
    assert await store.get(K(f"{updates[0].user_id}-home")) is None


async def test_a_held_user_keeps_getting_updates_after_the_edge_forgot_their_feedback() -> None:
    store, _, staleness, clock = await filled()
    users = UserModels(10**6, DIM)
    serves = {"ann"}
    applier = SyncApplier(store, staleness, clock=clock, users=users, serves=serves.__contains__)
    await applier.apply(envelope(UserUpdate("ann", 1, model=model_of(0.1))))
    serves.clear()
    await applier.apply(envelope(UserUpdate("ann", 2, model=model_of(0.2))))
    held = users.get("ann")
    assert held is not None
    assert held.version == 2


@pytest.mark.parametrize(("reason", "kept"), [("preference", False), ("purchase", True)])
async def test_a_preference_change_drops_the_users_preferences(reason: str, kept: bool) -> None:
    store, _, staleness, clock = await filled()
    users = UserModels(10**6, DIM)
    applier = SyncApplier(store, staleness, clock=clock, users=users, serves={"ann"}.__contains__)
    users.complete("ann", 1, UserModel.prior(DIM), {"books": 0.5})
    await applier.apply(envelope(InvalidateUser("ann", reason=reason)))
    assert (users.ready("ann") is not None) is kept
    assert users.get("ann") is not None  # the model stays


@pytest.mark.parametrize(
    ("preferences", "version", "ready_with"),
    [
        (encode_preferences({"books": -1.0}), 4, {"books": -1.0}),
        (encode_preferences({}), 0, {}),
        (None, None, None),  # from a worker that could not read them: not ready
        (b"\xc1", 4, None),  # damaged: the model is held, the preferences are not
        (encode_preferences({"books": 3.0}), 4, None),  # out of range: damaged
    ],
    ids=["stated", "none-stated", "absent", "not-msgpack", "out-of-range"],
)
async def test_an_update_with_preferences_makes_the_user_ready(
    preferences: bytes | None, version: int | None, ready_with: dict[str, float] | None
) -> None:
    store, _, staleness, clock = await filled()
    users = UserModels(10**6, DIM)
    applier = SyncApplier(store, staleness, clock=clock, users=users, serves={"ann"}.__contains__)
    update = UserUpdate(
        "ann", 1, model=model_of(0.5), preferences=preferences, preferences_version=version
    )
    await applier.apply(envelope(update))
    assert users.get("ann") is not None
    held = users.ready("ann")
    assert (held.preferences if held is not None else None) == ready_with


# --- ranking policies (issue 19) ---------------------------------------------------------

B1 = Policy("ranker-b", "1", PolicyConfig(exploration_weight=0.0, diversity_weight=0.3))
B2 = Policy("ranker-b", "2", PolicyConfig(user_prior_scale=8.0))


@pytest.mark.parametrize(
    ("epochs", "held"),
    [
        ([ModelEpoch(1, "m", encode_policy(B1))], B1),
        ([ModelEpoch(1, "m", encode_policy(B1)), ModelEpoch(2, "m", encode_policy(B2))], B2),
        # an older or a repeated epoch changes nothing
        ([ModelEpoch(2, "m", encode_policy(B2)), ModelEpoch(1, "m", encode_policy(B1))], B2),
        ([ModelEpoch(2, "m", encode_policy(B2)), ModelEpoch(2, "m", encode_policy(B1))], B2),
        # an epoch without a policy (a model deployment before any promotion, or an origin
        # that predates policies) keeps the one held
        ([ModelEpoch(1, "m", encode_policy(B1)), ModelEpoch(2, "nn-2")], B1),
        ([ModelEpoch(1, "nn-2")], None),
        # a policy that cannot be read: the epoch applies, the policy held stays
        ([ModelEpoch(1, "m", encode_policy(B1)), ModelEpoch(2, "m", b'{"name": "x"}')], B1),
    ],
)
async def test_a_newer_epoch_with_a_policy_is_adopted(
    epochs: list[ModelEpoch], held: Policy | None
) -> None:
    store = MemoryEntryStore(max_bytes=10**6, clock=FakeClock())
    adopted: list[Policy] = []
    applier = SyncApplier(store, Staleness(), clock=FakeClock(), adopt_policy=adopted.append)
    for seq, message in enumerate(epochs, start=1):
        await applier.apply(envelope(message, seq=seq))
    assert applier.policy == held
    assert (adopted[-1] if adopted else None) == held
    assert applier.model_epoch == max(m.epoch for m in epochs)


async def test_item_posteriors_reach_the_edges_table_and_damaged_ones_are_refused() -> None:
    store, _, staleness, clock = await filled()
    live = LivePosteriors(PosteriorConfig(), clock=clock)
    applier = SyncApplier(store, staleness, clock=clock, items=live)
    rows = struct.pack("<6d", 2.0, 9.5, 1e12, 1.0, 3.0, 1e12)
    await applier.apply(Envelope(1, 0, ItemPosteriors("all", ("it-1", "it-2"), rows)))
    assert len(live) == 2
    assert applier.counters.item_rows == 2
    damaged = ItemPosteriors("all", ("it-1", "it-2"), rows[:24])
    await applier.apply(Envelope(2, 0, damaged))
    assert applier.counters.item_messages_refused == 1
    assert live.applied == 2  # nothing of it taken
    # entries are not touched by a posterior change
    assert await store.get(K("casual-home")) is not None
