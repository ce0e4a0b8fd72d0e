"""Settings and the environment: the variable behind each field, the environment that
gives a child process the same settings, and reading the environment into ``Settings``
with errors that name the variables."""

from __future__ import annotations

from pydantic import AliasChoices, SecretStr, ValidationError

from config.settings import ConfigError, Settings


def env_name(field: str) -> str:
    """The environment variable behind a settings field."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices):
        first = alias.choices[0]
        if isinstance(first, str):
            return first
    return f"PERSO_{field.upper()}"


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a child process exactly these settings (unset fields
    are left out, so the child takes their defaults)."""
    env: dict[str, str] = {}
    for field in Settings.model_fields:
        value = getattr(settings, field)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            text = value.get_secret_value()
        elif isinstance(value, tuple):
            text = ",".join(str(part) for part in value)
        else:
            text = str(value)
        env[env_name(field)] = text
    return env


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; ``overrides`` (field names) win over it.

    Raises ``ConfigError`` naming each offending environment variable.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = err.get("loc", ())
            name = env_name(str(loc[0])) if loc else "configuration"
            lines.append(f"{name}: {err.get('msg')}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from exc
