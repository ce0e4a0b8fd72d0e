"""Reading a msgpack map that another process wrote (a pool, a pool fill, a user's state,
item vectors): the checks every such codec starts with and its typed fields, each failure a
``MalformedMessage`` that says what was being read."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

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


def typed(doc: dict[Any, Any], what: str, name: str, kind: type) -> Any:
    """Field ``name`` of ``doc`` (a ``what``), which must be a ``kind`` (a bool is no int)."""
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedMessage(
            f"{what}: field {name!r} is not of type {kind.__name__}: {value!r:.60}"
        )
    return value


def strings(doc: dict[Any, Any], what: str, name: str, n: int | None = None) -> list[str]:
    """Field ``name``: a list of non-empty strings (``n`` of them, when given)."""
    values: list[str] = typed(doc, what, name, list)
    if not all(isinstance(v, str) and v for v in values):
        raise MalformedMessage(f"{what}: field {name!r} holds something not a non-empty string")
    if n is not None and len(values) != n:
        raise MalformedMessage(f"{what}: field {name!r} has {len(values)} values for {n} items")
    return values


def array(
    doc: dict[Any, Any], what: str, name: str, dtype: str, count: int, *, positive: bool = False
) -> npt.NDArray[Any]:
    """Field ``name``: the bytes of ``count`` finite numbers of ``dtype`` (each positive,
    with ``positive``)."""
    raw = typed(doc, what, name, bytes)
    width = np.dtype(dtype).itemsize
    if len(raw) != count * width:
        raise MalformedMessage(f"{what}: field {name!r} is {len(raw)} bytes, not {count * width}")
    values = np.frombuffer(raw, dtype=dtype)
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise MalformedMessage(f"{what}: field {name!r} holds a non-finite number")
    if positive and count and not (values > 0).all():
        raise MalformedMessage(f"{what}: field {name!r} holds a number that is not positive")
    return values
