from __future__ import annotations

from pathlib import Path

import pytest

from config.environment import env_name, load_settings
from config.settings import ConfigError
from config.tls import client_verify, scheme


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    assert settings.redis_url is None
    assert settings.regions == ("us-east", "eu-west", "ap-south")
    assert settings.resolved_qdrant_path == Path(".perso/qdrant")
    assert (settings.edge_ttl_power_s, settings.edge_ttl_active_s) == (300, 600)


def test_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://h:1/0")
    monkeypatch.setenv("PERSO_REGIONS", "eu-west, us-west")
    monkeypatch.setenv("PERSO_EMBEDDING_DIM", "64")
    monkeypatch.setenv("QDRANT_API_KEY", "s3cret")
    settings = load_settings()
    assert settings.redis_url == "redis://h:1/0"
    assert settings.regions == ("eu-west", "us-west")
    assert settings.embedding_dim == 64
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "mentioned"),
    [
        ("PERSO_EDGE_TTL_POWER_S", "soon", "PERSO_EDGE_TTL_POWER_S"),
        ("PERSO_EMBEDDING_DIM", "2", "PERSO_EMBEDDING_DIM"),
        ("PERSO_REGIONS", "a,a", "PERSO_REGIONS"),
        ("PERSO_REGIONS", "us-east,eu:west", "PERSO_REGIONS"),
        ("PERSO_REGION", "us east", "PERSO_REGION"),
        ("REDIS_URL", "redis-cluster://h1:70000", "REDIS_URL"),
        ("REDIS_URL", "mongodb://h1", "REDIS_URL"),
        ("PERSO_EDGE_STORE_URL", "redis-cluster://", "PERSO_EDGE_STORE_URL"),
        ("PERSO_ORIGIN_PORT", "70000", "PERSO_ORIGIN_PORT"),
        ("PERSO_LOCK_BACKEND", "zookeeper", "PERSO_LOCK_BACKEND"),
        ("PERSO_LOCK_BACKEND", "redlock", "PERSO_LOCK_REDLOCK_URLS"),
        ("PERSO_LOCK_BACKEND", "postgres", "PG_DSN"),
        ("PERSO_CATALOG", "", "PERSO_CATALOG"),
        ("PERSO_ORIGIN_URLS", "http://a:1,ftp://b", "PERSO_ORIGIN_URLS"),
        ("PERSO_ORIGIN_URLS", "a:8100", "PERSO_ORIGIN_URLS"),
        ("PERSO_ORIGIN_URLS", "http://a:99999", "PERSO_ORIGIN_URLS"),
        ("PERSO_ORIGIN_URLS", "http://:8100", "PERSO_ORIGIN_URLS"),
        ("PERSO_ORIGIN_URLS", "http://a:1,http://a:1", "PERSO_ORIGIN_URLS"),
        ("PERSO_ORIGIN_EJECT_AFTER", "0", "PERSO_ORIGIN_EJECT_AFTER"),
        ("PERSO_ORIGIN_EJECT_MAX_S", "1", "PERSO_ORIGIN_EJECT_MAX_S"),
        ("PERSO_ORIGIN_HEALTH_INTERVAL_S", "0", "PERSO_ORIGIN_HEALTH_INTERVAL_S"),
        ("PERSO_CATALOG_ORIGIN_URL", "127.0.0.1:8100", "PERSO_CATALOG_ORIGIN_URL"),
        ("PERSO_CATALOG_ORIGIN_WAIT_S", "0", "PERSO_CATALOG_ORIGIN_WAIT_S"),
    ],
)
def test_errors_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, mentioned: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=mentioned):
        load_settings()


@pytest.mark.parametrize(
    ("field", "variable"),
    [
        ("redis_url", "REDIS_URL"),
        ("qdrant_url", "QDRANT_URL"),
        ("origin_port", "PERSO_ORIGIN_PORT"),
    ],
)
def test_env_name(field: str, variable: str) -> None:
    assert env_name(field) == variable


