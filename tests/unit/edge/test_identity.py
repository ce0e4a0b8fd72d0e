from __future__ import annotations

import pytest

from edge.identity import Verifier, bearer, require_same_user
from protocol.exceptions import ApiError
from tests.credentials import IDENTITY_KEY, user_token
from tests.fakes import FakeClock

KEYS = [IDENTITY_KEY.encode()]


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer ", None),
        ("Basic abc", None),
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("BEARER abc", "abc"),
    ],
)
def test_bearer(header: str | None, token: str | None) -> None:
    assert bearer(header) == token


def test_a_genuine_token_names_its_user() -> None:
    clock = FakeClock()
    verifier = Verifier(KEYS, clock=clock)
    token = user_token("u-1", now_s=clock())
    assert verifier.claims(f"Bearer {token}").user_id == "u-1"
    assert verifier.claims(f"Bearer {token}").user_id == "u-1"  # from the cache


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing bearer token"),
        ("Bearer nonsense", "invalid token: unknown token version"),
        ("Bearer " + user_token("u", now_s=0, key="x" * 32), "invalid token: bad signature"),
        ("Bearer " + user_token("u", now_s=FakeClock()() - 7200), "invalid token: token expired"),
    ],
)
def test_refused_with_401(header: str | None, reason: str) -> None:
    verifier = Verifier(KEYS, clock=FakeClock())
    with pytest.raises(ApiError) as raised:
        verifier.claims(header)
    assert (raised.value.status, raised.value.field) == (401, "authorization")
    assert reason in raised.value.reason


def test_a_cached_token_still_expires() -> None:
    clock = FakeClock()
    verifier = Verifier(KEYS, clock=clock)
    header = "Bearer " + user_token("u", now_s=clock(), ttl_s=60)
    verifier.claims(header)
    clock.tick(60)
    with pytest.raises(ApiError, match="expired"):
        verifier.claims(header)


def test_the_cache_is_bounded() -> None:
    clock = FakeClock()
    verifier = Verifier(KEYS, clock=clock, max_cached=3)
    for n in range(10):
        verifier.claims("Bearer " + user_token(f"u-{n}", now_s=clock()))
    assert len(verifier._verified) == 3


def test_another_users_id_is_forbidden() -> None:
    clock = FakeClock()
    claims = Verifier(KEYS, clock=clock).claims("Bearer " + user_token("u-1", now_s=clock()))
    require_same_user(claims, "u-1")
    with pytest.raises(ApiError) as raised:
        require_same_user(claims, "u-2")
    assert (raised.value.status, raised.value.field) == (403, "user_id")


def test_an_edge_without_keys_does_not_start() -> None:
    with pytest.raises(ValueError, match="PERSO_IDENTITY_KEYS"):
        Verifier([], clock=FakeClock())
