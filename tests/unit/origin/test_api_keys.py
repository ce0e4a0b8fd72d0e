from __future__ import annotations

import pytest

from origin.api_keys import ApiKey, find_key, parse_api_keys
from protocol.tiers import Tier

SECRET = "s" * 16


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("", ()),
        (f"shop:free:{SECRET}", (ApiKey("shop", Tier.FREE, SECRET),)),
        (
            f" a:premium:{SECRET} , b:standard:{SECRET}x ",
            (ApiKey("a", Tier.PREMIUM, SECRET), ApiKey("b", Tier.STANDARD, SECRET + "x")),
        ),
        (f"shop:free:{SECRET}:with:colons", (ApiKey("shop", Tier.FREE, SECRET + ":with:colons"),)),
    ],
)
def test_parse(text: str, keys: tuple[ApiKey, ...]) -> None:
    assert parse_api_keys(text) == keys


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("shop", "entry 1: expected name:tier:secret"),
        (f"shop:free:{SECRET},x:gold:{SECRET}", "entry 2 \\(x\\): unknown tier 'gold'"),
        ("shop:free:short", "secret shorter than 16"),
        (f":free:{SECRET}", "expected name:tier:secret"),
        (f"a:free:{SECRET},a:premium:{SECRET}", "unique"),
    ],
)
def test_parse_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_api_keys(text)


KEYS = parse_api_keys(f"a:free:{SECRET},b:premium:{SECRET}b")


@pytest.mark.parametrize(
    ("presented", "name"),
    [(SECRET, "a"), (SECRET + "b", "b"), (None, None), ("", None), ("nope", None)],
)
def test_find_key(presented: str | None, name: str | None) -> None:
    found = find_key(presented, KEYS)
    assert (found.name if found else None) == name
