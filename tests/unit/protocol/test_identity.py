"""User tokens: what verifies, and every way a credential is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from protocol.identity import (
    Claims,
    InvalidCredential,
    issue,
    parse_keys,
    verify,
)
from protocol.segments import Segment

KEY = b"k" * 32
OTHER = b"o" * 32
NOW = 1_767_225_600
CLAIMS = Claims("u-1", Segment.ACTIVE, "standard", "shop", NOW, NOW + 3600)


def test_a_genuine_token_gives_back_its_claims() -> None:
    assert verify(issue(CLAIMS, KEY), [KEY], now_s=NOW) == CLAIMS


def test_any_configured_key_verifies_so_keys_rotate() -> None:
    token = issue(CLAIMS, OTHER)
    assert verify(token, [KEY, OTHER], now_s=NOW).user_id == "u-1"


def _tamper_payload(token: str) -> str:
    version, payload, signature = token.split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    forged = raw.replace(b'"u-1"', b'"u-2"')
    return ".".join([version, base64.urlsafe_b64encode(forged).rstrip(b"=").decode(), signature])


GOOD = issue(CLAIMS, KEY)


@pytest.mark.parametrize(
    ("token", "keys", "now", "reason"),
    [
        ("", [KEY], NOW, "malformed token"),
        ("x" * 5000, [KEY], NOW, "malformed token"),
        ("v2." + GOOD[3:], [KEY], NOW, "unknown token version"),
        ("v1.", [KEY], NOW, "malformed token"),
        ("v1.abc", [KEY], NOW, "malformed token"),
        (GOOD + "x", [KEY], NOW, "bad signature"),
        (GOOD, [OTHER], NOW, "bad signature"),
        (issue(CLAIMS, OTHER), [KEY], NOW, "bad signature"),
        (_tamper_payload(GOOD), [KEY], NOW, "bad signature"),
        (GOOD, [KEY], NOW + 3600, "token expired"),
        (GOOD, [KEY], NOW + 10_000, "token expired"),
        (GOOD.rsplit(".", 1)[0] + ".!!!", [KEY], NOW, "bad signature"),
    ],
)
def test_refused(token: str, keys: list[bytes], now: float, reason: str) -> None:
    with pytest.raises(InvalidCredential) as raised:
        verify(token, keys, now_s=now)
    assert raised.value.reason == reason


def test_still_valid_one_second_before_expiry() -> None:
    assert verify(GOOD, [KEY], now_s=NOW + 3599).expires_at == NOW + 3600


def test_signed_but_unreadable_claims_are_refused() -> None:
    payload = base64.urlsafe_b64encode(b'{"sub": 1}').rstrip(b"=").decode()
    signed = "v1." + payload
    sig = hmac.new(KEY, signed.encode(), hashlib.sha256).digest()
    token = signed + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()
    with pytest.raises(InvalidCredential, match="malformed claims"):
        verify(token, [KEY], now_s=NOW)


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("a" * 16, (b"a" * 16,)),
        (" " + "a" * 16 + " , " + "b" * 20, (b"a" * 16, b"b" * 20)),
    ],
)
def test_parse_keys(text: str, keys: tuple[bytes, ...]) -> None:
    assert parse_keys(text) == keys


@pytest.mark.parametrize("text", ["", " , ", "short", "a" * 16 + ",short"])
def test_parse_keys_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="identity key"):
        parse_keys(text)


def test_issue_refuses_a_short_key() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        issue(CLAIMS, b"short")
