"""API keys of the customers' backends: who may ask the origin for user tokens, at which
rate-limit tier (the API's rate-limit tiers).

``PERSO_API_KEYS`` is a comma-separated list of ``name:tier:secret``. The name is what
tokens, logs and rate-limit buckets carry; the secret is only ever compared, in constant
time, never logged. Tiers are those of ``protocol.tiers``.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.tiers import Tier

MIN_SECRET_CHARS = 16


@dataclass(frozen=True, slots=True)
class ApiKey:
    name: str
    tier: Tier
    secret: str


def parse_api_keys(text: str) -> tuple[ApiKey, ...]:
    """``name:tier:secret,...``; ``ValueError`` naming the bad entry otherwise."""
    keys: list[ApiKey] = []
    for n, part in enumerate((p.strip() for p in text.split(",")), 1):
        if not part:
            continue
        name, sep, rest = part.partition(":")
        tier, sep2, secret = rest.partition(":")
        if not (sep and sep2 and name and secret):
            raise ValueError(f"entry {n}: expected name:tier:secret")
        try:
            parsed_tier = Tier(tier)
        except ValueError:
            known = ", ".join(t.value for t in Tier)
            raise ValueError(
                f"entry {n} ({name}): unknown tier {tier!r} (one of {known})"
            ) from None
        if len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"entry {n} ({name}): secret shorter than {MIN_SECRET_CHARS} chars")
        keys.append(ApiKey(name, parsed_tier, secret))
    names = [key.name for key in keys]
    if len(set(names)) != len(names):
        raise ValueError("API key names must be unique")
    return tuple(keys)


def find_key(presented: str | None, keys: Iterable[ApiKey]) -> ApiKey | None:
    """The key whose secret is ``presented``; every key is compared (constant time each)."""
    if not presented:
        return None
    found = None
    for key in keys:
        if hmac.compare_digest(presented.encode(), key.secret.encode()):
            found = key
    return found
