"""What the settings accept beyond their fields' types and bounds: the checks
``config.settings.Settings`` runs on single fields (lists split at commas, URLs, Redis
addresses, networks, tokens, keys) and on the whole (settings that only make sense
together). Each raises ``ValueError``, which pydantic reports against the field's
environment variable (``config.environment.load_settings``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import SecretStr

from protocol.identity import parse_keys
from protocol.scrape_networks import parse_networks
from protocol.service_tokens import parse_service_tokens
from redis_client.address import parse as parse_redis_address

if TYPE_CHECKING:
    from config.settings import Settings

REGION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def split_comma_list(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def check_ops_scrape_networks(value: tuple[str, ...]) -> tuple[str, ...]:
    parse_networks(value)  # ValueError says which is not a network
    return value


def check_advertise_url(value: str | None) -> str | None:
    if value is not None and not is_http_url(value):
        raise ValueError(f"not an http(s) URL with a host: {value}")
    return value.rstrip("/") if value else None


def check_origin_urls(value: tuple[str, ...]) -> tuple[str, ...]:
    bad = [url for url in value if not is_http_url(url)]
    if bad:
        raise ValueError(f"not an http(s) URL with a host: {', '.join(bad)}")
    if len(set(value)) != len(value):
        raise ValueError(f"an origin is named twice: {','.join(value)}")
    return value


def check_redis_url(value: str | None) -> str | None:
    if value is not None:
        parse_redis_address(value)  # AddressError (a ValueError) says what is wrong
    return value


def check_service_tokens(value: SecretStr | None) -> SecretStr | None:
    if value is not None:
        parse_service_tokens(value.get_secret_value())  # ValueError names the problem
    return value


def check_identity_keys(value: SecretStr | None) -> SecretStr | None:
    if value is not None:
        parse_keys(value.get_secret_value())  # ValueError names the problem
    return value


def check_together(settings: Settings) -> Settings:
    """The settings that only make sense together; ``ValueError`` names the variables."""
    if not settings.regions:
        raise ValueError("PERSO_REGIONS must name at least one region")
    if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
        raise ValueError("PERSO_TLS_CERT_FILE and PERSO_TLS_KEY_FILE go together: set both")
    missing = [
        str(path)
        for path in (settings.tls_cert_file, settings.tls_key_file, settings.tls_ca_file)
        if path is not None and not path.is_file()
    ]
    if missing:
        raise ValueError(f"PERSO_TLS_*: no such file: {', '.join(missing)}")
    if settings.edge_store == "redis" and not settings.edge_store_url:
        raise ValueError("PERSO_EDGE_STORE=redis needs PERSO_EDGE_STORE_URL")
    if settings.lock_backend == "redlock" and len(settings.lock_redlock_urls) < 3:
        raise ValueError(
            "PERSO_LOCK_BACKEND=redlock needs PERSO_LOCK_REDLOCK_URLS: at least 3 "
            "comma-separated Redis URLs of independent nodes (an odd number)"
        )
    if settings.edge_feedback_timeout_ms <= settings.feedback_retry_ms:
        raise ValueError(
            "PERSO_EDGE_FEEDBACK_TIMEOUT_MS must be above PERSO_FEEDBACK_RETRY_MS: an edge "
            "would give up on feedback its origin is still trying to append"
        )
    if settings.origin_eject_max_s < settings.origin_eject_base_s:
        raise ValueError("PERSO_ORIGIN_EJECT_MAX_S must be at least PERSO_ORIGIN_EJECT_BASE_S")
    if settings.lock_backend == "postgres" and settings.pg_dsn is None:
        raise ValueError("PERSO_LOCK_BACKEND=postgres needs PG_DSN")
    if settings.catalog_origin_url and settings.qdrant_url:
        raise ValueError(
            "PERSO_CATALOG_ORIGIN_URL is for Qdrant local mode; with QDRANT_URL every "
            "origin opens the server itself: unset one of them"
        )
    if len(set(settings.regions)) != len(settings.regions):
        raise ValueError(f"PERSO_REGIONS has duplicates: {','.join(settings.regions)}")
    # Region names go into Redis keys and hash tags (protocol.keys): nothing that could
    # make one region's key another's.
    bad = [r for r in (*settings.regions, settings.region) if not REGION_NAME.fullmatch(r)]
    if bad:
        raise ValueError(
            "PERSO_REGIONS, PERSO_REGION: a region's name is letters, digits, '-' and '_' "
            f"(at most 64): {', '.join(bad)}"
        )
    return settings


def is_http_url(url: str) -> bool:
    """An absolute http or https URL naming a host (an origin's base URL)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # a ValueError when out of range
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0
