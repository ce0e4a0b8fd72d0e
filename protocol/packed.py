"""Reading a msgpack map that another process wrote (a pool, a pool fill, a user's state):
the checks every such codec starts with, each failure a ``MalformedMessage`` that says what
was being read."""

from __future__ import annotations

from typing import Any

import msgpack

from protocol.exceptions import MalformedMessage


def unpack_map(raw: bytes, what: str, *, version: int | None = None) -> dict[Any, Any]:
    """``raw`` as a msgpack map; with ``version``, one whose ``"v"`` is that version."""
    try:
        doc = msgpack.unpackb(raw, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise MalformedMessage(f"{what}: not msgpack: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage(f"{what}: not a map but {type(doc).__name__}")
    if version is not None and doc.get("v") != version:
        raise MalformedMessage(f"{what}: unknown version {doc.get('v')!r}")
    return doc
