"""One contract for every ``EntryStore``: the in-process store on a fake clock, and the
Redis store on the suite's real Redis (the wall clock: Redis expires keys by its own).
Then what only the Redis store has: its key layout, and several processes on one Redis."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace

import pytest
from redis.asyncio import Redis
from redis.cluster import key_slot
from redis.exceptions import RedisError

from edge.cache.entry import CachedItem, Entry
from edge.cache.key import CacheKey
from edge.cache.redis_store import RedisEntryStore
from edge.cache.store import SWAP_BATCH, EntryStore, MemoryEntryStore
from edge.exceptions import AudienceMismatch
from perso.process import free_port
from protocol import keys
from protocol.audience import Personal, Shared
from redis_client.address import is_cluster
from redis_client.client import RedisClient, connect, open_client
from tests.entries import SHARED, K, keyed
from tests.fakes import FakeClock

pytestmark = pytest.mark.cluster


@dataclass
class Harness:
    store: EntryStore
    # The clock the store judges stale_until by, and how to move past a time on it.
    now: Callable[[], float]
    advance: Callable[[float], Awaitable[None]]


@pytest.fixture(params=["memory", "redis"])
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "memory":
        clock = FakeClock()

        async def tick(seconds: float) -> None:
            clock.tick(seconds)

        return Harness(MemoryEntryStore(max_bytes=10**9, clock=clock), clock, tick)
    redis: RedisClient = request.getfixturevalue("redis")
    store = RedisEntryStore(redis, prefix=keys.edge_entry_prefix(f"test-{uuid.uuid4().hex[:8]}"))
    return Harness(store, time.time, asyncio.sleep)


def make(
    h: Harness,
    generation: int,
    *,
    label: str = "v",
    ttl: float = 60.0,
    stale: float = 120.0,
    tags: tuple[str, ...] = (),
    n_items: int = 3,
) -> Entry:
    """An entry whose every part names its label and generation, so that a reader can tell
    a whole entry from a mix of two."""
    now = h.now()
    items = tuple(
        CachedItem(
            f"{label}-{generation}-{n}",
            b'"item_id":"%b","score":0.5' % f"{label}-{generation}-{n}".encode(),
            b"null",
        )
        for n in range(n_items)
    )
    return Entry(
        audience=SHARED,
        items=items,
        complete=False,
        model_version=f"{label}-{generation}",
        exploration_applied=False,
        filled_at=now,
        expires_at=now + ttl,
        stale_until=now + stale,
        generation=generation,
        tags=tags,
    )


async def test_an_entry_comes_back_whole(harness: Harness) -> None:
    store = harness.store
    entry = make(harness, 1, tags=("it-1", "it-2"))
    assert await store.put(K("k"), entry) is True
    assert await store.get(K("k")) == entry
    assert await store.size() == 1


@pytest.mark.parametrize(
    ("key_for", "entry_for"),
    [
        # The privacy incident of issue 15: a user's answer under a key without the user.
        (Shared("power"), Personal("user-a")),
        (Personal("user-b"), Personal("user-a")),
        (Personal("user-a"), Shared("casual")),
        (Shared("new"), Shared("casual")),
    ],
)
async def test_an_entry_is_stored_only_under_a_key_for_its_audience(
    harness: Harness, key_for: Shared | Personal, entry_for: Shared | Personal
) -> None:
    store = harness.store
    key = CacheKey("k", key_for)
    entry = replace(make(harness, 1), audience=entry_for)
    with pytest.raises(AudienceMismatch):
        await store.put(key, entry)
    with pytest.raises(AudienceMismatch):
        await store.swap_all({K("fine"): make(harness, 2), key: entry})
    assert await store.get(key) is None
    assert await store.get(K("fine")) is None  # nothing of the refused swap was applied
    assert await store.size() == 0
    mine = CacheKey("mine", entry_for)
    assert await store.put(mine, entry) is True
    assert await store.get(mine) == entry


async def test_an_absent_key_is_none(harness: Harness) -> None:
    assert await harness.store.get(K("nothing")) is None
    assert await harness.store.size() == 0


async def test_a_stale_entry_is_still_served_until_stale_until(harness: Harness) -> None:
    store = harness.store
    entry = make(harness, 1, ttl=0.1, stale=0.6)
    await store.put(K("k"), entry)
    await harness.advance(0.3)  # past expires_at: the caller decides what stale means
    assert await store.get(K("k")) == entry
    await harness.advance(0.4)  # past stale_until
    assert await store.get(K("k")) is None
    assert await store.size() == 0


async def test_an_entry_already_past_stale_until_is_never_served(harness: Harness) -> None:
    store = harness.store
    await store.put(K("k"), make(harness, 1, ttl=-20, stale=-10))
    assert await store.get(K("k")) is None
    assert await store.size() == 0


async def test_an_older_generation_is_refused_and_a_newer_one_flips(harness: Harness) -> None:
    store = harness.store
    ten, eleven = make(harness, 10, label="ten"), make(harness, 11, label="eleven")
    assert await store.put(K("k"), ten) is True
    assert await store.put(K("k"), make(harness, 9, label="nine")) is False
    assert await store.put(K("k"), make(harness, 10, label="again")) is False
    assert await store.get(K("k")) == ten
    assert await store.put(K("k"), eleven) is True
    assert await store.get(K("k")) == eleven
    assert await store.size() == 1


async def test_once_the_active_entry_is_gone_any_generation_may_fill(harness: Harness) -> None:
    store = harness.store
    await store.put(K("k"), make(harness, 10, ttl=0.1, stale=0.2))
    await harness.advance(0.3)
    five = make(harness, 5)
    assert await store.put(K("k"), five) is True
    assert await store.get(K("k")) == five


async def test_generations_only_grow(harness: Harness) -> None:
    generations = [harness.store.next_generation() for _ in range(1000)]
    assert generations == sorted(set(generations))


async def test_interleaved_puts_leave_the_newest_and_readers_see_only_whole_entries(
    harness: Harness,
) -> None:
    store = harness.store
    rng = random.Random(20260101)
    generations = list(range(1, 81))
    rng.shuffle(generations)
    entries = {g: make(harness, g, n_items=1 + g % 7) for g in generations}
    delays = {g: rng.random() * 0.02 for g in generations}
    filling = True
    reads = 0

    async def fill(generation: int) -> bool:
        await asyncio.sleep(delays[generation])  # fills finish in another order than started
        return await store.put(K("k"), entries[generation])

    async def reader() -> None:
        nonlocal reads
        last = 0
        while filling:
            entry = await store.get(K("k"))
            if entry is not None:
                assert entry == entries[entry.generation]  # whole, never a mix of two
                assert entry.generation >= last  # never back to an older one
                last = entry.generation
                reads += 1
            await asyncio.sleep(0)

    readers = [asyncio.create_task(reader()) for _ in range(4)]
    flipped = await asyncio.gather(*(fill(g) for g in generations))
    filling = False
    await asyncio.gather(*readers)

    assert await store.get(K("k")) == entries[80]
    assert flipped[generations.index(80)] is True
    assert not all(flipped)  # some slow, older fills finished late and were refused
    assert reads > 0


class Tracked(Mapping[CacheKey, Entry]):
    """A table that tells when a swap has started reading it."""

    def __init__(self, entries: dict[CacheKey, Entry]) -> None:
        self._entries = entries
        self.started = asyncio.Event()

    def __getitem__(self, key: CacheKey) -> Entry:
        return self._entries[key]

    def __iter__(self) -> Iterator[CacheKey]:
        self.started.set()
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def table(h: Harness, label: str, n: int, first_generation: int) -> dict[str, Entry]:
    return {f"k{i}": make(h, first_generation + i, label=label, n_items=1) for i in range(n)}


async def test_a_swap_is_all_or_nothing_for_concurrent_readers(harness: Harness) -> None:
    store = harness.store
    n = 2 * SWAP_BATCH + 100  # the memory store yields to readers while it builds
    old = table(harness, "old", n, 1)
    for key, entry in old.items():
        await store.put(K(key), entry)
    new = table(harness, "new", n, 10_000)
    keys = list(old)
    swapping = True
    switched = False  # some read has returned an entry of the new table
    reads = 0

    async def reader(seed: int) -> None:
        nonlocal switched, reads
        rng = random.Random(seed)
        while swapping:
            key = rng.choice(keys)
            started_after_switch = switched
            entry = await store.get(K(key))
            if entry == new[key]:
                switched = True
            else:
                assert entry == old[key]
                # A read that began once the new table was seen cannot see the old one.
                assert not started_after_switch, f"{key} old after the swap showed new"
            reads += 1
            await asyncio.sleep(0)  # the memory store's get never yields by itself

    readers = [asyncio.create_task(reader(seed)) for seed in range(4)]
    await asyncio.sleep(0)
    await store.swap_all(keyed(new))
    swapping = False
    await asyncio.gather(*readers)

    assert reads > 0
    assert await store.size() == n
    assert [await store.get(K(key)) for key in keys] == list(new.values())


async def test_a_swap_drops_what_the_new_table_does_not_have(harness: Harness) -> None:
    store = harness.store
    await store.put(K("only-old"), make(harness, 1, tags=("it-1",)))
    await store.put(K("both"), make(harness, 2, label="old"))
    new = {"both": make(harness, 3, label="new"), "only-new": make(harness, 4)}
    await store.swap_all(keyed(new))
    assert await store.get(K("only-old")) is None
    assert await store.get(K("both")) == new["both"]
    assert await store.get(K("only-new")) == new["only-new"]
    assert await store.size() == 2
    assert await store.delete_tag("it-1") == 0  # the old tag index went with its table


async def test_an_older_swap_finishing_after_a_newer_one_is_dropped(harness: Harness) -> None:
    store = harness.store
    slow = Tracked(keyed(table(harness, "slow", 2 * SWAP_BATCH, 1)))
    first = asyncio.create_task(store.swap_all(slow))
    await slow.started.wait()
    fast = make(harness, 99_999, label="fast")
    await store.swap_all({K("k0"): fast})
    await first
    assert await store.get(K("k0")) == fast
    assert await store.get(K("k1")) is None
    assert await store.size() == 1


@pytest.mark.parametrize("purge", ["swap_all", "clear"])
async def test_a_fill_started_before_a_swap_or_clear_is_refused_after_it(
    harness: Harness, purge: str
) -> None:
    store = harness.store
    await store.put(K("k"), make(harness, store.next_generation(), label="before"))
    started_before = store.next_generation()
    if purge == "clear":
        await store.clear()
    else:
        await store.swap_all({K("other"): make(harness, store.next_generation())})
    assert await store.put(K("k"), make(harness, started_before, label="late")) is False
    assert await store.get(K("k")) is None
    started_after = make(harness, store.next_generation(), label="after")
    assert await store.put(K("k"), started_after) is True
    assert await store.get(K("k")) == started_after


async def test_delete(harness: Harness) -> None:
    store = harness.store
    other = make(harness, 2)
    await store.put(K("k"), make(harness, 1, tags=("it-1",)))
    await store.put(K("other"), other)
    assert await store.delete("k") is True
    assert await store.delete("k") is False
    assert await store.delete("never") is False
    assert await store.get(K("k")) is None
    assert await store.get(K("other")) == other
    assert await store.delete_tag("it-1") == 0
    assert await store.size() == 1
    assert await store.put(K("k"), make(harness, 1)) is True  # nothing active to be newer than


async def test_delete_tag_purges_every_entry_carrying_it(harness: Harness) -> None:
    store = harness.store
    await store.put(K("a"), make(harness, 1, tags=("it-1", "it-2")))
    await store.put(K("b"), make(harness, 2, tags=("it-2",)))
    c = make(harness, 3, tags=("it-3",))
    await store.put(K("c"), c)
    await store.put(K("d"), make(harness, 4))
    assert await store.delete_tag("it-2") == 2
    assert await store.get(K("a")) is None
    assert await store.get(K("b")) is None
    assert await store.get(K("c")) == c
    assert await store.delete_tag("it-2") == 0
    assert await store.delete_tag("it-1") == 0  # "a" went, from every tag's index
    assert await store.delete_tag("unknown") == 0
    assert await store.size() == 2


async def test_a_replaced_entry_is_indexed_by_its_new_tags_only(harness: Harness) -> None:
    store = harness.store
    replacement = make(harness, 2, tags=("it-2",))
    await store.put(K("k"), make(harness, 1, tags=("it-1",)))
    await store.put(K("k"), replacement)
    assert await store.delete_tag("it-1") == 0
    assert await store.get(K("k")) == replacement
    assert await store.delete_tag("it-2") == 1
    assert await store.get(K("k")) is None


async def test_a_refused_put_leaves_the_tag_index_alone(harness: Harness) -> None:
    store = harness.store
    await store.put(K("k"), make(harness, 2, tags=("it-1",)))
    assert await store.put(K("k"), make(harness, 1, tags=("it-9",))) is False
    assert await store.delete_tag("it-9") == 0
    assert await store.delete_tag("it-1") == 1


async def test_delete_tag_counts_only_entries_still_servable(harness: Harness) -> None:
    store = harness.store
    await store.put(K("short"), make(harness, 1, ttl=0.1, stale=0.2, tags=("it-1",)))
    await store.put(K("long"), make(harness, 2, tags=("it-1",)))
    await harness.advance(0.3)
    assert await store.delete_tag("it-1") == 1
    assert await store.size() == 0


async def test_a_key_refilled_after_expiry_is_indexed_by_its_new_tags_only(
    harness: Harness,
) -> None:
    store = harness.store
    await store.put(K("a"), make(harness, 1, ttl=0.1, stale=0.2, tags=("it-1",)))
    await store.put(K("b"), make(harness, 2, tags=("it-1",)))  # keeps it-1's index alive
    await harness.advance(0.3)
    refilled = make(harness, 3, tags=("it-2",))
    await store.put(K("a"), refilled)
    assert await store.delete_tag("it-1") == 1
    assert await store.get(K("a")) == refilled
    assert await store.delete_tag("it-2") == 1


async def test_clear_and_size(harness: Harness) -> None:
    store = harness.store
    for n in range(5):
        await store.put(K(f"k{n}"), make(harness, n + 1, tags=("it-1",)))
    await store.put(K("short"), make(harness, 9, ttl=0.1, stale=0.2))
    assert await store.size() == 6
    await harness.advance(0.3)
    assert await store.size() == 5
    await store.clear()
    assert await store.size() == 0
    assert await store.get(K("k1")) is None
    assert await store.delete_tag("it-1") == 0
    fresh = make(harness, store.next_generation())
    assert await store.put(K("k1"), fresh) is True
    assert await store.size() == 1


# --- the Redis store only ---------------------------------------------------------------


@pytest.fixture
def prefix() -> str:
    """A store of its own, under a PoP's prefix (its hash tag: one slot on a cluster)."""
    return keys.edge_entry_prefix(f"test-{uuid.uuid4().hex[:8]}")


