"""What the stack's children are told: the secrets they share (the operator's where set,
else made up for this run) and the environment every child starts in."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from config.environment import env_name, settings_env
from config.settings import Settings


def edge_names(region: str, per_region: int) -> list[str]:
    """The names of a region's edge processes: ``edge-<region>``, or with more than one
    ``edge-<region>-<n>``."""
    if per_region == 1:
        return [f"edge-{region}"]
    return [f"edge-{region}-{n}" for n in range(per_region)]


def identity_of(name: str) -> str:
    """The service identity of edge process ``name`` (``protocol.service_tokens.NAME``)."""
    return name.lower()


@dataclass(frozen=True)
class StackSecrets:
    admin_token: str  # bearer token of the origin's admin API
    origin_token: str  # the shared service token, for the stack's tools
    identity_keys: str  # the keys edges verify user tokens with
    api_key: str  # the stack's own premium API key ``demo``
    api_keys: str  # PERSO_API_KEYS: the operator's keys, and the stack's own
    edge_tokens: dict[str, str]  # the service token of each edge process, by identity


def stack_secrets(s: Settings, per_region: int) -> StackSecrets:
    """The tokens and keys of a stack of ``per_region`` edge processes per region."""
    admin_token = s.admin_token.get_secret_value() if s.admin_token else secrets.token_urlsafe(32)
    origin_token = (
        s.origin_token.get_secret_value() if s.origin_token else secrets.token_urlsafe(32)
    )
    identity_keys = (
        s.identity_keys.get_secret_value() if s.identity_keys else secrets.token_urlsafe(32)
    )
    # Each edge process its own service identity at the origins, revocable alone, unless
    # the operator named the identities; the shared token stays for the stack's tools.
    edge_tokens = {} if s.service_tokens else _edge_tokens(s, per_region)
    api_key = secrets.token_urlsafe(24)
    api_keys = f"demo:premium:{api_key}"
    if s.api_keys:  # the operator's keys stay; the stack's own demo key joins them
        api_keys = f"{s.api_keys.get_secret_value()},{api_keys}"
    return StackSecrets(admin_token, origin_token, identity_keys, api_key, api_keys, edge_tokens)


def _edge_tokens(s: Settings, per_region: int) -> dict[str, str]:
    """A service token for each edge process ``start`` starts, by its identity."""
    return {
        identity_of(name): secrets.token_urlsafe(32)
        for region in s.regions
        for name in edge_names(region, per_region)
    }


def children_env(
    s: Settings,
    redis_url: str,
    origin_urls: list[str],
    given: StackSecrets,
    *,
    redis_cluster: bool,
    per_region: int,
) -> dict[str, str]:
    """The environment of every child: this process's, the settings ``s``, and the stack's
    own Redis, origins and secrets (``redis_cluster``: the stack runs an embedded cluster)."""
    env = {
        **os.environ,
        **settings_env(s),
        "REDIS_URL": redis_url,
        "PERSO_ORIGIN_URL": origin_urls[0],
        "PERSO_ORIGIN_URLS": ",".join(origin_urls),
        "PERSO_DATA_DIR": str(s.data_dir),
        "PERSO_HOST": s.host,
        "PERSO_ADMIN_TOKEN": given.admin_token,
        "PERSO_ORIGIN_TOKEN": given.origin_token,
        "PERSO_IDENTITY_KEYS": given.identity_keys,
        "PERSO_API_KEYS": given.api_keys,
    }
    if given.edge_tokens:
        env["PERSO_SERVICE_TOKENS"] = ",".join(f"{n}={t}" for n, t in given.edge_tokens.items())
    # Origin 0 is the catalog origin: it opens the store the stack has just filled.
    env.pop(env_name("catalog_origin_url"), None)
    # One URL for all would be every process's: each advertises its own port instead.
    env.pop(env_name("advertise_url"), None)
    if redis_cluster and not s.redis_wait_replicas:
        # Durable feedback: acknowledged once the partition's replica has it, so a
        # failover's promotion loses none.
        env["PERSO_REDIS_WAIT_REPLICAS"] = "1"
    if s.demo_tokens and s.demo_api_key is None:
        # The storefront's demo token route asks the origin with the stack's own key.
        env["PERSO_DEMO_API_KEY"] = given.api_key
    if per_region > 1 and s.edge_store != "redis":
        # A region's processes are one PoP: its store is the stack's Redis (each
        # region's keys in their own slot), unless the operator named one.
        env["PERSO_EDGE_STORE"] = "redis"
        env["PERSO_EDGE_STORE_URL"] = redis_url
    return env
