"""Policies written inline (``name:knob=value,knob=value``, for a quick what-if) and the
two references, for an evaluation to compare (``perso evaluate``) or a shadow to run
(``PERSO_SHADOW_POLICY``, at an origin or an edge)."""

from __future__ import annotations

from protocol.exceptions import MalformedMessage
from protocol.policies import NAME_PATTERN, NAME_RULE, Policy, PolicyConfig, config_of

REFERENCES = {
    "random": Policy("random", "ref", PolicyConfig(kind="random")),
    "popular": Policy("popular", "ref", PolicyConfig(kind="popular")),
}
INLINE_VERSION = "inline"


def inline(spec: str) -> Policy:
    """``name:knob=value,...`` (a knob a ``PolicyConfig`` field), or a reference's name;
    ``MalformedMessage`` naming what is wrong."""
    if spec in REFERENCES:
        return REFERENCES[spec]
    name, _, knobs = spec.partition(":")
    if not NAME_PATTERN.match(name):
        raise MalformedMessage(f"candidate {spec!r}: the name must be {NAME_RULE}")
    doc: dict[str, object] = {}
    for part in filter(None, knobs.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise MalformedMessage(f"candidate {spec!r}: {part!r} is not knob=value")
        doc[key.strip()] = _value(value.strip())
    return Policy(name, INLINE_VERSION, config_of(doc))


def is_inline(spec: str) -> bool:
    """Whether ``spec`` is written inline or names a reference (else: a registered name)."""
    return ":" in spec or spec in REFERENCES


def _value(text: str) -> object:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text)
    except ValueError:
        return text