def entry_at(generation: int, *, stale_in: float = 120.0, tags: tuple[str, ...] = ()) -> Entry:
    now = time.time()
    return Entry(
        audience=SHARED,
        items=(CachedItem("it-1", b'"item_id":"it-1"', b"null"),),
        complete=True,
        model_version="m",
        exploration_applied=False,
        filled_at=now,
        expires_at=now + 60,
        stale_until=now + stale_in,
        generation=generation,
        tags=tags,
    )


async def test_redis_keys_of_a_store_share_its_hash_tag_and_expire_at_stale_until(
    redis: RedisClient, prefix: str
) -> None:
    store = RedisEntryStore(redis, prefix)
    entry = entry_at(store.next_generation(), stale_in=300, tags=("it-1",))
    await store.put(K("abc"), entry)
    names = sorted([name.decode() async for name in redis.scan_iter(match=f"{prefix}*")])
    assert names == [
        f"{prefix}e0:tag:{{it-1}}",
        f"{prefix}e0:{{abc}}:B",
        f"{prefix}e0:{{abc}}:active",
        f"{prefix}e0:{{abc}}:tags",
    ]
    assert len({key_slot(name.encode()) for name in [*names, f"{prefix}epoch"]}) == 1
    for name in names:
        expires_ms = time.time() * 1000 + await redis.pttl(name)
        assert expires_ms == pytest.approx(entry.stale_until * 1000, abs=1000)
    assert await redis.hgetall(f"{prefix}e0:{{abc}}:active") == {
        b"buffer": b"B",
        b"generation": str(entry.generation + 2**63).zfill(20).encode(),
    }
    await store.put(K("abc"), entry_at(store.next_generation()))
    assert await redis.exists(f"{prefix}e0:{{abc}}:A", f"{prefix}e0:{{abc}}:B") == 2
    assert await redis.hget(f"{prefix}e0:{{abc}}:active", "buffer") == b"A"


