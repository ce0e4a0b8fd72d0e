"""Who an answer may be served to: the whole of a segment, or one user.

An answer's audience follows from what it was built from. ``Shared`` answers were built
from nothing of any one user (a segment's ranking, the popular list): any user of the
segment may be served them from a cache. ``Personal`` answers used one user's data (their
embedding, history, preferences, an explanation that mentions their interests): only that
user may ever be served them.

Edges cache answers, and a cache is where one user's answer could reach another. So the
audience is part of both halves of every cache write: a cache key is made for an audience
(``edge.cache.key``), an entry records the audience its answer was made for, and a store
refuses an entry whose audience is not its key's. A personal audience always puts the user
into the key; no key without a user can hold a personal answer. The origin says which
audience it built an answer for (``AUDIENCE_HEADER``); an edge believes "shared" only when it
asked for a shared answer, and takes anything else as personal to the requesting user.
"""

from __future__ import annotations

from dataclasses import dataclass

# Set by the origin on a personalize answer: "segment" when it was ranked for the
# segment without any of the requesting user's data, "user" otherwise.
AUDIENCE_HEADER = "x-perso-audience"
SEGMENT = "segment"
USER = "user"


@dataclass(frozen=True, slots=True)
class Shared:
    """Built from nothing of any one user; any user of ``segment`` may get it."""

    segment: str


@dataclass(frozen=True, slots=True)
class Personal:
    """Built from ``user_id``'s data; only ``user_id`` may get it."""

    user_id: str


Audience = Shared | Personal


def header_value(personal: bool) -> str:
    """What the origin says of an answer it ranked with (or without) the user's data."""
    return USER if personal else SEGMENT


def declared(header: str | None, *, asked: Audience, user_id: str) -> Audience:
    """The audience of an origin's answer to ``user_id``'s request that asked for ``asked``:
    shared only when both the request and the origin say so; personal to ``user_id`` in
    every other case (a missing or unknown header included)."""
    if header == SEGMENT and isinstance(asked, Shared):
        return asked
    return Personal(user_id)
