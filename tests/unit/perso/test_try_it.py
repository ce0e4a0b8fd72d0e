"""The first request ``perso up`` prints: a token with the stack's API key, then personalize."""

from __future__ import annotations

from pathlib import Path

import pytest

from perso.try_it import try_it

TOKEN_JSON = """-H 'content-type: application/json' -d '{"user_id":"u-1"}'"""
TO_TOKEN = """| sed -E 's/.*"token":"([^"]+)".*/\\1/')"""
PERSONALIZE_JSON = (
    "-H 'content-type: application/json' "
    """-d '{"user_id":"u-1","context":{"page_type":"home","device":"mobile"}}'"""
)
BEARER = '-H "authorization: Bearer $TOKEN"'


@pytest.mark.parametrize(
    ("given", "token_line", "personalize_line"),
    [
        (  # plain HTTP: the origin gives the token, the edge the recommendations
            ("http://127.0.0.1:8100", "http://127.0.0.1:8101", "k3Y_-9", None),
            "TOKEN=$(curl -s http://127.0.0.1:8100/v1/auth/token -H 'x-api-key: k3Y_-9' "
            f"{TOKEN_JSON} {TO_TOKEN}",
            f"curl -s -w '\\n' http://127.0.0.1:8101/v1/personalize {BEARER} {PERSONALIZE_JSON}",
        ),
        (  # HTTPS with the stack's own CA: both requests trust it, its path quoted
            (
                "https://127.0.0.1:9000",
                "https://127.0.0.1:9003",
                "abc",
                Path("/tmp/my certs/ca.pem"),
            ),
            "TOKEN=$(curl -s --cacert '/tmp/my certs/ca.pem' https://127.0.0.1:9000/v1/auth/token "
            f"-H 'x-api-key: abc' {TOKEN_JSON} {TO_TOKEN}",
            "curl -s --cacert '/tmp/my certs/ca.pem' -w '\\n' "
            f"https://127.0.0.1:9003/v1/personalize {BEARER} {PERSONALIZE_JSON}",
        ),
        (  # advertised host names, as behind a load balancer
            ("https://origin.example:8443", "https://edge-1.example:8443", "key", None),
            "TOKEN=$(curl -s https://origin.example:8443/v1/auth/token -H 'x-api-key: key' "
            f"{TOKEN_JSON} {TO_TOKEN}",
            f"curl -s -w '\\n' https://edge-1.example:8443/v1/personalize {BEARER} "
            f"{PERSONALIZE_JSON}",
        ),
    ],
)
def test_the_printed_lines(
    given: tuple[str, str, str, Path | None], token_line: str, personalize_line: str
) -> None:
    """``given``: the origin's URL, the first edge's, the API key, the CA file."""
    comment, token, personalize = try_it(*given)
    assert comment.startswith("# ")  # pasted with the rest, bash skips it
    assert token == token_line
    assert personalize == personalize_line
