"""The rules of several origins over one catalog: roles, what to reload, how reloads add up."""

from __future__ import annotations

import pytest

from config.settings import Settings
from origin.catalog.replication import (
    EVERYTHING,
    NOTHING,
    CatalogMark,
    CatalogRole,
    Reload,
    announces_at_start,
    merged,
    reload_for,
    reloads_on_gap,
    role_of,
)
from sync.messages import CatalogChange

ME = "me"
A, AB, BC, ABC = (Reload(item_ids=tuple(ids)) for ids in ("a", "ab", "bc", "abc"))
HELD = CatalogMark(7, "items__r2")


@pytest.mark.parametrize(
    ("fields", "role"),
    [
        ({}, CatalogRole.OWNER),
        ({"qdrant_url": "http://qdrant:6333"}, CatalogRole.SHARED),
        ({"catalog_origin_url": "http://127.0.0.1:8100"}, CatalogRole.REPLICA),
    ],
)
def test_role_of(fields: dict[str, str], role: CatalogRole) -> None:
    assert role_of(Settings(**fields)) is role  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "reload"),
    [
        # its own write: swapped in when it wrote it
        (CatalogChange(ME, 8, "items__r2", ("a",)), NOTHING),
        (CatalogChange(ME, 8, "items__r3"), NOTHING),
        # another origin's items, whatever the mark
        (CatalogChange("other", 8, "items__r2", ("a", "b")), Reload(item_ids=("a", "b"))),
        (CatalogChange("other", 7, "items__r2", ("a",)), Reload(item_ids=("a",))),
        (CatalogChange("other", 8, "items__r2", ()), NOTHING),
        # everything: only when the catalog announced is not the one held
        (CatalogChange("other", 7, "items__r2"), NOTHING),
        (CatalogChange("other", 8, "items__r2"), EVERYTHING),
        (CatalogChange("other", 7, "items__r3"), EVERYTHING),  # a rebuild's promotion
        (CatalogChange("other", 7, None), EVERYTHING),
        (CatalogChange("other", 6, "items__r2"), EVERYTHING),  # a store restored from a backup
    ],
)
def test_reload_for(change: CatalogChange, reload: Reload) -> None:
    assert reload_for(ME, HELD, change) == reload


def test_an_origin_that_knows_no_mark_reloads_every_announced_catalog() -> None:
    assert reload_for(ME, None, CatalogChange("other", 0, None)) == EVERYTHING


@pytest.mark.parametrize(
    ("pending", "more", "expected"),
    [
        (NOTHING, NOTHING, NOTHING),
        (NOTHING, A, A),
        (AB, BC, ABC),  # each once, in the order first named
        (BC, AB, Reload(item_ids=("b", "c", "a"))),
        (A, EVERYTHING, EVERYTHING),
        (EVERYTHING, A, EVERYTHING),
        (EVERYTHING, NOTHING, EVERYTHING),
    ],
)
def test_reloads_add_up(pending: Reload, more: Reload, expected: Reload) -> None:
    assert merged(pending, more) == expected


@pytest.mark.parametrize(
    ("reload", "nothing"),
    [(NOTHING, True), (Reload(item_ids=("a",)), False), (EVERYTHING, False)],
)
def test_nothing(reload: Reload, nothing: bool) -> None:
    assert reload.nothing is nothing


@pytest.mark.parametrize(
    ("role", "on_gap", "at_start"),
    [
        # the only writer of its store missed nothing of it, and tells replicas what it holds
        (CatalogRole.OWNER, False, True),
        (CatalogRole.SHARED, True, False),
        (CatalogRole.REPLICA, True, False),
    ],
)
def test_what_each_role_does_on_a_gap_and_at_start(
    role: CatalogRole, on_gap: bool, at_start: bool
) -> None:
    assert reloads_on_gap(role) is on_gap
    assert announces_at_start(role) is at_start
