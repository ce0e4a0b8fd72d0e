"""The pure parts of ``coordination.postgres_leases``: advisory keys from resource names, how
``pg_locks`` names them, and the table names that may be spliced into SQL."""

from __future__ import annotations

import pytest

from coordination.postgres_leases import advisory_key, check_table_name, lock_object


@pytest.mark.parametrize(
    ("namespace", "resource", "key"),
    [
        # Pinned: a changed key would let an old and a new release hold one resource at once.
        ("perso_lock_leases", "deploy", -5016709007016484365),
        ("perso_lock_leases", "", 8680189538922597094),
        ("perso_lock_leases", "é/ü", 7555939199923930043),
        # Another table is another lock space.
        ("other", "deploy", -3111831442265105666),
    ],
)
def test_advisory_key_is_a_keyed_blake2b_of_the_resource(
    namespace: str, resource: str, key: int
) -> None:
    assert advisory_key(namespace, resource) == key


@pytest.mark.parametrize("resource", ["", "r", "deploy", "model:7", "x" * 1000])
def test_advisory_keys_are_signed_64_bit(resource: str) -> None:
    assert -(2**63) <= advisory_key("perso_lock_leases", resource) < 2**63


def test_advisory_keys_spread_over_names() -> None:
    keys = {advisory_key("t", f"r{i}") for i in range(10_000)}
    assert len(keys) == 10_000
    assert any(k < 0 for k in keys)
    assert any(k > 0 for k in keys)


@pytest.mark.parametrize(
    ("key", "classid", "objid"),
    [
        (0, 0, 0),
        (42, 0, 42),
        (2**32, 1, 0),
        (2**32 + 7, 1, 7),
        (2**63 - 1, 0x7FFF_FFFF, 0xFFFF_FFFF),
        (-1, 0xFFFF_FFFF, 0xFFFF_FFFF),
        (-(2**63), 0x8000_0000, 0),
        (-5016709007016484365, 3126923708, 3746013683),
    ],
)
def test_lock_object_splits_the_key_as_pg_locks_does(key: int, classid: int, objid: int) -> None:
    assert lock_object(key) == (classid, objid)


@pytest.mark.parametrize("table", ["perso_lock_leases", "_t", "t1", "a" * 63])
def test_plain_table_names_are_accepted(table: str) -> None:
    assert check_table_name(table) == table


@pytest.mark.parametrize(
    "table",
    ["", "1t", "Leases", "lock-leases", "public.leases", "t; DROP TABLE x", "a" * 64, "t\n"],
)
def test_other_table_names_are_refused(table: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        check_table_name(table)