async def test_redis_processes_of_one_pop_see_each_others_swaps(
    redis_url: str, redis: RedisClient, prefix: str
) -> None:
    other_client = await open_client(redis_url)
    try:
        one = RedisEntryStore(redis, prefix)
        other = RedisEntryStore(other_client, prefix)
        await one.put(K("k"), entry_at(one.next_generation()))
        assert await other.get(K("k")) is not None
        swapped = entry_at(other.next_generation())
        await other.swap_all({K("k"): swapped, K("j"): swapped})
        assert await one.get(K("k")) == swapped  # one's idea of the epoch was stale
        assert await one.put(K("j"), entry_at(one.next_generation())) is True
        await one.clear()
        assert await other.get(K("k")) is None
        assert await other.size() == 0
    finally:
        await other_client.aclose()
    # The namespaces that were flipped away from were unlinked; only the pointers remain.
    names = sorted([name.decode() async for name in redis.scan_iter(match=f"{prefix}*")])
    assert names == [f"{prefix}epoch", f"{prefix}epochs"]


async def test_redis_generations_from_two_processes_order_by_start(
    redis_url: str, redis: RedisClient, prefix: str
) -> None:
    other_client = await open_client(redis_url)
    try:
        one = RedisEntryStore(redis, prefix)
        other = RedisEntryStore(other_client, prefix)
        started_first = one.next_generation()
        await asyncio.sleep(0.001)
        started_second = other.next_generation()
        assert await other.put(K("k"), entry_at(started_second)) is True
        assert await one.put(K("k"), entry_at(started_first)) is False
    finally:
        await other_client.aclose()


