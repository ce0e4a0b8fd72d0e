"""Ranking policies: a named, versioned configuration of our own ranker, or one of
two references, as the registry keeps it, the deployment pointer holds it, the sync stream
carries it and offline evaluation replays it.

A policy is data, not code: ``kind`` picks the ranker (``ranker``: Thompson sampling on the
learned posteriors, ``relevance.slate``) or a reference (``random``: a uniformly random
slate of the candidates; ``popular``: the candidates by their engagement rate's posterior
mean, deterministic), and the ranker's knobs are

- ``exploration_weight``: the draws' spread (``relevance.slate.spread_for``; 0.3 is plain
  Thompson sampling, 0 ranks by the posterior means);
- ``diversity_weight``: maximal marginal relevance's weight (0: off);
- ``emotion_rules``: the emotion rules (``origin.ranking.rerank``) on or off;
- ``user_prior_scale``: the per-user model's prior strength, as the prior's variance scale
  (``relevance.user_model.PRIOR_SCALE``): larger is a weaker prior, a user's own evidence
  counts sooner. Applied when ranking (``relevance.user_model.with_prior``), so that a
  candidate can be replayed on logged models and promoted without re-learning anyone.

A version is never changed once written: a changed configuration under the same name is the
next version. ``label`` (``name/version``) is what decisions and responses carry.

Wire form: JSON ``{"name", "version", "kind", ...knobs}``, decoded strictly
(``MalformedMessage`` naming the field).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

from protocol.exceptions import MalformedMessage

Kind = Literal["ranker", "random", "popular"]
KINDS: tuple[str, ...] = get_args(Kind)
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# What a name must look like, for an error message.
NAME_RULE = "1 to 64 of a-z, 0-9, '_' and '-', starting with a letter or digit"
# The name of the policy the settings configure (``PERSO_EXPLORATION_WEIGHT`` ...): live
# until a policy is promoted.
CONFIGURED = "configured"

# Each knob's bounds, as the settings bound them.
BOUNDS: dict[str, tuple[float, float]] = {
    "exploration_weight": (0.0, 1.0),
    "diversity_weight": (0.0, 1.0),
    "user_prior_scale": (1e-3, 10_000.0),
}


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    kind: Kind = "ranker"
    exploration_weight: float = 0.05
    diversity_weight: float = 0.0
    emotion_rules: bool = False
    user_prior_scale: float = 32.0


# The knobs' shipped defaults, read by the settings and the policy API (one home for them).
DEFAULT_CONFIG = PolicyConfig()


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    version: str
    config: PolicyConfig

    @property
    def label(self) -> str:
        return f"{self.name}/{self.version}"


def config_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Each (field, reason) that keeps ``doc`` from being a ``PolicyConfig``: unknown fields,
    a kind that is not one of ``KINDS``, a knob out of its ``BOUNDS``."""
    problems: list[tuple[str, str]] = []
    known = set(PolicyConfig.__dataclass_fields__)
    problems += [(name, "not a policy setting") for name in doc if name not in known]
    kind = doc.get("kind", "ranker")
    if kind not in KINDS:
        problems.append(("kind", f"is {kind!r}, expected one of {', '.join(KINDS)}"))
    for name, (low, high) in BOUNDS.items():
        if name not in doc:
            continue
        value = doc[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append((name, "is not a number"))
        elif not (math.isfinite(value) and low <= value <= high):
            problems.append((name, f"is {value}, expected {low:g} to {high:g}"))
    if "emotion_rules" in doc and not isinstance(doc["emotion_rules"], bool):
        problems.append(("emotion_rules", "is not a boolean"))
    return problems


def config_of(doc: dict[str, Any]) -> PolicyConfig:
    """The configuration ``doc`` describes (missing knobs at their defaults);
    ``MalformedMessage`` naming the first problem (``config_problems``)."""
    problems = config_problems(doc)
    if problems:
        name, reason = problems[0]
        raise MalformedMessage(f"policy field {name!r} {reason}")
    values: dict[str, Any] = {k: float(v) if k in BOUNDS else v for k, v in doc.items()}
    return PolicyConfig(**values)


def encode_config(config: PolicyConfig) -> bytes:
    """``config`` alone, canonical (sorted keys, knobs as floats): equal configurations
    encode to equal bytes, which is how the registry tells a changed one."""
    doc = {k: float(v) if k in BOUNDS else v for k, v in asdict(config).items()}
    return json.dumps(doc, sort_keys=True).encode()


def decode_config(raw: bytes | str) -> PolicyConfig:
    """What ``encode_config`` wrote; ``MalformedMessage`` naming the problem."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not a policy configuration: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage("a policy configuration is a JSON object")
    return config_of(doc)


def encode_policy(policy: Policy) -> bytes:
    doc = {"name": policy.name, "version": policy.version, **asdict(policy.config)}
    return json.dumps(doc, sort_keys=True).encode()


def decode_policy(raw: bytes | str) -> Policy:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not a policy: {exc}") from exc
    if not isinstance(doc, dict):
        raise MalformedMessage("a policy is a JSON object")
    name, version = doc.pop("name", None), doc.pop("version", None)
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise MalformedMessage(f"policy field 'name' is {name!r}, expected {NAME_RULE}")
    if not isinstance(version, str) or not version:
        raise MalformedMessage(f"policy field 'version' is {version!r}, expected a string")
    return Policy(name, version, config_of(doc))


# The live policy as an origin ranks by it now (``GET``, service token): what an edge that
# starts, or finds a pool filled under a policy it does not hold, adopts
# (``edge.node.Edge.read_live_policy``), where the sync stream's ``ModelEpoch`` reached it
# before it listened.
LIVE_POLICY_PATH = "/v1/internal/policy"


def encode_live(epoch: int, policy: Policy) -> bytes:
    """The answer of ``LIVE_POLICY_PATH``: the deployment epoch that made ``policy`` live (0:
    none, the configured policy) and the policy (``encode_policy``'s document)."""
    return json.dumps({"epoch": epoch, "policy": json.loads(encode_policy(policy))}).encode()


def decode_live(raw: bytes) -> tuple[int, Policy]:
    """``encode_live``'s epoch and policy; MalformedMessage for anything else."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not a live policy: {exc}") from exc
    if not isinstance(doc, dict) or set(doc) != {"epoch", "policy"}:
        raise MalformedMessage("a live policy is an object of epoch and policy")
    epoch = doc["epoch"]
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise MalformedMessage(f"live policy epoch {epoch!r} is not a count")
    return epoch, decode_policy(json.dumps(doc["policy"]))
