from __future__ import annotations

import math
import struct

import msgpack
import pytest

from protocol.exceptions import MalformedMessage as AnyMalformed
from sync.codec import decode, decode_entry, decode_message, encode, encode_message, entry_fields
from sync.exceptions import MalformedMessage
from sync.messages import (
    CatalogChange,
    Envelope,
    InvalidateKey,
    InvalidateSegment,
    InvalidateUser,
    ItemPosteriors,
    ItemsChanged,
    ItemUpdate,
    Message,
    ModelEpoch,
    PurgeTag,
    UserUpdate,
    for_edges,
)

MESSAGES: list[Message] = [
    UserUpdate("u-1", 7),
    UserUpdate("u-1", 0, segment="power"),
    UserUpdate("u-1", 8, model=bytes(range(256)) * 2),
    InvalidateUser("u-1", "purchase"),
    InvalidateUser("u-1", ""),
    InvalidateSegment("casual"),
    InvalidateKey("seg:casual:home:mobile"),
    PurgeTag("item:it-1", soft=False),
    PurgeTag("item:it-1", soft=True),
    ItemUpdate("it-1", in_stock=False, price=None),
    ItemUpdate("it-1", in_stock=None, price=19.99),
    ItemUpdate("it-1", in_stock=True, price=0.0),
    ItemUpdate("it-1", in_stock=None, price=None),
    ItemUpdate("it-1", in_stock=False, price=None, removed=True),
    ModelEpoch(3, "ranker-2026-05-01"),
    ModelEpoch(4, "ranker-2026-05-01", policy=b'{"name": "b", "version": "2"}'),
    UserUpdate("ü-日本", 2**63),
    CatalogChange("a1b2", 7),
    CatalogChange("a1b2", 7, slot="items__r3"),
    CatalogChange("a1b2", 8, slot="items", item_ids=("it-1", "sku-ü")),
    CatalogChange("a1b2", 0, item_ids=()),
    ItemPosteriors("mobile_evening", ("it-1", "it-2"), struct.pack("<6d", 2, 9.5, 1e12, 1, 1, 0)),
    ItemPosteriors("all", ("sku-ü",), struct.pack("<3d", 1.0, 30.25, 1.7e12)),
    ItemsChanged(7),
    ItemsChanged(8, item_ids=("it-1", "sku-ü")),
    ItemsChanged(0, item_ids=()),
]


@pytest.mark.parametrize("message", MESSAGES)
def test_messages_round_trip(message: Message) -> None:
    assert decode_message(encode_message(message)) == message


@pytest.mark.parametrize("message", MESSAGES)
def test_envelopes_round_trip(message: Message) -> None:
    envelope = Envelope(seq=42, published_at_ms=1_767_225_600_123, message=message)
    assert decode(encode(envelope)) == envelope


@pytest.mark.parametrize("message", MESSAGES)
def test_stream_entries_round_trip(message: Message) -> None:
    envelope = Envelope(seq=42, published_at_ms=1_767_225_600_123, message=message)
    assert decode_entry(entry_fields(envelope, prev_seq=40)) == (envelope, 40)


def test_integer_price_decodes_as_float() -> None:
    raw = _body(type="item_update", item_id="it-1", price=20)
    message = decode_message(raw)
    assert isinstance(message, ItemUpdate)
    assert message.price == 20.0
    assert isinstance(message.price, float)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        # an origin that predates ``removed`` never sends it
        ({"in_stock": False}, ItemUpdate("it-1", in_stock=False, price=None, removed=False)),
        ({"in_stock": False, "removed": True}, ItemUpdate("it-1", False, None, removed=True)),
    ],
)
def test_removed_is_false_unless_sent(fields: dict[str, object], message: ItemUpdate) -> None:
    assert decode_message(_body(type="item_update", item_id="it-1", **fields)) == message


def test_a_removal_is_an_out_of_stock_update_to_an_edge_that_predates_it() -> None:
    body = msgpack.unpackb(encode_message(ItemUpdate("it-1", False, None, removed=True)))
    assert (body["in_stock"], body["removed"]) == (False, True)
    # and a plain update carries no ``removed`` at all
    assert "removed" not in msgpack.unpackb(encode_message(ItemUpdate("it-1", False, None)))


def test_unknown_keys_are_ignored() -> None:
    raw = _body(type="purge_tag", tag="t", soft=True, region_hint="eu")
    assert decode_message(raw) == PurgeTag("t", soft=True)


def test_a_policy_is_an_unknown_key_to_an_edge_that_predates_it() -> None:
    """What a decoder of ModelEpoch without ``policy`` reads of a body with one: the fields it
    knows (it ignores the rest, as ``test_unknown_keys_are_ignored``), so that an origin may
    announce policies before every edge knows them."""
    body = msgpack.unpackb(encode_message(ModelEpoch(5, "m-1", policy=b"{}")))
    assert body == {
        "v": 1,
        "type": "model_epoch",
        "epoch": 5,
        "model_version": "m-1",
        "policy": b"{}",
    }
    older = msgpack.packb({k: v for k, v in body.items() if k != "policy"}, use_bin_type=True)
    assert decode_message(older) == ModelEpoch(5, "m-1")  # and an older origin's, read here


