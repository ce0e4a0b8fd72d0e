from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest

from edge.cache.codec import FORMAT_VERSION, decode_entry, encode_entry
from edge.cache.entry import CachedItem, Entry
from protocol.audience import Personal, Shared
from tests.entries import SHARED
from tests.pools import make_pool, same_pool

ITEM = CachedItem("it-1", b'"item_id":"it-1","score":0.9', b'{"primary_reason":"Popular"}')
UNEXPLAINED = CachedItem("it-2", b'"item_id":"it-2","score":0.8', b"null")


def make(**fields: object) -> Entry:
    base: dict[str, object] = {
        "items": (ITEM, UNEXPLAINED),
        "complete": False,
        "model_version": "nn-slice-1",
        "exploration_applied": True,
        "expires_at": 1_767_225_900.25,
        "audience": SHARED,
    }
    base.update(fields)
    return Entry(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "entry",
    [
        make(),
        make(items=(), complete=True),
        make(degraded=True, exploration_applied=False),
        make(filled_at=1_767_225_600.123456789, stale_until=1_767_229_200.5),
        make(generation=2**63 - 1),
        make(generation=-1),
        make(tags=("it-1", "it-2", "user:u-1", "")),
        make(tags=("ünïcode", "with\nnewline", "{braces}")),
        make(model_version=""),
        make(audience=Personal("u-1"), tags=("user:u-1",)),
        make(audience=Shared("")),
        make(items=(CachedItem("", b"", b"null"),)),
        make(expires_at=0.1 + 0.2, stale_until=0.30000000000000004),
        make(ranking_id="5f0c-origin-request"),
    ],
    ids=lambda e: f"{len(e.items)}items-gen{e.generation}-{len(e.tags)}tags",
)
def test_an_entry_comes_back_exactly(entry: Entry) -> None:
    decoded = decode_entry(encode_entry(entry))
    assert decoded == entry
    assert decoded.stale_until == entry.stale_until


def test_an_integer_time_comes_back_as_the_same_float() -> None:
    entry = make(expires_at=160, stale_until=200)
    assert decode_entry(encode_entry(entry)) == entry


def test_a_generation_beyond_64_bits_is_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="cannot be encoded"):
        encode_entry(make(generation=2**64))


def fields_of(entry: Entry) -> list[object]:
    unpacked: list[object] = msgpack.unpackb(encode_entry(entry))
    return unpacked


def replaced(index: int, value: object) -> bytes:
    fields = fields_of(make())
    fields[index] = value
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "not an encoded entry"),
        (b"\xc1", "not an encoded entry"),  # a byte msgpack never uses
        (encode_entry(make())[:-3], "not an encoded entry"),  # truncated
        (encode_entry(make()) + b"\x00", "not an encoded entry"),  # trailing bytes
        (b'{"items": []}', "not an encoded entry"),  # JSON, not msgpack
        (msgpack.packb({"a": 1}), "dict at the top"),
        (msgpack.packb([]), "list at the top"),
        (msgpack.packb(42), "int at the top"),
        (
            msgpack.packb([FORMAT_VERSION + 1, *fields_of(make())[1:]]),
            f"unknown entry format {FORMAT_VERSION + 1}",
        ),
        (msgpack.packb([True, *fields_of(make())[1:]]), "unknown entry format True"),
        (msgpack.packb(fields_of(make())[:-1]), "has 17 fields, expected 18"),
        (replaced(1, "items"), "items is str"),
        (replaced(1, [["it-1", b"m"]]), "item has 2 fields"),
        (replaced(1, [["it-1", "m", b"null"]]), "item members is str"),
        (replaced(1, [[b"it-1", b"m", b"null"]]), "item_id is bytes"),
        (replaced(2, 1), "complete is int"),
        (replaced(3, b"m"), "model_version is bytes"),
        (replaced(5, 160), "expires_at is int"),
        (replaced(5, float("nan")), "expected a finite time"),
        (replaced(8, float("inf")), "expected a finite time"),
        (replaced(8, 1.0), "before expires_at"),  # stale_until earlier than expiry
        (replaced(9, 1.5), "generation is float"),
        (replaced(9, False), "generation is bool"),
        (replaced(10, "it-1"), "tags is str"),
        (replaced(10, [1]), "tag is int"),
        (replaced(11, "user"), "audience is str"),
        (replaced(11, ["user"]), "audience has 1 fields"),
        (replaced(11, ["someone", "u-1"]), "unknown audience kind"),
        (replaced(11, ["user", b"u-1"]), "audience id is bytes"),
        (replaced(17, None), "ranking_id is NoneType"),
        (msgpack.packb(msgpack.ExtType(5, b"x")), "ExtType at the top"),
        (b"\xa2\xff\xfe", "not an encoded entry"),  # a str that is not UTF-8
    ],
)
def test_garbage_is_refused_with_a_clear_message(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_entry(raw)


def test_a_shared_entry_keeps_its_pool() -> None:
    pool = make_pool(40, 16)
    entry = make(pool=pool)
    decoded = decode_entry(encode_entry(entry))
    assert decoded.pool is not None
    assert same_pool(decoded.pool, pool)
    assert decode_entry(encode_entry(make())).pool is None
    assert entry.size > make().size + 40 * 16 * 2  # the pool is charged to the budget


def test_an_entry_holds_its_pool_prepared_for_ranking_and_is_charged_for_it() -> None:
    pool = make_pool(40, 16)
    entry = make(pool=pool)
    assert entry.prepared_pool is not None
    assert entry.prepared_pool.pool is pool
    # float64 vectors and their squares: 16 bytes a number beside the pool's 2
    assert entry.size > make().size + pool.size + 40 * 16 * 16
    decoded = decode_entry(encode_entry(entry))
    assert decoded.prepared_pool is not None
    assert decoded.prepared_pool.pool is decoded.pool
    assert replace(entry, pool=None).prepared_pool is None
    assert make().prepared_pool is None


def test_a_damaged_pool_is_refused() -> None:
    fields = fields_of(make(pool=make_pool(3, 4)))
    fields[16] = b"\x81\xa1v\x07"  # a map with an unknown version
    with pytest.raises(ValueError, match="encoded entry's pool: pool: unknown version 7"):
        decode_entry(msgpack.packb(fields, use_bin_type=True))


def test_a_pool_is_never_on_an_entry_for_one_user() -> None:
    with pytest.raises(ValueError, match="never on an entry for one user"):
        make(audience=Personal("u-1"), pool=make_pool(3, 4))
