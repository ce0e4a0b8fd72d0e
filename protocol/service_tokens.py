"""The service tokens an origin accepts, one per edge or other part (``PERSO_SERVICE_TOKENS``,
``origin.service_identities``): their syntax, checked where the settings are read."""

from __future__ import annotations

import re

SHARED = "shared"  # the identity of PERSO_ORIGIN_TOKEN
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MIN_TOKEN_CHARS = 24
ROTATING = 2  # tokens one identity may have at once


def parse_service_tokens(text: str) -> tuple[tuple[str, str], ...]:
    """``name=token,...`` as (name, token) pairs; ValueError naming the problem: a name that
    is not lower-case letters, digits, ``-`` and ``_`` (at most 64), one given more than
    twice (two tokens of one identity: the old and the new while it rotates) or
    ``shared``, a token shorter than ``MIN_TOKEN_CHARS`` or used twice."""
    pairs = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, token = part.partition("=")
        name, token = name.strip(), token.strip()
        if not sep or not NAME.fullmatch(name):
            raise ValueError(
                f"{name or part!r}: each entry is name=token, the name lower-case letters, "
                "digits, '-' and '_'"
            )
        if name == SHARED:
            raise ValueError(f"{SHARED!r} is PERSO_ORIGIN_TOKEN's identity, not a name to give")
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"{name}: a token is at least {MIN_TOKEN_CHARS} characters")
        pairs.append((name, token))
    names = [n for n, _ in pairs]
    crowded = sorted({n for n in names if names.count(n) > ROTATING})
    if crowded:
        raise ValueError(
            f"{', '.join(crowded)}: a name has at most {ROTATING} tokens (the old and the new, "
            "while it rotates)"
        )
    if len({t for _, t in pairs}) != len(pairs):
        raise ValueError("a token is given to two names")
    return tuple(pairs)
