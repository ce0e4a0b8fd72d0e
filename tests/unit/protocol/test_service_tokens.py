"""``PERSO_SERVICE_TOKENS``' syntax (``protocol.service_tokens``)."""

from __future__ import annotations

import pytest

from protocol.service_tokens import parse_service_tokens

TOKEN = "x" * 24


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("", ()),
        (f"edge-a={TOKEN}", (("edge-a", TOKEN),)),
        (f" edge-a = {TOKEN} , edge_b={TOKEN}y ,", (("edge-a", TOKEN), ("edge_b", TOKEN + "y"))),
        # one identity rotating: its old token and its new one
        (f"edge-a={TOKEN},edge-a={TOKEN}y", (("edge-a", TOKEN), ("edge-a", TOKEN + "y"))),
    ],
)
def test_names_and_tokens(text: str, parsed: tuple[tuple[str, str], ...]) -> None:
    assert parse_service_tokens(text) == parsed


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (TOKEN, "name=token"),
        (f"Edge={TOKEN}", "name=token"),
        (f"={TOKEN}", "name=token"),
        (f"shared={TOKEN}", "PERSO_ORIGIN_TOKEN"),
        ("edge-a=short", "at least 24"),
        (f"edge-a={TOKEN},edge-a={TOKEN}y,edge-a={TOKEN}z", "edge-a: a name has at most 2"),
        (f"edge-a={TOKEN},edge-b={TOKEN}", "two names"),
    ],
)
def test_what_is_refused_says_why(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_service_tokens(text)