def test_lock_backend_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().lock_backend == "redis"
    monkeypatch.setenv("PERSO_LOCK_BACKEND", "redlock")
    monkeypatch.setenv("PERSO_LOCK_REDLOCK_URLS", "redis://a:1, redis://b:2,redis://c:3")
    settings = load_settings()
    assert settings.lock_redlock_urls == ("redis://a:1", "redis://b:2", "redis://c:3")
    monkeypatch.setenv("PERSO_LOCK_REDLOCK_URLS", "redis://a:1,redis://b:2")
    with pytest.raises(ConfigError, match="at least 3"):
        load_settings()
    monkeypatch.setenv("PERSO_LOCK_BACKEND", "postgres")
    monkeypatch.setenv("PG_DSN", "postgresql://u:pw@h/db")
    settings = load_settings()
    assert settings.pg_dsn is not None
    assert "pw" not in repr(settings)


@pytest.mark.parametrize(
    ("value", "file"),
    [
        (None, None),  # the default: the sample catalog
        ("sample", None),
        ("empty", None),
        ("items.jsonl", Path("items.jsonl")),
        ("/data/shop/items.jsonl", Path("/data/shop/items.jsonl")),
    ],
)
def test_catalog_is_sample_empty_or_a_file(
    monkeypatch: pytest.MonkeyPatch, value: str | None, file: Path | None
) -> None:
    if value is not None:
        monkeypatch.setenv("PERSO_CATALOG", value)
    settings = load_settings()
    assert settings.catalog == (value or "sample")
    assert settings.catalog_file == file


@pytest.mark.parametrize(
    ("origin_urls", "origin_url", "expected"),
    [
        (None, None, ("http://127.0.0.1:8100",)),
        (None, "http://o:9", ("http://o:9",)),
        ("", "http://o:9", ("http://o:9",)),
        ("http://a:1", "http://o:9", ("http://a:1",)),
        (" http://a:1 , https://b.example/,http://[::1]:8100 ", None, None),
    ],
)
def test_an_edges_origins(
    monkeypatch: pytest.MonkeyPatch,
    origin_urls: str | None,
    origin_url: str | None,
    expected: tuple[str, ...] | None,
) -> None:
    """PERSO_ORIGIN_URLS, comma-separated; unset or empty: PERSO_ORIGIN_URL alone."""
    if origin_urls is not None:
        monkeypatch.setenv("PERSO_ORIGIN_URLS", origin_urls)
    if origin_url is not None:
        monkeypatch.setenv("PERSO_ORIGIN_URL", origin_url)
    listed = ("http://a:1", "https://b.example/", "http://[::1]:8100")
    assert load_settings().edge_origin_urls == (expected or listed)


def test_a_catalog_origin_is_for_local_mode_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSO_CATALOG_ORIGIN_URL", "http://127.0.0.1:8100")
    assert load_settings().catalog_origin_url == "http://127.0.0.1:8100"
    monkeypatch.setenv("QDRANT_URL", "http://127.0.0.1:6333")
    with pytest.raises(ConfigError, match="PERSO_CATALOG_ORIGIN_URL is for Qdrant local mode"):
        load_settings()


@pytest.mark.parametrize(
    ("files", "mentioned"),
    [
        ({"PERSO_TLS_CERT_FILE": "cert"}, "go together"),
        ({"PERSO_TLS_KEY_FILE": "key"}, "go together"),
        ({"PERSO_TLS_CERT_FILE": "cert", "PERSO_TLS_KEY_FILE": "missing"}, "no such file"),
        ({"PERSO_TLS_CA_FILE": "missing"}, "no such file"),
    ],
)
def test_tls_files_go_together_and_exist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: dict[str, str], mentioned: str
) -> None:
    for name in ("cert", "key"):
        (tmp_path / name).write_text("-----BEGIN-----\n")
    for variable, name in files.items():
        monkeypatch.setenv(variable, str(tmp_path / name))
    with pytest.raises(ConfigError, match=mentioned):
        load_settings()


def test_tls_names_the_scheme(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert scheme(load_settings()) == "http"
    assert client_verify(load_settings()) is True
    for name in ("cert", "key"):
        (tmp_path / name).write_text("-----BEGIN-----\n")
    monkeypatch.setenv("PERSO_TLS_CERT_FILE", str(tmp_path / "cert"))
    monkeypatch.setenv("PERSO_TLS_KEY_FILE", str(tmp_path / "key"))
    assert scheme(load_settings()) == "https"
