"""The policy registry: named, versioned ranking configurations in Redis
(``keys.policy(name)``, ``keys.POLICIES``).

Defining a configuration under a name whose newest version is that very configuration
returns that version (a retried or repeated definition changes nothing); a changed one
becomes the next version, "1", "2", ... Versions are never rewritten. One script does the
compare and the write, so two definitions racing under one name cannot both take the same
version.

``configured`` (``protocol.policies.CONFIGURED``) is not stored: it is the policy the
settings build (``config.settings.configured_policy``), with the one version
``PERSO_POLICY_VERSION``, and cannot be defined.
"""

from __future__ import annotations

from origin.exceptions import InvalidPolicyName
from protocol import keys
from protocol.policies import (
    CONFIGURED,
    NAME_PATTERN,
    NAME_RULE,
    Policy,
    PolicyConfig,
    decode_config,
    encode_config,
)
from redis_client.client import RedisClient

NEWEST = "newest"  # the field of the newest version


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be defined, or None."""
    if not NAME_PATTERN.match(name):
        return f"is {name!r}, expected {NAME_RULE}"
    if name == CONFIGURED:
        return f"{CONFIGURED!r} is the policy the settings configure; choose another name"
    return None


class PolicyRegistry:
    # KEYS[1] the policy's hash, KEYS[2] the set of names; ARGV[1] the name, ARGV[2] the
    # configuration (``encode_config``). Returns {version, 1} when it became a new version,
    # {version, 0} when it is the newest version already.
    DEFINE = """
local newest = redis.call('HGET', KEYS[1], 'newest')
if newest and redis.call('HGET', KEYS[1], newest) == ARGV[2] then
    return {newest, 0}
end
local version = tostring((tonumber(newest) or 0) + 1)
redis.call('HSET', KEYS[1], version, ARGV[2], 'newest', version)
redis.call('SADD', KEYS[2], ARGV[1])
return {version, 1}
"""

    def __init__(self, redis: RedisClient, configured: Policy) -> None:
        self._redis = redis
        self._define = redis.register_script(self.DEFINE)
        self.configured = configured

    async def define(self, name: str, config: PolicyConfig) -> tuple[Policy, bool]:
        """``config`` under ``name``: the policy stored, and whether it is a new version.
        ``InvalidPolicyName`` when ``name_problem`` finds one."""
        problem = name_problem(name)
        if problem is not None:
            raise InvalidPolicyName(f"policy name {problem}")
        version, created = await self._define(
            keys=[keys.policy(name), keys.POLICIES], args=[name, encode_config(config)]
        )
        return Policy(name, _text(version), config), bool(created)

    async def versions(self, name: str) -> list[Policy]:
        """Every version of ``name``, oldest first; none for an unknown name."""
        if name == CONFIGURED:
            return [self.configured]
        stored = await self._redis.hgetall(keys.policy(name))
        found = [
            Policy(name, _text(v), decode_config(raw))
            for v, raw in stored.items()
            if _text(v) != NEWEST
        ]
        return sorted(found, key=lambda p: int(p.version))

    async def get(self, name: str, version: str | None = None) -> Policy | None:
        """Version ``version`` of ``name`` (None: the newest); None when there is none."""
        if name == CONFIGURED:
            configured = self.configured
            return configured if version in (None, configured.version) else None
        key = keys.policy(name)
        if version is None:
            newest = await self._redis.hget(key, NEWEST)
            if newest is None:
                return None
            version = _text(newest)
        if not version.isdecimal():
            return None  # "newest" is the counter, not a version
        raw = await self._redis.hget(key, version)
        return None if raw is None else Policy(name, version, decode_config(raw))

    async def names(self) -> list[str]:
        """Every defined name, sorted, ``configured`` first."""
        stored = await self._redis.smembers(keys.POLICIES)
        return [CONFIGURED, *sorted(_text(n) for n in stored)]


def _text(value: bytes | str | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
