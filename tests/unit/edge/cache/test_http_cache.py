from __future__ import annotations

import pytest

from edge.cache.http_cache import age, cache_control, etag, items_digest, not_modified

TAG = etag(user_id="u", model_version="m", items=items_digest(["a", "b"]), explain=False)


@pytest.mark.parametrize(
    ("changed", "same"),
    [
        ({}, True),
        ({"user_id": "v"}, False),
        ({"model_version": "m2"}, False),
        ({"item_ids": ["b", "a"]}, False),
        ({"item_ids": ["a"]}, False),
        ({"item_ids": ["ab"]}, False),
        ({"item_ids": ["a", "b"], "user_id": "u"}, True),
        ({"explain": True}, False),
    ],
)
def test_etag_names_what_the_answer_shows(changed: dict[str, object], same: bool) -> None:
    parts: dict[str, object] = {
        "user_id": "u",
        "model_version": "m",
        "item_ids": ["a", "b"],
        "explain": False,
    }
    parts.update(changed)
    tag = etag(
        user_id=str(parts["user_id"]),
        model_version=str(parts["model_version"]),
        items=items_digest(parts["item_ids"]),  # type: ignore[arg-type]
        explain=bool(parts["explain"]),
    )
    assert (tag == TAG) is same
    assert TAG.startswith('W/"')
    assert TAG.endswith('"')


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        (TAG, True),
        (TAG[2:], True),  # strong form of the same tag: weak comparison
        ('"other", ' + TAG, True),
        ('W/"other"', False),
        ("*", True),
    ],
)
def test_if_none_match(header: str | None, matches: bool) -> None:
    assert not_modified(header, TAG) is matches


@pytest.mark.parametrize(
    ("fresh_for", "degraded", "value"),
    [
        (299.7, False, "private, max-age=299"),
        (-3, False, "private, max-age=0"),
        (100, True, "no-store"),
    ],
)
def test_cache_control(fresh_for: float, degraded: bool, value: str) -> None:
    assert cache_control(fresh_for_s=fresh_for, degraded=degraded) == value


@pytest.mark.parametrize(("now", "filled", "value"), [(10.9, 0, "10"), (0, 5, "0")])
def test_age(now: float, filled: float, value: str) -> None:
    assert age(now, filled) == value