async def test_redis_an_unreadable_entry_is_a_miss(redis: RedisClient, prefix: str) -> None:
    store = RedisEntryStore(redis, prefix)
    await store.put(K("k"), entry_at(store.next_generation()))
    await redis.set(f"{prefix}e0:{{k}}:B", b"\x93garbage")
    assert await store.get(K("k")) is None


async def test_redis_an_unreachable_store_reads_as_a_miss_and_keeps_nothing(
    prefix: str,
) -> None:
    """A PoP store that is down degrades answers, never fails them: the edge fills from its
    origin; a purge still raises (the sync applier tries it again)."""
    gone = connect(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2)
    store = RedisEntryStore(gone, prefix)
    try:
        assert await store.get(K("k")) is None
        assert await store.put(K("k"), entry_at(store.next_generation())) is False
        assert store.failures == 2
        with pytest.raises(RedisError):
            await store.delete_tag("it-1")
    finally:
        await gone.aclose()


async def test_redis_store_refuses_a_client_that_decodes_replies(redis_url: str) -> None:
    if is_cluster(redis_url):
        pytest.skip("connect makes no decoding client; one node's client shows the check")
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError, match="decode_responses"):
            RedisEntryStore(client, "p:")
    finally:
        await client.aclose()


async def test_redis_a_generation_beyond_64_bits_is_refused(
    redis: RedisClient, prefix: str
) -> None:
    store = RedisEntryStore(redis, prefix)
    with pytest.raises(ValueError, match="64-bit"):
        await store.put(K("k"), entry_at(2**63))