@pytest.mark.parametrize(
    ("item_ids", "body_has"),
    [
        (None, False),  # everything: the field is left out
        ((), True),  # no item: an empty list, not everything
        (("it-1",), True),
    ],
)
def test_a_catalog_change_names_its_items_or_is_everything(
    item_ids: tuple[str, ...] | None, body_has: bool
) -> None:
    change = CatalogChange("o-1", 3, item_ids=item_ids)
    body = msgpack.unpackb(encode_message(change))
    assert ("item_ids" in body) is body_has
    assert decode_message(encode_message(change)) == change


@pytest.mark.parametrize(
    ("message", "edges"),
    [
        (CatalogChange("o-1", 1), False),
        (ModelEpoch(1, "m"), True),
        (ItemUpdate("it-1", False, None, removed=True), True),
        (UserUpdate("u", 1), True),
        (ItemPosteriors("all", ("it-1",), struct.pack("<3d", 1, 1, 0)), True),
        (ItemsChanged(3, ("it-1",)), True),
    ],
)
def test_only_what_every_edge_knows_is_for_edges(message: Message, edges: bool) -> None:
    assert for_edges(message) is edges


def test_bodies_are_compact() -> None:
    assert len(encode_message(InvalidateUser("u-123456", "purchase"))) < 100


def test_the_error_is_a_value_error_and_the_projects_malformed_message() -> None:
    with pytest.raises(ValueError, match="not msgpack"):
        decode(b"\xc1")
    assert issubclass(MalformedMessage, AnyMalformed)


def _body(**doc: object) -> bytes:
    return msgpack.packb({"v": 1, **doc}, use_bin_type=True)


GOOD_BODY = {"type": "invalidate", "scope": "user", "user_id": "u", "reason": "purchase"}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"", "not msgpack"),
        (b"\xc1", "not msgpack"),
        (b"\x92\x01", "not msgpack"),  # a list cut short
        (_body(**GOOD_BODY) + b"\x00", "trailing bytes"),
        (msgpack.packb([1, 2]), "not a map but list"),
        (msgpack.packb({"type": "purge_tag", "tag": "t", "soft": True}), "codec version None"),
        (_body(**GOOD_BODY).replace(b"\xa1v\x01", b"\xa1v\x02"), "codec version 2"),
        (_body(type="purge_everything"), "unknown message type 'purge_everything'"),
        (_body(type=7), "unknown message type 7"),
        (_body(type="invalidate", scope="region", region="eu"), "invalidate scope 'region'"),
        (_body(type="invalidate", user_id="u", reason="r"), "invalidate scope None"),
        (_body(type="purge_tag", tag="t"), "purge_tag: field 'soft' is missing"),
        (_body(type="purge_tag", tag="t", soft=None), "field 'soft' is missing"),
        (_body(type="purge_tag", tag="t", soft=1), "'soft' is not a boolean"),
        (_body(type="purge_tag", tag="", soft=True), "'tag' is not a non-empty string"),
        (_body(type="purge_tag", tag=b"t", soft=True), "'tag' is not a non-empty string"),
        (_body(type="user_update", user_id="u", version=-1), "'version' is not a non-negative"),
        (_body(type="user_update", user_id="u", version=True), "'version' is not a non-negative"),
        (_body(type="user_update", user_id="u", version=1.0), "'version' is not a non-negative"),
        (_body(type="user_update", user_id="u", version=1, segment=""), "'segment'"),
        (_body(type="user_update", user_id="u", version=1, model=b""), "'model' is not a non-emp"),
        (_body(type="user_update", user_id="u", version=1, model="ab"), "'model' is not a non-emp"),
        (_body(type="item_update", item_id="it", price=-1.0), "'price' is not a finite"),
        (_body(type="item_update", item_id="it", price=math.inf), "'price' is not a finite"),
        (_body(type="item_update", item_id="it", price=math.nan), "'price' is not a finite"),
        (_body(type="item_update", item_id="it", price="9.99"), "'price' is not a finite"),
        (_body(type="item_update", item_id="it", in_stock="no"), "'in_stock' is not a boolean"),
        (_body(type="model_epoch", epoch=1), "model_epoch: field 'model_version' is missing"),
        (_body(type="model_epoch", epoch="1", model_version="m"), "'epoch' is not"),
        (_body(type="catalog_change", version=1), "catalog_change: field 'origin' is missing"),
        (_body(type="catalog_change", origin="o"), "catalog_change: field 'version' is missing"),
        (_body(type="catalog_change", origin="o", version=1, item_ids="it-1"), "'item_ids'"),
        (_body(type="catalog_change", origin="o", version=1, item_ids=["a", ""]), "'item_ids'"),
        (_body(type="catalog_change", origin="o", version=1, item_ids=[1]), "'item_ids' is not"),
        (_body(type="catalog_change", origin="o", version=1, slot=""), "'slot' is not"),
        (msgpack.packb({"v": 1, "type": "invalidate", "scope": "key", "key": b"\xff"}), "'key'"),
        (b"\x81\xa1v\xa3\xff\xfe\xfd", "not msgpack"),  # a str that is not UTF-8
    ],
)
def test_malformed_bodies_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_message(raw)


def _envelope(**doc: object) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


MSG = {"v": 1, **GOOD_BODY}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "not msgpack"),
        (encode(Envelope(1, 2, InvalidateKey("k"))) + b"\x90", "trailing bytes"),
        (msgpack.packb("hello"), "envelope is not a map but str"),
        (_envelope(seq=1, t=2, msg=MSG), "codec version None"),
        (_envelope(v=1, t=2, msg=MSG), "seq is not a positive integer: None"),
        (_envelope(v=1, seq=0, t=2, msg=MSG), "seq is not a positive integer: 0"),
        (_envelope(v=1, seq="1", t=2, msg=MSG), "seq is not a positive integer"),
        (_envelope(v=1, seq=1, msg=MSG), "'published_at_ms' is not a non-negative integer"),
        (_envelope(v=1, seq=1, t=-5, msg=MSG), "'published_at_ms'"),
        (_envelope(v=1, seq=1, t=2), "envelope has no 'msg'"),
        (_envelope(v=1, seq=1, t=2, msg=[1]), "message is not a map but list"),
        (_envelope(v=1, seq=1, t=2, msg={"v": 1, "type": "nope"}), "unknown message type"),
    ],
)
def test_malformed_envelopes_are_refused(raw: bytes, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode(raw)


BODY = encode_message(InvalidateSegment("casual"))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({b"x": b"garbage"}, "no field 's'"),
        ({b"s": b"5", b"t": b"1", b"m": BODY}, "no field 'p'"),
        ({b"s": b"5", b"p": b"4", b"m": BODY}, "no field 't'"),
        ({b"s": b"5", b"p": b"4", b"t": b"1"}, "no field 'm'"),
        ({b"s": b"5", b"p": b"4", b"t": b"1", b"m": b"\xc1"}, "not msgpack"),
        ({b"s": b"-5", b"p": b"4", b"t": b"1", b"m": BODY}, "'s' is not a decimal"),
        ({b"s": b"05", b"p": b"4", b"t": b"1", b"m": BODY}, "'s' is not a decimal"),
        ({b"s": b"5.0", b"p": b"4", b"t": b"1", b"m": BODY}, "'s' is not a decimal"),
        ({b"s": b"1e3", b"p": b"4", b"t": b"1", b"m": BODY}, "'s' is not a decimal"),
        ({b"s": b"5", b"p": b" 4", b"t": b"1", b"m": BODY}, "'p' is not a decimal"),
        ({b"s": b"5", b"p": b"4", b"t": b"", b"m": BODY}, "'t' is not a decimal"),
        ({b"s": b"9" * 20, b"p": b"4", b"t": b"1", b"m": BODY}, "'s' is not a decimal"),
        ({b"s": b"0", b"p": b"0", b"t": b"1", b"m": BODY}, "seq is not a positive"),
        ({b"s": b"5", b"p": b"5", b"t": b"1", b"m": BODY}, "previous sequence 5 is not below"),
    ],
)
def test_malformed_entries_are_refused(fields: dict[bytes, bytes], problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        decode_entry(fields)


@pytest.mark.parametrize(
    ("envelope", "problem"),
    [
        (Envelope(0, 1, InvalidateKey("k")), "seq is not a positive integer"),
        (Envelope(1, -1, InvalidateKey("k")), "'published_at_ms'"),
        (Envelope(1, 1, InvalidateKey("")), "'key' is not a non-empty string"),
        (Envelope(1, 1, ItemUpdate("it", None, math.nan)), "'price' is not a finite"),
        (Envelope(1, 1, "purge"), "not a sync message: str"),  # type: ignore[arg-type]
    ],
)
def test_what_would_not_decode_is_not_encoded(envelope: Envelope, problem: str) -> None:
    with pytest.raises(MalformedMessage, match=problem):
        encode(envelope)


def test_item_posteriors_read_their_rows_in_the_order_of_their_items() -> None:
    message = ItemPosteriors("all", ("a", "b"), struct.pack("<6d", 2, 9.5, 1e12, 1, 3, 5))
    assert message.rows_of() == ((2.0, 9.5, 1e12), (1.0, 3.0, 5.0))


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        (struct.pack("<3d", 1, 1, 0), "24 bytes of rows for 2 items"),
        (struct.pack("<6d", 1, 1, 0, 1, -1, 0), "negative"),
        (struct.pack("<6d", 1, math.nan, 0, 1, 1, 0), "non-finite"),
        (struct.pack("<6d", 1, math.inf, 0, 1, 1, 0), "non-finite"),
    ],
)
def test_item_posteriors_with_damaged_rows_are_refused_when_read(rows: bytes, problem: str) -> None:
    message = decode_message(encode_message(ItemPosteriors("all", ("a", "b"), rows)))
    with pytest.raises(AnyMalformed, match=problem):
        message.rows_of()  # type: ignore[union-attr]
